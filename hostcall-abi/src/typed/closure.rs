//! Host closures: functions a kernel calls through a handle, typed by their arguments
//! ([`Args`]) and result, checked by a fingerprint on every call.

use core::fmt;

use super::{Decoder, Encoder, Plain, Ret, Shape, WireError, fingerprint};

/// The arguments of a host closure ([`HostClosure`]): a tuple of up to four [`Plain`]
/// values, of at most 36 bytes together (a call's fixed part is their bytes after a
/// 4-byte type check, and must fit `args[1..6]`).
pub trait Args: Sized + fmt::Debug {
    /// Their shapes.
    const SHAPES: &'static [Shape];
    /// Adds them to a request (GPU side).
    fn put_all<const W: usize>(self, e: &mut Encoder<'_, W>);
    /// Reads them from a request (host side).
    fn take_all(d: &mut Decoder<'_>) -> Result<Self, WireError>;
}

/// A host function a kernel calls through a handle (AMDGPU.jl's `HostCallHolder`): any
/// `Fn` of up to four [`Plain`] arguments returning a [`Ret`].
pub trait HostClosure<A: Args, R: Ret>: Send + Sync + 'static {
    /// Calls it.
    fn invoke(&self, args: A) -> R;
}

macro_rules! arity {
    ($($a:ident: $t:ident),*) => {
        impl<$($t: Plain),*> Args for ($($t,)*) {
            const SHAPES: &'static [Shape] = &[$(Shape::of::<$t>()),*];
            fn put_all<const W: usize>(self, e: &mut Encoder<'_, W>) {
                let ($($a,)*) = self;
                $(e.plain(&$a);)*
                let _ = e;
            }
            fn take_all(d: &mut Decoder<'_>) -> Result<Self, WireError> {
                let _ = &d;
                Ok(($(d.plain::<$t>()?,)*))
            }
        }

        impl<F, R: Ret, $($t: Plain),*> HostClosure<($($t,)*), R> for F
        where
            F: Fn($($t),*) -> R + Send + Sync + 'static,
        {
            fn invoke(&self, ($($a,)*): ($($t,)*)) -> R {
                self($($a),*)
            }
        }
    };
}
arity!();
arity!(a: A);
arity!(a: A, b: B);
arity!(a: A, b: B, c: C);
arity!(a: A, b: B, c: C, d: D);

/// The fingerprint of a host closure taking `A` and returning `R`: what its handle
/// carries (the low 32 bits) and the host checks on every call.
pub const fn closure_fingerprint<A: Args, R: Ret>() -> u64 {
    let text = if R::FALLIBLE { "fallible" } else { "" };
    fingerprint("closure", text, 0, A::SHAPES, Shape::of::<R::Value>())
}
