//! Ending the program: `abort` (panics end here) and `exit`.

use core::ffi::c_int;

use hostcall_client::std_services::Lifecycle;

use crate::{Nvptx, ending, host};

/// Reports the aborting thread to the host, then stops the kernel ([`ending::stop`]).
/// std has already written any panic message to stderr; the host prints the thread's
/// coordinates and ends non-zero.
#[unsafe(no_mangle)]
pub extern "C" fn abort() -> ! {
    host::<dyn Lifecycle>().abort();
    ending::stop()
}

/// `abort` for a panic (std's panic runtime calls it, fixup 0009): the host ends the run
/// with 101, as a Rust program's panic does, after the message std has written.
#[unsafe(no_mangle)]
pub extern "C" fn __hostcall_panic_abort() -> ! {
    host::<dyn Lifecycle>().panic_abort();
    ending::stop()
}

/// Records the exit code with the host, then stops the kernel ([`ending::stop`]): the
/// host ends the process with `code` once the launch has stopped.
#[unsafe(no_mangle)]
pub extern "C" fn exit(code: c_int) -> ! {
    host::<dyn Lifecycle>().exit(code);
    ending::stop()
}

/// As `exit`: there are no atexit handlers or stdio buffers of libc's own to skip.
#[unsafe(no_mangle)]
pub extern "C" fn _exit(code: c_int) -> ! {
    exit(code)
}

/// Waits for a signal that never comes: std parks a second thread calling `exit` here
/// while the first one ends the program (which this thread then leaves).
#[unsafe(no_mangle)]
pub extern "C" fn pause() -> c_int {
    loop {
        ending::check_point();
        <Nvptx as hostcall_client::Platform>::nanosleep(1_000_000);
    }
}
