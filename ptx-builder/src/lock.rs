//! One GPU build of a crate at a time in a target dir, as Cargo holds its build dir to
//! one build: two builds of one crate at once would rewrite the link inputs the nested
//! build leaves (`<binary>.o/`) and the stages' outputs while the other reads them (seen:
//! `llvm-dis` killed by `SIGBUS` on a file the other build was rewriting). Builds of
//! different crates, which write apart, go on side by side.

use std::fs::{File, TryLockError};
use std::path::Path;

use crate::{BuildError, Progress, Result};

/// Holds the build of the crate at `krate` in the builder's folder `out` (the target
/// dir's `ptx-builder/`) until dropped; when another process holds it, says so and
/// waits for it (the lock is the OS's: it goes with a process that dies).
pub(crate) fn crate_build(out: &Path, krate: &Path, progress: Progress) -> Result<File> {
    let path = out.join(format!(
        "lock-{}",
        crate::cache::short_hash(krate.as_os_str().as_encoded_bytes(), 6)
    ));
    let io = |what: &str| BuildError::io(format!("{what} {}", path.display()));
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io("opening"))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            progress.status(
                "Blocking",
                &format!(
                    "waiting for another GPU build of {} to finish",
                    krate.display()
                ),
            );
            file.lock().map_err(io("locking"))?;
        }
        Err(TryLockError::Error(e)) => return Err(io("locking")(e)),
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_second_build_of_a_crate_waits_for_the_first_and_another_crate_does_not() {
        let out = tempfile::tempdir().unwrap();
        let first = crate_build(out.path(), Path::new("/w/a"), Progress::Quiet).unwrap();
        let other = crate_build(out.path(), Path::new("/w/b"), Progress::Quiet);
        assert!(other.is_ok(), "another crate builds beside it");
        let (tx, rx) = mpsc::channel();
        let dir = out.path().to_path_buf();
        let second = std::thread::spawn(move || {
            let held = crate_build(&dir, Path::new("/w/a"), Progress::Quiet);
            tx.send(()).unwrap();
            held.map(drop)
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "the second build of the crate went on while the first held it"
        );
        drop(first);
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the second build goes on once the first ends");
        second.join().unwrap().unwrap();
    }
}
