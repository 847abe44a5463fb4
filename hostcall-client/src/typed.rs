//! Typed services on the GPU: the [`Caller`] over a channel ([`OnChannel`]) that the
//! stubs [`service!`](macro@crate::service) generates and [`HostFn`]s call through. Both build
//! an ordinary request (the wire format is `hostcall_abi::typed`'s), so a typed call
//! costs what any call costs.

use core::marker::PhantomData;
use core::sync::atomic::AtomicU32;

use hostcall_abi::errno::{E2BIG, EINVAL, ENOSYS};
pub use hostcall_abi::typed::HostFn;
use hostcall_abi::typed::{
    Answered, Args, Caller, Encoder, Errno, FIXED_INLINE, MAX_INPUTS, Plain, Ret, ValuePlace,
    bulk_len, value_place,
};
use hostcall_abi::{BULK_PER_LANE, Status};

use crate::{Channel, Platform, Request};

pub use hostcall_abi::typed as abi;

/// A declared trait's calls over a channel, from platform `P`: the [`Caller`] of the
/// GPU's [`Client`]s and [`HostFn`] calls.
pub struct OnChannel<P> {
    ch: Channel,
    _platform: PhantomData<fn() -> P>,
}

impl<P> OnChannel<P> {
    /// Calls over `ch`.
    pub const fn new(ch: Channel) -> Self {
        OnChannel {
            ch,
            _platform: PhantomData,
        }
    }
}

#[cfg(target_arch = "nvptx64")]
impl Default for OnChannel<crate::nvptx::Nvptx> {
    /// This launch's channel.
    fn default() -> Self {
        OnChannel::new(crate::nvptx::channel())
    }
}

impl<P: Platform> Caller for OnChannel<P> {
    fn service_id(&self, slot: &AtomicU32, name: &str) -> u32 {
        P::service_id(slot, name)
    }

    fn call<R: Ret, const W: usize>(&self, id: u32, fixed_len: usize, e: &mut Encoder<'_, W>) -> R {
        call::<P, R, W>(&self.ch, id, fixed_len, e)
    }
}

/// The GPU side of a declared trait `S` (`dyn Trait`) from platform `P`:
/// `Client::<Nvptx, dyn Trait>::gpu()` in a kernel.
pub type Client<P, S> = abi::Client<OnChannel<P>, S>;

/// Calls service `id` with the request `e` holds (its fixed part `fixed_len` bytes),
/// and returns its answer as `R`. A service that cannot fail and fails (no handler, a
/// malformed request, a handler's panic) ends the launch with the thread, the service
/// and the errno, as a Rust call that cannot fail has no way to report it.
fn call<P: Platform, R: Ret, const W: usize>(
    ch: &Channel,
    id: u32,
    fixed_len: usize,
    e: &mut Encoder<'_, W>,
) -> R {
    let v = exchange::<P, R::Value, W>(ch, id, fixed_len, e);
    let errno = v.err().map_or(0, |e| e.0);
    match R::from_wire(v) {
        Some(r) => r,
        None => ch.fail_service::<P>(id, errno),
    }
}

fn exchange<P: Platform, V: Plain, const W: usize>(
    ch: &Channel,
    id: u32,
    fixed_len: usize,
    e: &mut Encoder<'_, W>,
) -> Result<V, Errno> {
    let output = e.take_output();
    let mut args = [0u64; 6];
    let mut parts: [&[u8]; MAX_INPUTS + 1] = [&[]; MAX_INPUTS + 1];
    let mut n = 0;
    if fixed_len <= FIXED_INLINE {
        args[1..].copy_from_slice(&e.fixed_words());
    } else {
        parts[0] = e.fixed();
        n = 1;
    }
    for p in e.inputs() {
        parts[n] = p;
        n += 1;
    }
    let sent = bulk_len(&parts[..n]);
    if sent > BULK_PER_LANE {
        return Err(Errno(E2BIG));
    }
    args[0] = sent as u64;
    // A value too large for the slot's words comes back in the bulk buffer, into `v`.
    // SAFETY: every bit pattern, zeros included, is a valid `Plain` value.
    let mut v: V = unsafe { core::mem::zeroed() };
    let large = matches!(value_place::<V>(), ValuePlace::Bulk);
    let recv: &mut [u8] = match output {
        Some(out) => out,
        // SAFETY: `v`'s bytes, which no one else sees until this returns; any bytes
        // written are a valid `V` (`Plain`).
        None if large => unsafe {
            core::slice::from_raw_parts_mut((&raw mut v).cast::<u8>(), size_of::<V>())
        },
        None => &mut [],
    };
    let reply = ch.exchange::<P>(Request {
        send: parts[0],
        send_more: &parts[1..n.max(1)],
        recv,
        ..Request::bare(id, args)
    });
    match reply.status {
        Status::Ok => {}
        Status::UnknownService => return Err(Errno(ENOSYS)),
        // `exchange` traps on `Killed`.
        Status::Malformed | Status::Killed => return Err(Errno(EINVAL)),
    }
    if large {
        return if reply.result < 0 {
            Err(Errno((-reply.result) as i32))
        } else {
            Ok(v)
        };
    }
    let words = (!reply.inline).then_some(&reply.words);
    Answered::decode::<V>(reply.result, words, &[])
}

/// Calls of a host closure's handle ([`HostFn`], the ABI's: the host gives it out) from
/// the GPU's side of a channel.
pub trait CallHostFn<A, R> {
    /// Calls the closure over `ch`, from platform `P`, with `args`.
    fn call_on<P: Platform>(self, ch: &Channel, args: A) -> R;

    /// Calls the closure from a GPU thread with `args`.
    #[cfg(target_arch = "nvptx64")]
    fn call(self, args: A) -> R;
}

impl<A: Args, R: Ret> CallHostFn<A, R> for HostFn<A, R> {
    fn call_on<P: Platform>(self, ch: &Channel, args: A) -> R {
        self.call_with(&OnChannel::<P>::new(*ch), args)
    }

    #[cfg(target_arch = "nvptx64")]
    fn call(self, args: A) -> R {
        self.call_with(&OnChannel::<crate::nvptx::Nvptx>::default(), args)
    }
}
