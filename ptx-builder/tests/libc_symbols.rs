//! The exported libc symbol list is checked in (`libc-hostcall/symbols.txt`): this test
//! fails when libc-hostcall's `#[unsafe(no_mangle)]` items and the list drift apart, and
//! when a function std needs on Linux ([`STD_NEEDS`]) is missing from it.

use std::collections::BTreeSet;
use std::path::Path;

const HEADER: &str = "\
# The symbols libc-hostcall exports to the GPU module (C functions std reaches, and the
# globals the host fills). Checked by ptx-builder/tests/libc_symbols.rs; after adding a
# function, regenerate with: HOSTCALL_BLESS=1 cargo test -p ptx-builder --test libc_symbols
";

/// Functions a kernel using `println!`, `File`, `Vec`, `BTreeMap`, `f64::sqrt` leaves
/// undefined, as read from the PTX this toolchain makes of such a kernel.
const STD_NEEDS: &[&str] = &[
    "open64",
    "read",
    "write",
    "close",
    "lseek64",
    "fstat64",
    "stat64",
    "getcwd",
    "realpath",
    "readlink",
    "getenv",
    "malloc",
    "calloc",
    "realloc",
    "free",
    "syscall",
    "__errno_location",
    "__xpg_strerror_r",
    "abort",
    "mmap64",
    "munmap",
    "pthread_key_create",
    "pthread_key_delete",
    "pthread_getspecific",
    "pthread_setspecific",
    "_Unwind_Backtrace",
    "_Unwind_GetIP",
    "dl_iterate_phdr",
    "gettid",
    "posix_memalign",
];

/// libc-hostcall's macros that define one exported stub per line of their invocation.
const STUB_MACROS: &[&str] = &["nosys", "returns_enosys"];

fn exported(src: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for e in std::fs::read_dir(src).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        let mut lines = text.lines();
        while let Some(l) = lines.next() {
            // Invocations of libc-hostcall's stub macros (`nosys! { name(args) -> ret; }`)
            // export one function per line.
            if let Some(mac) = l.trim().strip_suffix("! {")
                && STUB_MACROS.contains(&mac)
            {
                for item in lines.by_ref().take_while(|l| l.trim() != "}") {
                    let item = item.trim();
                    if let Some((name, _)) = item.split_once('(')
                        && !item.starts_with("//")
                    {
                        names.insert(name.to_owned());
                    }
                }
                continue;
            }
            if l.trim() != "#[unsafe(no_mangle)]" {
                continue;
            }
            let item = lines
                .by_ref()
                .find(|l| !l.trim_start().starts_with("#["))
                .unwrap_or("");
            if item.contains('$') {
                continue; // inside a stub macro's definition
            }
            let words: Vec<&str> = item
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .collect();
            let at = words.iter().position(|w| *w == "fn" || *w == "static");
            let name = at.and_then(|i| {
                words[i + 1..]
                    .iter()
                    .find(|w| !w.is_empty() && **w != "mut")
            });
            names.insert(
                name.unwrap_or_else(|| panic!("no name in {item:?}"))
                    .to_string(),
            );
        }
    }
    names
}

#[test]
fn checked_in_symbol_list_matches_libc_hostcall_and_covers_std() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let found = exported(&root.join("libc-hostcall/src"));
    let list_path = root.join("libc-hostcall/symbols.txt");
    let rendered = found.iter().fold(HEADER.to_owned(), |s, n| s + n + "\n");
    if std::env::var_os("HOSTCALL_BLESS").is_some() {
        std::fs::write(&list_path, &rendered).unwrap();
    }
    let listed = std::fs::read_to_string(&list_path).unwrap();
    assert_eq!(
        listed, rendered,
        "libc-hostcall/symbols.txt is stale: regenerate it (see its header)"
    );
    for need in STD_NEEDS {
        assert!(
            found.contains(*need),
            "std needs `{need}` and libc-hostcall does not define it"
        );
    }
}
