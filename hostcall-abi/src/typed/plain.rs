//! [`Plain`]: the values that travel as their bytes, the same on both targets.

use core::fmt;

/// A value that travels as its bytes.
///
/// # Safety
/// Implement it only for primitives, arrays of `Plain`, and `#[repr(C)]` or
/// `#[repr(transparent)]` types made of `Plain` fields with no padding, for which every
/// bit pattern is a valid value, and which hold no pointer the other side would follow
/// (a device address is a `u64`). Such a type has the same layout on nvptx64 and x86_64.
pub unsafe trait Plain: Copy + fmt::Debug + 'static {
    /// The type's name in the fingerprints of host closures, whose signatures have no
    /// declared text: primitives give theirs, so `f32` and `i32` differ; other types
    /// are told apart by size and alignment only, unless they name themselves.
    const NAME: &'static str = "";

    /// Bytes of the call's output buffer (`output_len` offered) that travel back with
    /// this value: all of them, unless the value counts what the host filled
    /// ([`Filled`]).
    #[inline]
    fn filled(&self, output_len: usize) -> usize {
        output_len
    }
}

/// How many bytes at the start of a call's output buffer the host filled, as a `read`
/// answers: only those travel back, where a buffer's every byte would (the GPU loads
/// the bulk buffer across PCIe a word at a time, so a 64-byte answer into a 4 KiB
/// buffer costs 64 bytes, not 4 KiB).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filled(pub usize);

// SAFETY: a `usize`, transparent.
unsafe impl Plain for Filled {
    const NAME: &'static str = "Filled";

    #[inline]
    fn filled(&self, output_len: usize) -> usize {
        self.0.min(output_len)
    }
}

macro_rules! plain {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive: no padding, every bit pattern valid, one layout on both
        // targets (both are LP64 and little-endian).
        unsafe impl Plain for $t {
            const NAME: &'static str = stringify!($t);
        }
    )* };
}
plain!(
    (),
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64
);

// SAFETY: an array of `Plain` has no padding and every bit pattern of it is valid.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {
    const NAME: &'static str = T::NAME;
}
