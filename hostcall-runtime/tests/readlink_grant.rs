//! `readlink` never tells the GPU a host name above its grant: a link's target that
//! stays in the grant is answered (a relative one as it stands, an absolute one as its
//! guest path); one that leaves it, by `..` or by an absolute path elsewhere, is
//! answered `EACCES`, as any path outside the grants is.

mod common;

use common::{c, neg, quiet, run_on};
use hostcall_abi::errno::EACCES;
use hostcall_abi::std_services::Fs;

#[test]
fn readlink_answers_targets_in_the_grant_and_refuses_those_that_leave_it() {
    let base = tempfile::tempdir().unwrap();
    let base = base.path().canonicalize().unwrap();
    let grant = base.join("a/b/c/grant");
    std::fs::create_dir_all(grant.join("sub")).unwrap();
    let link = |target: &str, name: &str| std::os::unix::fs::symlink(target, grant.join(name));
    link("../../../../home/alice/x", "up").unwrap();
    link("../../../../home/alice/x", "sub/up").unwrap();
    link("sub/../../secret", "around").unwrap();
    link("../y", "sub/inside").unwrap();
    link("sub/../y", "through").unwrap();
    let host = |rel: &str| format!("{}/{rel}", grant.display());
    link(&host("../../secret"), "abs_up").unwrap();
    link(&host("sub/../y"), "abs_inside").unwrap();
    link("/etc/passwd", "abs_elsewhere").unwrap();
    let names = [
        "up",
        "sub/up",
        "around",
        "sub/inside",
        "through",
        "abs_up",
        "abs_inside",
        "abs_elsewhere",
    ];
    let (answers, _) = run_on(quiet().preopen_dir(&grant, "/data"), 1, move |_, t| {
        let fs = t.client::<dyn Fs>();
        names
            .iter()
            .map(|name| {
                let mut out = [0u8; 4096];
                let n = c(fs.readlink(format!("/data/{name}").as_bytes(), &mut out));
                match usize::try_from(n) {
                    Ok(n) => Ok(String::from_utf8(out[..n].to_vec()).unwrap()),
                    Err(_) => Err(n),
                }
            })
            .collect::<Vec<_>>()
    });
    let refused = Err(neg(EACCES));
    assert_eq!(
        answers,
        [
            refused.clone(),
            refused.clone(),
            refused.clone(),
            Ok("../y".to_owned()),
            Ok("sub/../y".to_owned()),
            refused.clone(),
            Ok("/data/y".to_owned()),
            refused,
        ],
        "for the links {names:?}"
    );
}
