//! Typed services on the host: the handlers behind [`crate::HostBuilder::serve`],
//! [`crate::Host::hostcall`] and [`crate::HostBuilder::default_handler`], the ids they
//! take, and the check of a module's declared services against them at load.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::marker::PhantomData;
use std::sync::Arc;

use hostcall_abi::errno::EFAULT;
use hostcall_abi::std_services::ServeEach;
use hostcall_abi::typed::closure_fixed_len;
use hostcall_abi::typed::{
    AnswerBytes, Args, Decoder, DeviceReader, Dispatch, Errno, FIXED_INLINE, FdUse, HostClosure,
    Incoming, NAMED_IDS, Ret, Signature, SlotRecord, UNBOUND, Waits, WireError, answer_bytes,
    args_bytes, closure_fingerprint,
};

use super::{Call, Handler, Malformed, Reply};
use crate::guest_log::escaped;
use crate::module::{DeviceMemory, GpuModule};
use crate::{Error, Result};

/// Method `method` of an implementation `T` of the declared trait `S` (`dyn Trait`).
pub(crate) struct Method<S: ?Sized, T> {
    pub imp: Arc<T>,
    pub method: usize,
    /// What tells, per call, where a method declared with an fd's use is served.
    pub fds: Option<Arc<dyn FdKinds>>,
    pub _trait: PhantomData<fn() -> *const S>,
}

/// What the host knows of its fds that decides where a call that reads, writes or
/// copies into one is served ([`Waits::OnFd`]): a regular file's call only takes time
/// (the blocking pool), stdin's and a socket's are waited for without holding a thread
/// (served where they are polled), and stdout's wait while its writer has no room.
pub(crate) trait FdKinds: Send + Sync {
    /// Whether a call that does `what` with `fd` may block for long.
    fn may_block(&self, fd: i32, what: FdUse) -> bool;
    /// Whether such a call, which may block, only takes time and waits on nobody.
    fn only_takes_time(&self, fd: i32) -> bool;
    /// Whether such a call, which may block, may wait as long as another party likes.
    fn waits_on_peer(&self, fd: i32) -> bool;
}

/// The fd a call of a method declared with an fd's use names: its first argument, an
/// `i32` at the start of the fixed part (`args[1]`'s low half), as `service!` checks.
fn fd_of(args: &[u64; 6]) -> i32 {
    args[1] as u32 as i32
}

impl<S, T> Handler for Method<S, T>
where
    S: ?Sized + Dispatch<T> + 'static,
    T: Send + Sync + 'static,
{
    fn call(&self, call: &mut Call<'_>) -> std::result::Result<Reply, Malformed> {
        CALLER.set((call.block, call.thread));
        let incoming = Incoming {
            args: call.args,
            input: call.input,
            out: &mut *call.out,
            device: call.device,
        };
        let w = call
            .trace
            .as_deref_mut()
            .map(|t| t as &mut dyn std::fmt::Write);
        let answered = S::dispatch(&self.imp, self.method, incoming, w);
        let a = answered.map_err(wire)?;
        if a.words.is_some() {
            *call.words = a.words;
        }
        Ok(Reply {
            result: a.result,
            bulk_out: a.bulk_out,
        })
    }

    fn input_len_arg(&self, _service: u32) -> Option<usize> {
        S::SERVICES[self.method].reads_input.then_some(0)
    }

    /// What the declaration says its answer fills: its output buffer's length, a value
    /// too large for the slot, or nothing.
    fn answer_len(&self, _service: u32, args: &[u64; 6], input: &[u8], cap: usize) -> usize {
        bounded(S::SERVICES[self.method].answer, args, input, cap)
    }

    fn can_block(&self, _service: u32) -> bool {
        S::SERVICES[self.method].waits != Waits::Never
    }

    fn may_block(&self, _service: u32, args: &[u64; 6]) -> bool {
        match (S::SERVICES[self.method].waits, &self.fds) {
            (Waits::OnFd(what), Some(fds)) => fds.may_block(fd_of(args), what),
            _ => true,
        }
    }

    fn waits_on_peer(&self, _service: u32, args: &[u64; 6]) -> bool {
        match (S::SERVICES[self.method].waits, &self.fds) {
            (Waits::OnPeer, _) => true,
            (Waits::OnFd(_), Some(fds)) => fds.waits_on_peer(fd_of(args)),
            _ => false,
        }
    }

    fn only_takes_time(&self, _service: u32, args: &[u64; 6]) -> bool {
        match (S::SERVICES[self.method].waits, &self.fds) {
            (Waits::OnFd(_), Some(fds)) => fds.only_takes_time(fd_of(args)),
            _ => false,
        }
    }
}

