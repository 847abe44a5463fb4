//! Typed services on the GPU: the stubs [`service!`](crate::service) generates call
//! [`call`], and [`HostFn`] calls host closures. Both build an ordinary request (the
//! wire format is `hostcall_abi::typed`'s), so a typed call costs what any call costs.

use core::marker::PhantomData;

use hostcall_abi::errno::{E2BIG, EINVAL, ENOSYS};
use hostcall_abi::typed::{
    Answered, Args, Encoder, Errno, FIXED_INLINE, MAX_INPUTS, Plain, Ret, Shape, ValuePlace,
    bulk_len, fixed_len, value_place,
};
use hostcall_abi::{BULK_PER_LANE, Status};

use crate::{Channel, Platform, Request};

pub use hostcall_abi::typed as abi;

/// Types a [`Client`] is for, without owning either (so it is `Send`, `Sync` and `Copy`
/// whatever they are).
type Marker<P, S> = PhantomData<(fn() -> P, fn() -> *const S)>;

/// The GPU side of a declared trait `S` (`dyn Trait`): the trait is implemented for it
/// by `service!`, each method a call to the host.
pub struct Client<P, S: ?Sized> {
    ch: Channel,
    _marker: Marker<P, S>,
}

impl<P, S: ?Sized> Client<P, S> {
    /// A client over `ch`.
    pub fn new(ch: Channel) -> Self {
        Client {
            ch,
            _marker: PhantomData,
        }
    }

    /// Its channel.
    pub fn channel(&self) -> &Channel {
        &self.ch
    }
}

#[cfg(target_arch = "nvptx64")]
impl<S: ?Sized> Client<crate::nvptx::Nvptx, S> {
    /// The client of this launch's channel.
    pub fn gpu() -> Self {
        Client::new(crate::nvptx::channel())
    }
}

/// Calls service `id` with the request `e` holds (its fixed part `fixed_len` bytes),
/// and returns its answer as `R`. A service that cannot fail and fails (no handler, a
/// malformed request, a handler's panic) ends the launch with the thread, the service
/// and the errno, as a Rust call that cannot fail has no way to report it.
pub fn call<P: Platform, R: Ret, const W: usize>(
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
        service: id,
        args,
        send: parts[0],
        send_more: &parts[1..n.max(1)],
        recv,
        len_arg: None,
        posted: false,
        numbering: None,
        continues: false,
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
        let check = abi::closure_fingerprint::<A, R>() as u32;
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

    /// Calls the closure over `ch` with `args`. The request carries the fingerprint of
    /// the types this call uses, which the host compares with the closure's own.
    pub fn call_on<P: Platform>(self, ch: &Channel, args: A) -> R {
        const {
            assert!(
                closure_fixed_len::<A>() <= FIXED_INLINE,
                "closure arguments over 36 bytes"
            )
        };
        let mut e = Encoder::<'_, 5>::default();
        // Both are evaluated when the stub is compiled: hashing the types at every call
        // cost the GPU about a microsecond.
        e.plain(&const { abi::closure_fingerprint::<A, R>() as u32 });
        args.put_all(&mut e);
        call::<P, R, 5>(ch, self.id(), const { closure_fixed_len::<A>() }, &mut e)
    }

    /// Calls the closure from a GPU thread with `args`.
    #[cfg(target_arch = "nvptx64")]
    pub fn call(self, args: A) -> R {
        self.call_on::<crate::nvptx::Nvptx>(&crate::nvptx::channel(), args)
    }
}

