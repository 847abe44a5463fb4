//! Typed services: how a service declared with [`service!`](macro@crate::service) travels,
//! the checks both sides make of it, and the calling side over any transport
//! ([`Caller`]).
//!
//! A declared trait's every method is one service, with a name (`Trait.method`), the
//! text of its signature, and a fingerprint of that text and of the layouts of its
//! argument and result types. Its id is fixed by the declaration (`= 7`, AMD's numeric
//! ids, which [`USER_IDS`] bounds) or, by default, assigned by the host when it loads a
//! module and finds the service's [`ServiceSlot`] there (VectorWare's services by name).
//!
//! # Request
//! * `args[0]`: bytes the lane sends in its bulk buffer;
//! * the *fixed part*: each argument in order, a [`Plain`] value as its bytes at the next
//!   multiple of its alignment, a byte or str slice, or an output buffer, as its length
//!   (`u64`). Up to [`FIXED_INLINE`] bytes it is `args[1..6]`; a larger one (at most
//!   [`FIXED_MAX`]) opens the bulk bytes;
//! * the bulk bytes: the fixed part if it did not fit, then each input slice, each part
//!   starting at the next multiple of 8.
//!
//! # Answer
//! * the result: `-errno` for a failure (a `Result`'s `Err`, or the transport's own
//!   `ENOSYS`/`EINVAL`); otherwise the value's bytes zero-extended when it has at most
//!   [`VALUE_INLINE`] of them (so most answers fit the answer word), else 0;
//! * a value of up to [`VALUE_WORDS`] bytes in the slot's `args[1..5]`, except one of 5
//!   to 8 bytes whose bits, read as a `u64`, are below 2^47 ([`SMALL_VALUE`]): that one
//!   travels in the result as the small ones do, so that most `u64` answers (counts,
//!   sizes, handles) fit the answer word and cost one read of host memory, not seven; a
//!   larger value goes at the start of the bulk buffer;
//! * the output buffer (at most one per service, and not beside a value that goes in the
//!   bulk buffer), whole, at the start of the bulk buffer.

mod answer;
mod client;
mod closure;
mod declare;
mod dispatch;
mod plain;
mod request;
mod slot;
#[cfg(test)]
mod tests;

pub use crate::errno::Errno;
pub use answer::{Answered, Ret, ValuePlace, value_place};
pub use client::{Caller, Client, HostFn, closure_fixed_len};
pub use closure::{Args, HostClosure, closure_fingerprint};
#[doc(hidden)]
pub use declare::declared_by_std;
pub use dispatch::{Dispatch, Incoming, args_bytes};
pub use plain::{Filled, Plain};
pub use request::{
    Arg, Decoder, DeviceReader, DeviceSlice, Encoder, WireError, bulk_len, fixed_words,
};
pub use slot::{
    AnswerBytes, FdUse, ServiceSlot, Shape, Signature, SlotRecord, Waits, answer_bytes, count_kind,
    fingerprint, first_is_fd, fixed_len, ids_distinct, reads_input,
};

use crate::BULK_PER_LANE;

/// Fixed parts up to this many bytes travel in `args[1..6]`.
pub const FIXED_INLINE: usize = 40;
/// The largest fixed part (a declaration with a larger one does not compile).
pub const FIXED_MAX: usize = 256;
/// Values up to this many bytes travel in the result itself.
pub const VALUE_INLINE: usize = 4;
/// Values up to this many bytes travel in the slot's `args[1..5]`.
pub const VALUE_WORDS: usize = 32;
/// Values of up to 8 bytes whose bits are below this travel in the result.
pub const SMALL_VALUE: u64 = 1 << 47;
/// Bulk parts a request may send (the fixed part, when it does not fit, is one).
pub const MAX_INPUTS: usize = 4;
/// The largest value a service may return, and what one lane's bulk buffer holds.
pub const VALUE_MAX: usize = BULK_PER_LANE;

/// Ids a declaration may fix for its services (AMD's numeric ids). 0 is the default
/// handler's, which catches calls of ids nobody serves.
pub const USER_IDS: core::ops::Range<u32> = 1..0x4000_0000;
/// Ids the host assigns at load to services declared without one, and to closures.
pub const NAMED_IDS: core::ops::Range<u32> = 0x4000_0000..0x8000_0000;
/// Ids of std's own services ([`crate::Service`]): no user id can take them.
pub const STD_IDS: core::ops::Range<u32> = 0x8000_0000..0x8001_0000;
/// The id a by-name service's slot holds until the host binds it.
pub const UNBOUND: u32 = u32::MAX;

/// The prefix of every service slot's symbol in a GPU module; the rest is
/// `Trait__method`.
pub const SLOT_PREFIX: &str = "__HOSTCALL__";

/// Bytes of a [`ServiceSlot`] before its name and signature text.
pub const SLOT_HEADER: usize = 16;

/// `n` rounded up to a multiple of `to`.
pub(crate) const fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}
