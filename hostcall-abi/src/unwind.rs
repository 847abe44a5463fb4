//! Unwinding on the GPU, which has no unwind tables and no way to leave several frames
//! at once. ptx-builder lowers a binary built with `panic = "unwind"` (its
//! `crate::unwind`) so that unwinding is an ordinary return: a thread that unwinds holds
//! its exception in [`ThreadArea::unwinding`](crate::ThreadArea::unwinding) (0 while it
//! does not), every call that may unwind is followed by a look at that word, and a set
//! word sends control to the call's landing pad, or out of the function when it has
//! none. libc-hostcall defines these three functions; the lowering calls them.

/// `i32`: how many threads are unwinding now. Each look after a call that may unwind
/// reads it first (a plain load, cached), and asks [`UNWINDING`] only when it is not 0:
/// unwinding is rare, calls are not. A thread's own change to it is seen by its own later
/// reads (coherence), whatever other threads' changes it sees late.
pub const UNWINDERS: &str = "__hostcall_unwinders";
/// `i1 ()`: whether the calling thread is unwinding.
pub const UNWINDING: &str = "__hostcall_unwinding";
/// `ptr ()`: takes the calling thread's exception and clears its word; a landing pad's
/// value.
pub const UNWIND_TAKE: &str = "__hostcall_unwind_take";
/// `i32 (ptr exception)`, as `_Unwind_RaiseException`: sets the calling thread's
/// exception; `resume` and `_Unwind_RaiseException` become it, then a return.
pub const UNWIND_RESUME: &str = "__hostcall_unwind_resume";
