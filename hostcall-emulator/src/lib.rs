//! A [`GpuModule`] whose "GPU threads" are OS threads running Rust closures over the
//! real device half of the transport (`hostcall_client`), so the protocol, the server
//! and every service are exercised without a GPU. A crate of its own: it is the one
//! host-side user of the GPU's client crate, which the host runtime does not depend on.
//!
//! Three warp models: [`WarpMode::Independent`] (every thread is a one-lane warp),
//! [`WarpMode::Lockstep`] (32 consecutive threads of a block form a warp whose live
//! lanes call together, as converged lanes on a GPU do) and [`WarpMode::Divergent`]
//! (lanes meet `activemask` in random groups after random delays). In the last two,
//! warp-synchronous operations are matched by mask value and exited lanes count as
//! arrived, as on the hardware (the `warp` module).

mod heap;
mod warp;

use std::alloc::Layout;
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use hostcall_abi::typed::Signature;
use hostcall_abi::{ABI_VERSION, DeviceConfig, WARP_SIZE};
use hostcall_client::typed::{Client, OnChannel};
use hostcall_client::{Channel, Platform};

use self::warp::{Grouping, SyncKind, Warp};

use hostcall_runtime::{
    DeviceHeap, DeviceMemory, Error, GpuModule, HostMemory, KernelArg, Launch, LaunchEnd,
    LaunchMemory, ModuleSlot, Result, StreamStop,
};

/// A kernel for the emulator: called once per emulated GPU thread.
pub type EmuKernel = Arc<dyn Fn(&EmuThread) + Send + Sync>;

/// How emulated threads group into warps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WarpMode {
    /// Each thread is a warp of one lane.
    Independent,
    /// Every 32 consecutive threads of a block are a warp whose live lanes reach
    /// `activemask` together.
    Lockstep,
    /// Every 32 consecutive threads of a block are a warp whose lanes reach
    /// `activemask` in random groups, with random delays before each warp-synchronous
    /// operation; `seed` makes the choices repeatable per warp.
    Divergent {
        /// Seeds each warp's random choices (mixed with the warp's position).
        seed: u64,
    },
}

/// What an emulated kernel gets: its coordinates, parameters and the channel.
pub struct EmuThread {
    /// Linear block index.
    pub block: u32,
    /// Thread index within the block.
    pub thread: u32,
    /// The launch's parameters.
    pub args: Vec<KernelArg>,
    channel: Channel,
    config: DeviceConfig,
}

/// Unwinds an emulated thread that "traps" (as `abort`/`exit` do on the GPU).
struct Trap;

impl EmuThread {
    /// The channel to the host, for `hostcall_client::fd_io::*::<Emu>` and raw requests.
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// The launch's configuration as the device half reads it: where the ports and
    /// doorbells are. A GPU program can ignore the protocol and write them directly;
    /// tests of a hostile kernel do that through this.
    pub fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// A client of the declared services `S` (`dyn Trait`) over this thread's channel.
    pub fn client<S: ?Sized>(&self) -> Client<Emu, S> {
        Client::new(OnChannel::new(self.channel))
    }

    /// Stops this emulated thread the way `trap;` stops a GPU kernel.
    pub fn trap(&self) -> ! {
        Emu::trap()
    }
}

/// The ids the host bound to a module's declared services, by name: the emulator's
/// stand-in for the slots a GPU module holds.
type Bindings = Arc<RwLock<HashMap<&'static str, u32>>>;

struct LaneCtx {
    block: u32,
    thread: u32,
    block_threads: u32,
    warp: Option<Arc<Warp>>,
    bindings: Bindings,
}

thread_local! {
    static LANE: RefCell<Option<LaneCtx>> = const { RefCell::new(None) };
}

fn with_lane<R>(f: impl FnOnce(&LaneCtx) -> R) -> R {
    LANE.with(|l| {
        f(l.borrow()
            .as_ref()
            .expect("Emu platform used outside an emulated launch"))
    })
}

/// Shortest sleep of an emulated thread (see `Emu::nanosleep`).
const EMU_MIN_SLEEP: Duration = Duration::from_micros(20);

/// Wake-ups per second that the process's emulated threads may cost together when all
/// of them wait (see `Emu::nanosleep`): about a fifth of one core in the kernel.
const EMU_WAKEUPS_PER_S: u64 = 200_000;

/// Emulated threads alive in the process, over every launch (tests run launches side by
/// side, and all of them share the machine's cores).
static LIVE_THREADS: AtomicU64 = AtomicU64::new(0);