std::thread_local! {
    /// The GPU thread whose declared call this host thread serves now (linear block,
    /// thread in block).
    static CALLER: std::cell::Cell<(u32, u32)> = const { std::cell::Cell::new((0, 0)) };
}

/// The GPU thread whose call the running declared service serves: (linear block, thread
/// in block). A declaration's arguments carry only what the GPU chose to send; the
/// caller is the transport's.
pub(crate) fn caller() -> (u32, u32) {
    CALLER.get()
}

/// The handlers of std's declared traits, as `hostcall_abi::std_services::serve_std`
/// hands them over, with what decides where their calls on fds are served.
pub(crate) struct Collect {
    pub handlers: Vec<(&'static Signature, Arc<dyn Handler>)>,
    pub fds: Arc<dyn FdKinds>,
}

impl ServeEach for Collect {
    fn serve<S, T>(&mut self, imp: Arc<T>)
    where
        S: ?Sized + Dispatch<T> + 'static,
        T: Send + Sync + 'static,
    {
        let fds = Some(self.fds.clone());
        self.handlers.extend(methods::<S, T>(imp, fds));
    }
}

/// The handlers of `imp` serving the declared trait `S`, one per method, each with its
/// method's signature (whose fixed id std's services take; `HostBuilder::serve` takes ids
/// from [`Declared::id_for`]). `fds` serves std's methods declared with an fd's use
/// (a user's cannot be).
pub(crate) fn methods<S, T>(
    imp: Arc<T>,
    fds: Option<Arc<dyn FdKinds>>,
) -> Vec<(&'static Signature, Arc<dyn Handler>)>
where
    S: ?Sized + Dispatch<T> + 'static,
    T: Send + Sync + 'static,
{
    S::SERVICES
        .iter()
        .enumerate()
        .map(|(method, sig)| {
            let handler: Arc<dyn Handler> = Arc::new(Method::<S, T> {
                imp: imp.clone(),
                method,
                fds: fds.clone(),
                _trait: PhantomData,
            });
            (sig, handler)
        })
        .collect()
}

/// A host closure: `f`, called with `A`, returning `R`.
pub(crate) struct Closure<A, R, F> {
    pub f: F,
    pub _types: PhantomData<fn(A) -> R>,
}

impl<A, R, F> Handler for Closure<A, R, F>
where
    A: Args + 'static,
    R: Ret + 'static,
    F: HostClosure<A, R>,
{
    fn call(&self, call: &mut Call<'_>) -> std::result::Result<Reply, Malformed> {
        let fixed = args_bytes(&call.args);
        // Evaluated at compile time, not per call.
        let fixed_len = const { closure_fixed_len::<A>() };
        let mut d =
            Decoder::new(fixed_len, &fixed, call.input, &mut *call.out, None).map_err(wire)?;
        let check = d.plain::<u32>().map_err(wire)?;
        if check != const { closure_fingerprint::<A, R>() as u32 } {
            return Err(other_types::<A, R>());
        }
        let args = A::take_all(&mut d).map_err(wire)?;
        let r = match call.trace.as_mut() {
            None => self.f.invoke(args),
            Some(t) => traced(t, args, |a| self.f.invoke(a)),
        };
        let a = hostcall_abi::typed::Answered::encode(r.into_wire(), call.out, 0);
        if a.words.is_some() {
            *call.words = a.words;
        }
        Ok(Reply {
            result: a.result,
            bulk_out: a.bulk_out,
        })
    }

    /// A closure's arguments are plain values, in the slot's words when they fit (as the
    /// GPU stub insists they do): then no input bytes are read.
    fn input_len_arg(&self, _service: u32) -> Option<usize> {
        (const { closure_fixed_len::<A>() } > FIXED_INLINE).then_some(0)
    }

    /// A closure has no output buffer: its value, when too large for the slot.
    fn answer_len(&self, _service: u32, args: &[u64; 6], input: &[u8], cap: usize) -> usize {
        let answer = const { answer_bytes(A::SHAPES, size_of::<R::Value>()) };
        bounded(answer, args, input, cap)
    }
}

/// The bytes a typed call's answer may fill (`answer`), at most `cap`; none for a
/// request too short to say, which its decoding refuses before any answer.
fn bounded(answer: AnswerBytes, args: &[u64; 6], input: &[u8], cap: usize) -> usize {
    answer
        .of(args, input)
        .map_or(0, |n| n.min(cap as u64) as usize)
}

/// A request that does not decode. Out of line, with [`other_types`], as the errors of
/// the hot path.
#[cold]
fn wire(e: WireError) -> Malformed {
    Malformed(e.0.into())
}

/// A closure handle called with other types than its closure's.
#[cold]
#[inline(never)]
fn other_types<A, R>() -> Malformed {
    Malformed(format!(
        "a closure handle called with other types than the closure's, {} -> {}",
        std::any::type_name::<A>(),
        std::any::type_name::<R>()
    ))
}

/// Calls `f` with `args`, writing both and the result into `trace`. Out of line: the
/// untraced path of a closure's call is then a leaf with no frame to set up, which is
/// most of what it costs beyond the null call's.
#[cold]
#[inline(never)]
fn traced<A: std::fmt::Debug, R: std::fmt::Debug>(
    trace: &mut String,
    args: A,
    f: impl FnOnce(A) -> R,
) -> R {
    let _ = write!(trace, "{args:?}");
    let r = f(args);
    let _ = write!(trace, " -> {r:?}");
    r
}

/// The memory of one launch as typed services reach it: what it owns (its device heap,
/// where the GPU's `Vec`, `Box` and `String` live) and the backend's copy out of it.
pub(crate) struct DeviceAccess {
    pub memory: Arc<dyn DeviceMemory>,
    pub heap: std::ops::Range<u64>,
}

impl DeviceReader for DeviceAccess {
    fn owns(&self, addr: u64, len: u64) -> bool {
        addr.checked_add(len)
            .is_some_and(|end| self.heap.start <= addr && end <= self.heap.end)
    }

    fn read(
        &self,
        addr: u64,
        len: u64,
        sink: &mut dyn FnMut(&[u8]),
    ) -> std::result::Result<(), Errno> {
        if !self.owns(addr, len) {
            return Err(Errno(EFAULT));
        }
        let (_, stop) = self.memory.stream(addr, len, &mut |b| {
            sink(b);
            Ok(())
        });
        match stop {
            None => Ok(()),
            Some(_) => Err(Errno(EFAULT)),
        }
    }
}

/// A call that reached the default handler: no handler serves its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnservedCall {
    /// The id it asked for.
    pub id: u32,
    /// The caller's linear block index.
    pub block: u32,
    /// The caller's thread index within its block.
    pub thread: u32,
}

/// The default handler: `f` answers every call of an id nobody serves. Its value is the
/// call's raw result (what a typed stub reads as a value of at most 4 bytes, or an
/// errno).
pub(crate) struct DefaultHandler<F>(pub F);

impl<F> Handler for DefaultHandler<F>
where
    F: Fn(&UnservedCall) -> std::result::Result<i64, Errno> + Send + Sync + 'static,
{
    fn call(&self, call: &mut Call<'_>) -> std::result::Result<Reply, Malformed> {
        let unserved = UnservedCall {
            id: call.service,
            block: call.block,
            thread: call.thread,
        };
        Ok(match (self.0)(&unserved) {
            Ok(v) => Reply::value(v),
            Err(e) => Reply::errno(e.0),
        })
    }

    fn input_len_arg(&self, _service: u32) -> Option<usize> {
        None
    }

    /// Its value is the call's raw result.
    fn answer_len(&self, _: u32, _: &[u64; 6], _: &[u8], _: usize) -> usize {
        0
    }
}

/// The declared services a host serves, by name, with the ids they take.
#[derive(Clone)]
pub(crate) struct Declared {
    by_name: HashMap<&'static str, (u32, Signature)>,
    next_named: u32,
}

impl Default for Declared {
    /// std's declared services, which every host serves.
    fn default() -> Self {
        let mut d = Declared {
            by_name: HashMap::new(),
            next_named: 0,
        };
        for sig in super::std_declared() {
            d.id_for(sig);
        }
        d
    }
}

impl Declared {
    /// The id for `sig`: its fixed id, the one its name already has, or the next free
    /// one of [`NAMED_IDS`]; records it.
    pub fn id_for(&mut self, sig: &Signature) -> u32 {
        let id = if sig.id != UNBOUND {
            sig.id
        } else if let Some((id, _)) = self.by_name.get(sig.name) {
            *id
        } else {
            self.next_id()
        };
        self.by_name.insert(sig.name, (id, *sig));
        id
    }