/// Whether a declaration in module `path` is std's own (`hostcall_client::std_services`),
/// which alone may fix ids in `STD_IDS`.
#[doc(hidden)]
pub const fn declared_by_std(path: &str) -> bool {
    let (p, own) = (path.as_bytes(), b"hostcall_client::std_services");
    if p.len() != own.len() {
        return false;
    }
    let mut i = 0;
    while i < p.len() {
        if p[i] != own[i] {
            return false;
        }
        i += 1;
    }
    true
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

/// The id a declaration's `= N` gives, or [`abi::UNBOUND`] for a service by name.
#[doc(hidden)]
#[macro_export]
macro_rules! __service_id {
    () => {
        $crate::typed::abi::UNBOUND
    };
    ($id:literal) => {
        $id
    };
}

/// The [`abi::Waits`] a declaration's `, quick`, `, blocks` or `, waits` gives
/// ([`abi::Waits::Never`] when it says nothing); any other word does not compile.
#[doc(hidden)]
#[macro_export]
macro_rules! __service_waits {
    () => {
        $crate::typed::abi::Waits::Never
    };
    (quick) => {
        $crate::typed::abi::Waits::Never
    };
    (blocks) => {
        $crate::typed::abi::Waits::Blocks
    };
    (waits) => {
        $crate::typed::abi::Waits::OnPeer
    };
}

/// Whether a declaration says how long its calls may wait (std's must).
#[doc(hidden)]
#[macro_export]
macro_rules! __service_stated {
    () => {
        false
    };
    ($how:ident) => {
        true
    };
}

/// The text of one declared method's signature, spaced as rustfmt would.
#[doc(hidden)]
#[macro_export]
macro_rules! __service_text {
    ($m:ident, ($($a:ident : $t:ty),*), $r:ty) => {
        concat!(
            "fn ", stringify!($m), "(&self",
            $(", ", stringify!($a), ": ", stringify!($t),)*
            ") -> ", stringify!($r)
        )
    };
}

/// The [`abi::Signature`] of one declared method.
#[doc(hidden)]
#[macro_export]
macro_rules! __service_signature {
    ($trait:ident, $m:ident, ($($a:ident : $t:ty),*), $r:ty, ($($id:literal)?), ($($how:ident)?)) => {
        $crate::typed::abi::Signature {
            name: concat!(stringify!($trait), ".", stringify!($m)),
            text: $crate::__service_text!($m, ($($a: $t),*), $r),
            id: $crate::__service_id!($($id)?),
            fingerprint: $crate::typed::abi::fingerprint(
                concat!(stringify!($trait), ".", stringify!($m)),
                $crate::__service_text!($m, ($($a: $t),*), $r),
                $crate::__service_id!($($id)?),
                &[$(<$t as $crate::typed::abi::Arg<'static>>::SHAPE),*],
                $crate::typed::abi::Shape::of::<<$r as $crate::typed::abi::Ret>::Value>(),
            ),
            reads_input: $crate::typed::abi::reads_input(
                &[$(<$t as $crate::typed::abi::Arg<'static>>::SHAPE),*],
            ),
            waits: $crate::__service_waits!($($how)?),
        }
    };
}

/// Declares host services as a trait, once, for both sides.
///
/// ```ignore
/// hostcall_client::service! {
///     /// A key-value store on the host.
///     pub trait Kv {
///         /// The value of `key`.
///         fn get(&self, key: &str) -> Result<u64, Errno>;
///         /// Sets `key`; a fixed id, as AMD's hostcall API numbers services.
///         fn set(&self, key: &str, value: u64) -> () = 7;
///     }
/// }
/// ```
///
/// Each method is a service named `Trait.method`. Arguments are [`Plain`] values,
/// `&[u8]`, `&str`, and at most one `&mut [u8]` the host fills; results are a `Plain`
/// value or a `Result` of one with an [`Errno`]. From the declaration:
/// * the trait itself, which the host implements (a missing method does not compile);
/// * `Client<P, dyn Trait>` implements it on the GPU, each method a call
///   (`Client::gpu()` in a kernel);
/// * `<dyn Trait>::SERVICES` lists the signatures, and `dyn Trait` implements
///   `Dispatch`, which the host runtime serves (`HostBuilder::serve`);
/// * on the GPU, each method the kernel calls leaves a `__HOSTCALL__Trait__method` slot
///   in the module (name, signature, fingerprint), which the host checks when it loads
///   the module and fills with the service's id.
///
/// A method with `= N` has the fixed id `N` (in `USER_IDS`); others are bound by name
/// when the module is loaded. Two methods of one declaration with one id do not compile.
///
/// A method whose calls may keep the host long says so after its id (or in its place):
/// `, blocks` (a file system, a terminal: the host serves it on its blocking pool) or
/// `, waits` (as long as another party likes, such as another GPU thread: it gets a pool
/// worker of its own); `, quick`, the default, is served at once on the thread that
/// polled it ([`abi::Waits`]).
#[macro_export]
macro_rules! service {
    (
        $(#[$tmeta:meta])*
        $vis:vis trait $trait:ident {
            $(
                $(#[$mmeta:meta])*
                fn $m:ident(&self $(, $a:ident : $t:ty)* $(,)?) -> $r:ty
                    $(= $id:literal)? $(, $how:ident)?;
            )*
        }
    ) => {
        $(#[$tmeta])*
        $vis trait $trait: Send + Sync + 'static {
            $(
                $(#[$mmeta])*
                fn $m(&self $(, $a: $t)*) -> $r;
            )*
        }

        impl dyn $trait {
            /// Every service of this trait, in declaration order.
            pub const SERVICES: &'static [$crate::typed::abi::Signature] = &[
                $($crate::__service_signature!($trait, $m, ($($a: $t),*), $r, ($($id)?), ($($how)?))),*
            ];
        }

        const _: () = assert!(
            $crate::typed::abi::ids_distinct(&[<dyn $trait>::SERVICES], &[]),
            "two methods of one declaration share a fixed id"
        );

        impl<P: $crate::Platform + 'static> $trait for $crate::typed::Client<P, dyn $trait> {
            $(
                fn $m(&self $(, $a: $t)*) -> $r {
                    use $crate::typed::abi as abi;
                    const SIG: abi::Signature =
                        $crate::__service_signature!($trait, $m, ($($a: $t),*), $r, ($($id)?), ($($how)?));
                    const SHAPES: &[abi::Shape] = &[$(<$t as abi::Arg<'static>>::SHAPE),*];
                    const FIXED: usize = abi::fixed_len(SHAPES);
                    const _: () = {
                        assert!(FIXED <= abi::FIXED_MAX, "arguments over FIXED_MAX bytes");
                        assert!(
                            abi::count_kind(SHAPES, 1) + abi::count_kind(SHAPES, 3)
                                + (FIXED > abi::FIXED_INLINE) as usize
                                <= abi::MAX_INPUTS,
                            "more slices than MAX_INPUTS"
                        );
                        assert!(abi::count_kind(SHAPES, 2) <= 1, "more than one output buffer");
                        assert!(
                            size_of::<<$r as abi::Ret>::Value>() <= abi::VALUE_MAX,
                            "a value over the bulk buffer"
                        );
                        assert!(
                            abi::count_kind(SHAPES, 2) == 0
                                || !matches!(
                                    abi::value_place::<<$r as abi::Ret>::Value>(),
                                    abi::ValuePlace::Bulk
                                ),
                            "an output buffer beside a value over 32 bytes"
                        );
                        assert!(
                            SIG.id == abi::UNBOUND
                                || (abi::USER_IDS.start <= SIG.id && SIG.id < abi::USER_IDS.end)
                                || (abi::STD_IDS.start <= SIG.id
                                    && SIG.id < abi::STD_IDS.end
                                    && $crate::typed::declared_by_std(module_path!())),
                            "a fixed id outside USER_IDS (std's own declarations take STD_IDS)"
                        );
                        assert!(
                            $crate::__service_stated!($($how)?)
                                || !$crate::typed::declared_by_std(module_path!()),
                            "std's declarations say whether each method is quick, blocks or waits"
                        );
                    };
                    #[cfg_attr(
                        target_arch = "nvptx64",
                        unsafe(export_name = concat!(
                            "__HOSTCALL__", stringify!($trait), "__", stringify!($m)
                        ))
                    )]
                    static SLOT: abi::ServiceSlot<{ SIG.name.len() + SIG.text.len() }> =
                        abi::ServiceSlot::new(&SIG);
                    const WORDS: usize = abi::fixed_words(FIXED);
                    #[allow(unused_mut)] // no arguments: nothing to add
                    let mut e = abi::Encoder::<'_, WORDS>::default();
                    $(abi::Arg::put($a, &mut e);)*
                    let id = <P as $crate::Platform>::service_id(&SLOT.id, SIG.name);
                    $crate::typed::call::<P, $r, WORDS>(self.channel(), id, FIXED, &mut e)
                }
            )*
        }

        #[cfg(not(target_arch = "nvptx64"))]
        impl<T: $trait> $crate::typed::abi::Dispatch<T> for dyn $trait {
            const SERVICES: &'static [$crate::typed::abi::Signature] = <dyn $trait>::SERVICES;

            #[allow(unused_assignments, unused_mut, unused_variables)]
            fn dispatch(
                imp: &T,
                method: usize,
                call: $crate::typed::abi::Incoming<'_>,
                mut trace: Option<&mut dyn core::fmt::Write>,
            ) -> Result<$crate::typed::abi::Answered, $crate::typed::abi::WireError> {
                use $crate::typed::abi as abi;
                let mut index = 0usize;
                $(
                    if method == index {
                        const FIXED: usize =
                            abi::fixed_len(&[$(<$t as abi::Arg<'static>>::SHAPE),*]);
                        let fixed = abi::args_bytes(&call.args);
                        let mut d = abi::Decoder::new(
                            FIXED,
                            &fixed,
                            call.input,
                            &mut *call.out,
                            call.device,
                        )?;
                        $(let $a = <$t as abi::Arg>::take(&mut d)?;)*
                        let out_len = d.output_len();
                        if let Some(w) = trace.as_deref_mut() {
                            let _ = w.write_str(concat!(stringify!($m), "("));
                            let mut first = true;
                            $(
                                if !core::mem::take(&mut first) {
                                    let _ = w.write_str(", ");
                                }
                                let _ = <$t as abi::Arg>::show(&$a, w);
                            )*
                            let _ = w.write_str(")");
                        }
                        let r: $r = imp.$m($($a),*);
                        if let Some(w) = trace.as_deref_mut() {
                            let _ = core::fmt::Write::write_fmt(w, format_args!(" -> {:?}", r));
                        }
                        let v = <$r as abi::Ret>::into_wire(r);
                        return Ok(abi::Answered::encode(v, call.out, out_len));
                    }
                    index += 1;
                )*
                Err(abi::WireError("no such method"))
            }
        }
    };
}