/// Counts one emulated thread alive for as long as it is held, however the thread ends.
struct Alive;

impl Alive {
    fn new() -> Alive {
        LIVE_THREADS.fetch_add(1, Ordering::Relaxed);
        Alive
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        LIVE_THREADS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The [`Platform`] of emulated GPU threads.
pub struct Emu;

impl Emu {
    /// The calling lane's warp and lane id, if it is in a multi-lane warp.
    fn warp() -> Option<(Arc<Warp>, u32)> {
        // A thread outside any launch (a test driving the GPU side directly) is a warp
        // of one lane.
        LANE.with(|l| {
            l.borrow().as_ref().and_then(|l| {
                l.warp
                    .as_ref()
                    .map(|w| (w.clone(), l.thread % WARP_SIZE as u32))
            })
        })
    }
}

impl Platform for Emu {
    fn lane_id() -> u32 {
        Self::warp().map_or(0, |(_, lane)| lane)
    }

    fn active_mask() -> u32 {
        match Self::warp() {
            Some((w, lane)) => w.active_mask(lane),
            None => 1,
        }
    }

    fn broadcast(mask: u32, value: u32, src: u32) -> u32 {
        match Self::warp() {
            Some((w, lane)) => w.meet(SyncKind::Shuffle, mask, lane, value).1[src as usize],
            None => value,
        }
    }

    fn match_any(mask: u32, value: u32) -> u32 {
        match Self::warp() {
            Some((w, lane)) => {
                let (arrived, values) = w.meet(SyncKind::Match, mask, lane, value);
                (0..WARP_SIZE as u32)
                    .filter(|&l| arrived & (1 << l) != 0 && values[l as usize] == value)
                    .fold(0, |m, l| m | 1 << l)
            }
            None => 1,
        }
    }

    fn sync_warp(mask: u32) {
        if let Some((w, lane)) = Self::warp() {
            w.meet(SyncKind::Barrier, mask, lane, 0);
        }
    }

    fn fence_system() {
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    fn load_acquire_system(word: &std::sync::atomic::AtomicU32) -> u32 {
        word.load(Ordering::Acquire)
    }

    fn store_release_system(word: &std::sync::atomic::AtomicU32, value: u32) {
        word.store(value, Ordering::Release);
    }

    fn lock_or(word: &std::sync::atomic::AtomicU32, bits: u32) -> u32 {
        word.fetch_or(bits, Ordering::Acquire)
    }

    fn lock_store(word: &std::sync::atomic::AtomicU32, value: u32) {
        word.store(value, Ordering::Release);
    }

    fn nanosleep(ns: u32) {
        // An OS sleep costs a system call, a timer and a context switch whatever its
        // length. A GPU's sub-microsecond sleeps, taken by thousands of waiting OS
        // threads on a 2-core machine, keep its cores in the kernel and starve the
        // consumers that would end the wait (a 2,048-thread test passed its 60 s wait
        // limit so). The shortest sleep therefore grows with the threads alive, holding
        // their wake-ups together to EMU_WAKEUPS_PER_S.
        let live = LIVE_THREADS.load(Ordering::Relaxed);
        let floor = Duration::from_nanos(live * 1_000_000_000 / EMU_WAKEUPS_PER_S);
        std::thread::sleep(Duration::from_nanos(ns as u64).max(floor.max(EMU_MIN_SLEEP)));
    }

    fn spin_cycles(cycles: u32) {
        for _ in 0..cycles / 64 {
            std::hint::spin_loop();
        }
    }

    fn caller() -> (u32, u32) {
        with_lane(|l| (l.block, l.thread))
    }

    fn block_threads() -> u32 {
        with_lane(|l| l.block_threads)
    }

    fn is_global(_ptr: *const u8) -> bool {
        true
    }

    fn now_ns() -> u64 {
        static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        EPOCH
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }

    fn trap() -> ! {
        std::panic::resume_unwind(Box::new(Trap))
    }

    fn service_id(slot: &AtomicU32, name: &str) -> u32 {
        let bound = with_lane(|l| {
            l.bindings
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(name)
                .copied()
        });
        bound.unwrap_or_else(|| slot.load(Ordering::Relaxed))
    }
}

/// Emulated "device memory" is this process's memory: a device address is a pointer.
struct HostMemoryReader {
    /// The launch's memory, entered for each copy.
    memory: Arc<LaunchMemory>,
}

impl DeviceMemory for HostMemoryReader {
    fn stream(
        &self,
        addr: u64,
        len: u64,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> (u64, Option<StreamStop>) {
        if addr == 0 {
            return (0, Some(StreamStop::Copy("null device address".into())));
        }
        let mut done = 0;
        while done < len {
            let n = (len - done).min(COPY_PIECE);
            // Copied out inside the launch's memory, handed to the sink outside it (a
            // sink may block for ever).
            let piece = {
                let Some(_copying) = self.memory.enter() else {
                    let gone = "the launch ended and its memory was freed";
                    return (done, Some(StreamStop::Copy(gone.into())));
                };
                // SAFETY: emulated kernels are Rust closures of this process passing their
                // own live buffers (the emulator trusts them as a GPU trusts its kernels'
                // pointers); the module's own allocations stay while a copy is inside.
                unsafe { std::slice::from_raw_parts((addr + done) as *const u8, n as usize) }
                    .to_vec()
            };
            if let Err(e) = sink(&piece) {
                return (done, Some(StreamStop::Sink(e)));
            }
            done += n;
        }
        (len, None)
    }

    fn fill(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        if addr == 0 {
            return Err("null device address".into());
        }
        let Some(_copying) = self.memory.enter() else {
            return Err("the launch ended and its memory was freed".into());
        };
        // SAFETY: as in `stream`: the emulator trusts its kernels' pointers as a GPU does,
        // and an emulated kernel passes its own live buffer, which it does not touch until
        // the answer comes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
        Ok(())
    }
}

/// A launch's memory: each block and the layout it was allocated with.
type Allocations = Vec<(*mut u8, Layout)>;

/// Bytes a [`HostMemoryReader`] copies out at a time.
const COPY_PIECE: u64 = 1 << 20;

struct Running {
    kernel: String,
    threads: Vec<JoinHandle<std::result::Result<(), LaunchEnd>>>,
}

/// The emulated backend: a table of kernels by name plus host memory posing as device
/// memory (device address = host address).
pub struct EmulatedModule {
    kernels: HashMap<String, EmuKernel>,
    abi_version: u32,
    warp_mode: WarpMode,
    allocations: Allocations,
    /// Whether `allocations` may still be read by the launch's services.
    memory: Arc<LaunchMemory>,
    /// Ended launches' allocations that a service was still copying out of.
    deferred: Vec<(Arc<LaunchMemory>, Allocations)>,
    config: Option<DeviceConfig>,
    running: Option<Running>,
    services: Vec<Signature>,
    bindings: Bindings,
    /// Bytes of each launch's heap backed at first, if not all ([`EmulatedModule::backing_heap`]).
    heap_backed: Option<u64>,
    /// The last launch's heap, when backed in part.
    heap: Option<Arc<heap::PartlyBacked>>,
}

impl EmulatedModule {
    /// Bytes of memory the module holds for launches (tests check that a launch's memory
    /// goes when it ends).
    pub fn allocated_bytes(&self) -> usize {
        (self.allocations.iter())
            .chain(self.deferred.iter().flat_map(|(_, a)| a))
            .map(|(_, l)| l.size())
            .sum()
    }

    /// An emulated module with no kernels, speaking this runtime's ABI.
    pub fn new(warp_mode: WarpMode) -> EmulatedModule {
        EmulatedModule {
            kernels: HashMap::new(),
            abi_version: ABI_VERSION,
            warp_mode,
            allocations: Vec::new(),
            memory: Arc::default(),
            deferred: Vec::new(),
            config: None,
            running: None,
            services: Vec::new(),
            bindings: Bindings::default(),
            heap_backed: None,
            heap: None,
        }
    }

    /// Backs only the first `bytes` of each launch's heap at first, as a GPU whose
    /// driver maps memory while a kernel runs does; the rest when the program asks.
    pub fn backing_heap(mut self, bytes: u64) -> Self {
        self.heap_backed = Some(bytes);
        self
    }

    /// How often the last launch's heap, backed in part, was asked to back more and did.
    pub fn heap_grown(&self) -> usize {
        self.heap
            .as_ref()
            .map_or(0, |h| h.grown.load(Ordering::Relaxed))
    }

    /// Records that the kernels call the declared `services` (`<dyn Trait>::SERVICES`),
    /// as a GPU module's slots record the services its kernels call: the host checks
    /// and binds them before each launch.
    pub fn uses(mut self, services: &[Signature]) -> Self {
        self.services.extend_from_slice(services);
        self
    }

    /// Adds a kernel under `name`.
    pub fn kernel(mut self, name: &str, k: impl Fn(&EmuThread) + Send + Sync + 'static) -> Self {
        self.kernels.insert(name.to_owned(), Arc::new(k));
        self
    }

    /// Pretends the module was built for another ABI version.
    pub fn with_abi_version(mut self, v: u32) -> Self {
        self.abi_version = v;
        self
    }

    fn alloc_zeroed(&mut self, len: usize) -> Result<*mut u8> {
        let layout = Layout::from_size_align(len.max(1), 4096)
            .map_err(|e| Error::InvalidLaunch(format!("allocation of {len} bytes: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(Error::InvalidLaunch(format!(
                "out of host memory for {len} bytes"
            )));
        }
        self.allocations.push((p, layout));
        Ok(p)
    }
}

fn panic_text(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

impl GpuModule for EmulatedModule {
    fn describe(&self) -> String {
        format!("emulated GPU ({:?} warps)", self.warp_mode)
    }

    fn abi_version(&mut self) -> Result<u32> {
        Ok(self.abi_version)
    }

    fn alloc_host_mapped(&mut self, len: usize) -> Result<HostMemory> {
        let p = self.alloc_zeroed(len)?;
        Ok(HostMemory {
            host: p,
            device: p as u64,
            len,
        })
    }

    fn alloc_device(&mut self, len: usize, _zeroed: usize) -> Result<u64> {
        Ok(self.alloc_zeroed(len)? as u64)
    }

    fn alloc_heap(&mut self, len: usize, _zeroed: usize) -> Result<Arc<dyn DeviceHeap>> {
        let base = self.alloc_zeroed(len)? as u64;
        let len = len as u64;
        let heap = Arc::new(heap::PartlyBacked {
            base,
            len,
            backed: AtomicU64::new(self.heap_backed.unwrap_or(len).min(len)),
            grown: Default::default(),
        });
        self.heap = Some(heap.clone());
        Ok(heap)
    }

    fn end_launch(&mut self) {
        if !self.threads_left() {
            self.free_ended();
        }
    }

    fn alloc_device_copy(&mut self, bytes: &[u8]) -> Result<u64> {
        let p = self.alloc_zeroed(bytes.len())?;
        // SAFETY: `p` is a fresh allocation of at least `bytes.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
        Ok(p as u64)
    }

    fn write_config(&mut self, config: &DeviceConfig) -> Result<()> {
        self.config = Some(*config);
        Ok(())
    }

    fn launch(&mut self, launch: &Launch) -> Result<()> {
        let kernel = self
            .kernels
            .get(&launch.kernel)
            .cloned()
            .ok_or_else(|| Error::MissingSymbol(launch.kernel.clone()))?;
        let config = self
            .config
            .ok_or_else(|| Error::InvalidLaunch("launch before write_config".into()))?;
        let blocks: u32 = launch.grid.iter().product();
        let per_block: u32 = launch.block.iter().product();
        let grouping = match self.warp_mode {
            WarpMode::Independent => None,
            WarpMode::Lockstep => Some((Grouping::Lockstep, 0)),
            WarpMode::Divergent { seed } => Some((Grouping::Divergent, seed)),
        };
        let mut threads = Vec::with_capacity((blocks * per_block) as usize);
        for block in 0..blocks {
            let mut warp = None;
            for thread in 0..per_block {
                let w = WARP_SIZE as u32;
                if let Some((grouping, seed)) = grouping
                    && thread.is_multiple_of(w)
                {
                    let lanes = (per_block - thread).min(w);
                    let position = (block as u64) << 32 | (thread / w) as u64;
                    warp = Some(Arc::new(Warp::new(grouping, lanes, seed ^ position)));
                }
                let (kernel, warp) = (kernel.clone(), warp.clone());
                // SAFETY: the config describes memory this module allocated and keeps
                // until it is dropped, after these threads are joined or detached.
                let channel = unsafe { Channel::new(&config) };
                let ctx = EmuThread {
                    block,
                    thread,
                    args: launch.args.clone(),
                    channel,
                    config,
                };
                let bindings = self.bindings.clone();
                let alive = Alive::new();
                let t = std::thread::Builder::new()
                    .stack_size(256 << 10)
                    .spawn(move || {
                        let _alive = alive;
                        LANE.with(|l| {
                            *l.borrow_mut() = Some(LaneCtx {
                                block,
                                thread,
                                block_threads: per_block,
                                warp: warp.clone(),
                                bindings,
                            })
                        });
                        let ended = std::panic::catch_unwind(AssertUnwindSafe(|| kernel(&ctx)));
                        if let Some(w) = &warp {
                            w.exit(thread % WARP_SIZE as u32);
                        }
                        ended.map_err(|p| {
                            if p.is::<Trap>() {
                                LaunchEnd::Trapped(format!("trap in block {block} thread {thread}"))
                            } else {
                                LaunchEnd::Faulted(format!(
                                    "block {block} thread {thread} panicked: {}",
                                    panic_text(&*p)
                                ))
                            }
                        })
                    })?;
                threads.push(t);
            }
        }
        self.running = Some(Running {
            kernel: launch.kernel.clone(),
            threads,
        });
        Ok(())
    }

    fn service_slots(&mut self) -> Result<Vec<ModuleSlot>> {
        Ok(self
            .services
            .iter()
            .map(|sig| ModuleSlot {
                symbol: sig.name.to_owned(),
                bytes: [
                    &sig.slot_header()[..],
                    sig.name.as_bytes(),
                    sig.text.as_bytes(),
                ]
                .concat(),
            })
            .collect())
    }

    fn bind_service(&mut self, symbol: &str, id: u32) -> Result<()> {
        let sig = self
            .services
            .iter()
            .find(|s| s.name == symbol)
            .ok_or_else(|| Error::MissingSymbol(symbol.to_owned()))?;
        self.bindings
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(sig.name, id);
        Ok(())
    }

    fn device_memory(&self) -> Arc<dyn DeviceMemory> {
        Arc::new(HostMemoryReader {
            memory: self.memory.clone(),
        })
    }

    fn still_running(&mut self) -> Result<Option<String>> {
        if self.threads_left() {
            return Ok(self.running.as_ref().map(|r| r.kernel.clone()));
        }
        // Its threads have all ended: what they left is joined and forgotten.
        if let Some(r) = self.running.take() {
            for t in r.threads {
                let _ = t.join();
            }
        }
        Ok(None)
    }

    fn poll(&mut self) -> Result<Option<LaunchEnd>> {
        let Some(r) = &self.running else {
            return Err(Error::InvalidLaunch("poll without a launch".into()));
        };
        if !r.threads.iter().all(|t| t.is_finished()) {
            return Ok(None);
        }
        let r = self.running.take().expect("checked above");
        let mut faults = r.threads.into_iter().filter_map(|t| {
            t.join()
                .unwrap_or_else(|p| Err(LaunchEnd::Faulted(panic_text(&*p))))
                .err()
        });
        // The first failure, as the GPU reports the first error; a fault that is not a
        // trap wins over traps, as it would stop the launch whatever the traps did.
        let first = faults.next();
        let fault = faults.find(|f| matches!(f, LaunchEnd::Faulted(_)));
        Ok(Some(match (first, fault) {
            (None, _) => LaunchEnd::Completed,
            (Some(LaunchEnd::Trapped(_)), Some(f)) => f,
            (Some(f), _) => f,
        }))
    }
}

// SAFETY: the allocations are plain host memory owned by the module, reached by other
// threads only through the addresses a launch hands out; nothing in it is tied to the
// thread that made it.
unsafe impl Send for EmulatedModule {}

impl EmulatedModule {
    /// Whether a launch's threads may still run (after a timeout).
    fn threads_left(&self) -> bool {
        self.running
            .as_ref()
            .is_some_and(|r| !r.threads.iter().all(|t| t.is_finished()))
    }

    /// Frees the ended launches' allocations that no service copies out of any more.
    fn free_ended(&mut self) {
        self.deferred.push((
            std::mem::take(&mut self.memory),
            std::mem::take(&mut self.allocations),
        ));
        let (idle, busy): (Vec<_>, Vec<_>) = std::mem::take(&mut self.deferred)
            .into_iter()
            .partition(|(memory, _)| memory.end());
        self.deferred = busy;
        for (p, layout) in idle.into_iter().flat_map(|(_, a)| a) {
            // SAFETY: allocated by `alloc_zeroed` with this layout, freed once; no thread
            // of its launch runs (the callers' check), no service is inside its
            // `LaunchMemory` and none may enter.
            unsafe { std::alloc::dealloc(p, layout) };
        }
    }
}

impl Drop for EmulatedModule {
    fn drop(&mut self) {
        if self.threads_left() {
            // Threads still running (after a timeout) may touch the allocations: leak them.
            self.allocations.clear();
            self.deferred.clear();
            return;
        }
        self.free_ended();
        // What a service still copies out of is left to the process's end.
        self.deferred.clear();
    }
}