    /// The next free id of [`NAMED_IDS`] (for closures too).
    pub fn next_id(&mut self) -> u32 {
        let id = NAMED_IDS.start + self.next_named;
        assert!(
            NAMED_IDS.contains(&id),
            "more named services than NAMED_IDS"
        );
        self.next_named += 1;
        id
    }

    /// Checks every service `module` calls against these, and writes the ids into its
    /// slots. A service with a fixed id that no one serves is left to the default
    /// handler when there is one (`catch_all`); anything else that does not match
    /// refuses the module, in one sentence. What the module says of itself (symbols,
    /// names, declarations) is quoted escaped: a module is the GPU program's, and its
    /// bytes must not reach an operator's terminal raw.
    pub fn bind(&self, module: &mut dyn GpuModule, catch_all: bool) -> Result<()> {
        let quoted = |s: &str| escaped(s.as_bytes());
        for slot in module.service_slots()? {
            let rec = SlotRecord::parse(&slot.bytes).map_err(|why| {
                Error::Service(format!(
                    "the GPU module's service slot `{}` is not one: {why}",
                    quoted(&slot.symbol)
                ))
            })?;
            let id = match self.by_name.get(rec.name) {
                None if rec.id != UNBOUND && catch_all => continue,
                None => {
                    return Err(Error::Service(format!(
                        "the GPU module calls service `{}` (`{}`), which this host does not serve",
                        quoted(rec.name),
                        quoted(rec.text)
                    )));
                }
                Some((_, sig)) if sig.fingerprint != rec.fingerprint => {
                    let why = if sig.text == rec.text {
                        " (the same text, but other argument or result layouts or id: another version of its declaration?)"
                    } else {
                        ""
                    };
                    return Err(Error::Service(format!(
                        "the GPU module calls service `{}` as `{}`, but this host serves it as `{}`{why}",
                        quoted(rec.name),
                        quoted(rec.text),
                        sig.text
                    )));
                }
                Some((id, _)) => *id,
            };
            // A fixed id is in its slot from the build on, and a bound one stays from the
            // run before: only a change is written to the device.
            if rec.id != id {
                module.bind_service(&slot.symbol, id)?;
            }
        }
        Ok(())
    }
}
