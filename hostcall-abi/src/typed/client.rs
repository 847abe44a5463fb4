//! The calling side of the typed convention, over any transport: a declared trait's
//! [`Client`] and a host closure's handle ([`HostFn`]) build their requests here and
//! send them through a [`Caller`], which the GPU's client crate implements over a
//! channel (and an emulator over its own). So a declaration compiles below both halves,
//! and the host runtime names the handles it gives out without the GPU's crate.

use core::marker::PhantomData;
use core::sync::atomic::AtomicU32;

use super::{Args, Encoder, FIXED_INLINE, Ret, Shape, closure_fingerprint, fixed_len};

/// What a typed call goes through: it sends a request and returns the answer.
pub trait Caller {
    /// The id to call the declared service `name` by, whose module slot holds `slot`:
    /// on the GPU the slot itself, which the host filled when it loaded the module.
    fn service_id(&self, slot: &AtomicU32, name: &str) -> u32;

    /// Calls service `id` with the request `e` holds (its fixed part `fixed_len` bytes),
    /// and returns its answer as `R`. A service that cannot fail and fails ends the
    /// caller, as a Rust call that cannot fail has no way to report it.
    fn call<R: Ret, const W: usize>(&self, id: u32, fixed_len: usize, e: &mut Encoder<'_, W>) -> R;
}

/// Types a [`Client`] is for, without owning either (so it is `Send`, `Sync` and `Copy`
/// whatever they are).
type Marker<S> = PhantomData<fn() -> *const S>;

/// The calling side of a declared trait `S` (`dyn Trait`): `service!` implements the
/// trait for it, each method a call through `C`.
pub struct Client<C, S: ?Sized> {
    caller: C,
    _marker: Marker<S>,
}

impl<C, S: ?Sized> Client<C, S> {
    /// A client calling through `caller`.
    pub const fn new(caller: C) -> Self {
        Client {
            caller,
            _marker: PhantomData,
        }
    }

    /// What it calls through.
    pub fn caller(&self) -> &C {
        &self.caller
    }
}

impl<C: Default, S: ?Sized> Client<C, S> {
    /// The client of the caller a thread has without asking (on the GPU, its launch's
    /// channel).
    pub fn gpu() -> Self {
        Client::new(C::default())
    }
}

/// A handle on a host closure (`Host::hostcall` on the host), passed to the kernel as a
/// 64-bit argument: the closure's id, and its fingerprint's low half for debuggers. Each
/// call carries the fingerprint of the types it is made with, which the host checks, so
/// a handle used with other types is refused, not misread.
pub struct HostFn<A, R> {
    raw: u64,
    _types: PhantomData<fn(A) -> R>,
}

impl<A, R> Clone for HostFn<A, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A, R> Copy for HostFn<A, R> {}

impl<A: Args, R: Ret> HostFn<A, R> {
    /// The handle in a kernel argument.
    pub const fn from_raw(raw: u64) -> Self {
        HostFn {
            raw,
            _types: PhantomData,
        }
    }

    /// The handle of closure `id` of these types.
    pub const fn new(id: u32) -> Self {
        let check = closure_fingerprint::<A, R>() as u32;
        HostFn::from_raw((check as u64) << 32 | id as u64)
    }

    /// What to pass as the kernel argument.
    pub const fn raw(self) -> u64 {
        self.raw
    }

    /// The closure's service id.
    pub const fn id(self) -> u32 {
        self.raw as u32
    }

    /// Calls the closure through `caller` with `args`. The request carries the
    /// fingerprint of the types this call uses, which the host compares with the
    /// closure's own.
    pub fn call_with<C: Caller>(self, caller: &C, args: A) -> R {
        const {
            assert!(
                closure_fixed_len::<A>() <= FIXED_INLINE,
                "closure arguments over 36 bytes"
            )
        };
        let mut e = Encoder::<'_, 5>::default();
        // Both are evaluated when the stub is compiled: hashing the types at every call
        // cost the GPU about a microsecond.
        e.plain(&const { closure_fingerprint::<A, R>() as u32 });
        args.put_all(&mut e);
        caller.call::<R, 5>(self.id(), const { closure_fixed_len::<A>() }, &mut e)
    }
}

/// Bytes of a closure call's fixed part: the check word, then the arguments.
pub const fn closure_fixed_len<A: Args>() -> usize {
    // The check word is a u32 at offset 0; the arguments follow it.
    let mut shapes = [Shape::of::<u32>(); 5];
    let mut i = 0;
    while i < A::SHAPES.len() {
        shapes[i + 1] = A::SHAPES[i];
        i += 1;
    }
    let (all, _) = shapes.split_at(A::SHAPES.len() + 1);
    fixed_len(all)
}
