//! A typed call's answer: the result types ([`Ret`]), where a value travels
//! ([`value_place`]), and the host's encoding and the GPU's decoding of it ([`Answered`]).

use core::fmt;

use super::{Errno, Plain, SMALL_VALUE, VALUE_INLINE, VALUE_WORDS};

/// A result type a declared service may return: a [`Plain`] value, or a `Result` of one
/// with an [`Errno`].
pub trait Ret: Sized + fmt::Debug {
    /// The value that travels.
    type Value: Plain;
    /// Whether it is a `Result`.
    const FALLIBLE: bool;
    /// The value, or the failure (host side).
    fn into_wire(self) -> Result<Self::Value, Errno>;
    /// The result from the answer (GPU side); `None` when a service that cannot fail
    /// failed (the transport's `ENOSYS` or `EINVAL`, a handler's panic).
    fn from_wire(v: Result<Self::Value, Errno>) -> Option<Self>;
}

impl<T: Plain> Ret for T {
    type Value = T;
    const FALLIBLE: bool = false;
    fn into_wire(self) -> Result<T, Errno> {
        Ok(self)
    }
    fn from_wire(v: Result<T, Errno>) -> Option<T> {
        v.ok()
    }
}

impl<T: Plain> Ret for Result<T, Errno> {
    type Value = T;
    const FALLIBLE: bool = true;
    fn into_wire(self) -> Result<T, Errno> {
        self
    }
    fn from_wire(v: Result<T, Errno>) -> Option<Self> {
        Some(v)
    }
}

/// Where a value of type `V` travels in the answer.
pub const fn value_place<V>() -> ValuePlace {
    match size_of::<V>() {
        n if n <= VALUE_INLINE => ValuePlace::Result,
        n if n <= VALUE_WORDS => ValuePlace::Words,
        _ => ValuePlace::Bulk,
    }
}

/// See [`value_place`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValuePlace {
    /// In the result, zero-extended.
    Result,
    /// In the slot's `args[1..5]`.
    Words,
    /// At the start of the bulk buffer.
    Bulk,
}

/// The host's answer to a typed call, in the transport's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answered {
    /// The result (see the module's documentation).
    pub result: i64,
    /// The slot's `args[1..5]`, for a value that goes there.
    pub words: Option<[u64; 4]>,
    /// Bytes written at the start of the bulk buffer.
    pub bulk_out: usize,
}

impl Answered {
    /// The answer carrying `v` (host side); `bulk` is the lane's output room, which a
    /// large value or the output buffer of `output_len` bytes fills (as much of it as
    /// the value says it filled: [`Plain::filled`]). A failure carries no output.
    pub fn encode<V: Plain>(v: Result<V, Errno>, bulk: &mut [u8], output_len: usize) -> Answered {
        let v = match v {
            Err(e) => {
                return Answered {
                    result: -(e.0 as i64),
                    words: None,
                    bulk_out: 0,
                };
            }
            Ok(v) => v,
        };
        let output_len = v.filled(output_len);
        let n = size_of::<V>();
        let bytes = |v: &V| {
            // SAFETY: a `Plain` value's `n` bytes are all initialized.
            unsafe { core::slice::from_raw_parts((v as *const V).cast::<u8>(), n) }
        };
        match value_place::<V>() {
            ValuePlace::Result => {
                let mut b = [0u8; 8];
                b[..n].copy_from_slice(bytes(&v));
                Answered {
                    result: i64::from_le_bytes(b),
                    words: None,
                    bulk_out: output_len,
                }
            }
            // Not beside an output buffer: that answer is read from the slot, where the
            // GPU then looks for the value's words.
            ValuePlace::Words if n <= 8 && output_len == 0 && bits_of(bytes(&v)) < SMALL_VALUE => {
                Answered {
                    result: bits_of(bytes(&v)) as i64,
                    words: None,
                    bulk_out: output_len,
                }
            }
            ValuePlace::Words => {
                let mut w = [0u64; 4];
                // SAFETY: `n <= 32` bytes into the 32 bytes of `w`.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        bytes(&v).as_ptr(),
                        w.as_mut_ptr().cast::<u8>(),
                        n,
                    )
                };
                Answered {
                    result: 0,
                    words: Some(w),
                    bulk_out: output_len,
                }
            }
            ValuePlace::Bulk => {
                bulk[..n].copy_from_slice(bytes(&v));
                Answered {
                    result: 0,
                    words: None,
                    bulk_out: n,
                }
            }
        }
    }

    /// The value this answer carries (GPU side): from the result, the slot's `words`
    /// (`None` when the answer came without them, in the answer word alone), or `bulk`
    /// (the value's bytes copied out of the bulk buffer).
    pub fn decode<V: Plain>(
        result: i64,
        words: Option<&[u64; 4]>,
        bulk: &[u8],
    ) -> Result<V, Errno> {
        if result < 0 {
            return Err(Errno((-result) as i32));
        }
        let n = size_of::<V>();
        let mut out = core::mem::MaybeUninit::<V>::uninit();
        let src: *const u8 = match (value_place::<V>(), words) {
            (ValuePlace::Result, _) | (ValuePlace::Words, None) if n <= 8 => {
                (&raw const result).cast()
            }
            (ValuePlace::Result | ValuePlace::Words, None) => {
                return Err(Errno(crate::errno::EIO));
            }
            (ValuePlace::Words, Some(w)) => w.as_ptr().cast(),
            (ValuePlace::Bulk, _) => {
                if bulk.len() < n {
                    return Err(Errno(crate::errno::EIO));
                }
                bulk.as_ptr()
            }
            (ValuePlace::Result, Some(_)) => (&raw const result).cast(),
        };
        // SAFETY: `src` holds at least `n` bytes (8 in the result, 32 in the words,
        // checked for the bulk), and every bit pattern is a valid `V` (`Plain`).
        unsafe {
            core::ptr::copy_nonoverlapping(src, out.as_mut_ptr().cast::<u8>(), n);
            Ok(out.assume_init())
        }
    }
}

/// Up to 8 bytes as a little-endian `u64`.
#[inline]
fn bits_of(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(b)
}
