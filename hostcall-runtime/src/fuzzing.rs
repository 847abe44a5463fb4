//! A port in host memory served by the real server and services, with no GPU and no
//! device half: a fuzzer (or a test) writes any bytes into it, publishes, and checks
//! what the host did. Built with the `fuzzing` feature only.

use std::alloc::Layout;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::{Duration, Instant};

use hostcall_abi::answer::{Answer, seq_tag};
use hostcall_abi::{Doorbell, LaneSlot, Port, WARP_SIZE};
use std::sync::atomic::AtomicU64;

use crate::module::{DeviceMemory, StreamStop};
use crate::server::{Context, Mode, Reactor, Scratch, serve_port};
use crate::services::{Capture, Files};
use crate::{Host, HostBuilder, Result};

/// Where the bench's device memory starts, for requests that copy out of or into it.
pub const DEVICE_BASE: u64 = 0x7000_0000_0000;
/// Bytes of the bench's device memory.
pub const DEVICE_BYTES: usize = 1 << 16;

/// Device memory for copies (`Fs.write_from_device`, `OrderedFromDevice`):
/// [`DEVICE_BYTES`] bytes at [`DEVICE_BASE`]; any other address fails to copy, as an
/// unmapped GPU address does.
struct FakeDevice {
    bytes: std::sync::Mutex<Vec<u8>>,
}

impl FakeDevice {
    /// The range `addr..addr + len`, if it lies in the bench's device memory.
    fn range(addr: u64, len: usize) -> Option<std::ops::Range<usize>> {
        let start = usize::try_from(addr.wrapping_sub(DEVICE_BASE)).ok()?;
        let end = start.checked_add(len)?;
        (end <= DEVICE_BYTES).then_some(start..end)
    }
}

impl DeviceMemory for FakeDevice {
    fn stream(
        &self,
        addr: u64,
        len: u64,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> (u64, Option<StreamStop>) {
        let range = usize::try_from(len)
            .ok()
            .and_then(|n| FakeDevice::range(addr, n));
        let Some(range) = range else {
            return (0, Some(StreamStop::Copy("not device memory".into())));
        };
        let bytes = self.bytes.lock().unwrap_or_else(|p| p.into_inner())[range].to_vec();
        match sink(&bytes) {
            Ok(()) => (len, None),
            Err(e) => (0, Some(StreamStop::Sink(e))),
        }
    }

    fn fill(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        let range = FakeDevice::range(addr, data.len()).ok_or("not device memory")?;
        self.bytes.lock().unwrap_or_else(|p| p.into_inner())[range].copy_from_slice(data);
        Ok(())
    }
}

/// One port, its doorbell, and the host's services behind it.
pub struct PortBench {
    port: *mut Port,
    doorbell: Box<Doorbell>,
    /// Wake words for the port's lanes' parked calls (the server writes them).
    _wake: Box<[AtomicU64]>,
    ctx: Arc<Context>,
    /// The bench's process's reactor, stopped when the bench drops as a run's is when it
    /// ends: never by its own thread, which would join itself if a call's context it
    /// holds were the last owner.
    reactor: Arc<Reactor>,
    files: Arc<Files>,
    scratch: Scratch,
    seq: u32,
    mounts: Vec<PathBuf>,
    /// The process's files below a mount before the bench served anything.
    open_before: Vec<(String, PathBuf)>,
}

// SAFETY: the port is owned by the bench and only touched through atomics and copies.
unsafe impl Send for PortBench {}

const PORT_LAYOUT: Layout = Layout::new::<Port>();

impl PortBench {
    /// Services as `builder` grants them, over a zeroed port. Output is captured, not
    /// echoed.
    pub fn new(builder: HostBuilder) -> Result<PortBench> {
        PortBench::with_host(builder.echo_output(false).capture_output(true).build()?)
    }

    /// Services as `host` has them, host closures ([`Host::hostcall`]) included, over a
    /// zeroed port.
    pub fn with_host(host: Host) -> Result<PortBench> {
        // SAFETY: `Port` is not zero-sized; zeroed memory is a valid idle port.
        let port = unsafe { std::alloc::alloc_zeroed(PORT_LAYOUT) }.cast::<Port>();
        assert!(!port.is_null(), "allocating a port");
        let doorbell = Box::new(Doorbell::new(0));
        let wake: Box<[AtomicU64]> = (0..WARP_SIZE).map(|_| AtomicU64::new(0)).collect();
        let process = host.process_state();
        let device = Arc::new(FakeDevice {
            bytes: std::sync::Mutex::new((0..DEVICE_BYTES).map(|i| i as u8).collect()),
        });
        let heap = Arc::new(crate::module::WholeHeap {
            base: 0,
            len: DEVICE_BYTES as u64,
        });
        let (files, services) = host.services_in(&process, device, heap, None);
        let ports = crate::server::Ports {
            base: port,
            doorbells: &*doorbell,
            len: 1,
            wake: wake.as_ptr(),
            wake_words: wake.len(),
        };
        let ctx = Context::new(
            ports,
            Arc::new(services),
            host.b.blocking_threads,
            crate::server::Tracing::default(),
            files.log.clone(),
            process.reactor(),
        );
        let reactor = process.reactor();
        let mounts: Vec<PathBuf> = host
            .sandbox
            .mounts()
            .iter()
            .map(|m| m.host.clone())
            .collect();
        let open_before = open_below(&mounts);
        Ok(PortBench {
            port,
            doorbell,
            _wake: wake,
            ctx,
            reactor,
            files,
            scratch: Scratch::new(),
            seq: 0,
            mounts,
            open_before,
        })
    }

    /// The port, to write slots and bulk bytes into (from any thread, with atomics or
    /// volatile accesses: the server reads it concurrently).
    pub fn port(&self) -> *mut Port {
        self.port
    }

    /// Writes lane `lane`'s slot for the next publication.
    pub fn write_slot(&self, lane: usize, slot: LaneSlot) {
        // SAFETY: `lane < 32` (indexing panics otherwise); the port is live.
        unsafe { (&raw mut (*self.port).lanes[lane]).write_volatile(slot) };
    }

    /// The sequence the next publication carries.
    pub fn next_seq(&self) -> u32 {
        self.seq.wrapping_add(1)
    }

    /// Publishes the packet of `mask`'s lanes and serves it as a consumer would, waiting
    /// up to `patience` for work handed to the blocking pool; `tend` runs while waiting
    /// (to unblock a FIFO, say). Returns whether the host finished with the packet
    /// (`response`) and every lane of `waiting` was answered: a lane whose slot says it
    /// is posted gets no answer, and a slot rewritten while it is served may say so.
    pub fn publish_and_serve(
        &mut self,
        mask: u32,
        waiting: u32,
        patience: Duration,
        tend: &mut dyn FnMut(),
    ) -> bool {
        self.seq = self.next_seq();
        // SAFETY: the header is accessed only through atomics.
        let header = unsafe { &(*self.port).header };
        header.lane_mask.store(mask, Relaxed);
        for lane in (0..32).filter(|l| mask & (1 << l) != 0) {
            // SAFETY: as above.
            unsafe { (*self.port).answers[lane].store(0, Relaxed) };
        }
        self.doorbell.store(self.seq, Release);
        // A packet a consumer would leave on its port for now (no room for its output)
        // is taken as at the end of a launch: the bench has no later sweep.
        if serve_port(&self.ctx, 0, self.seq, &mut self.scratch, Mode::Live).is_none() {
            serve_port(&self.ctx, 0, self.seq, &mut self.scratch, Mode::Drain);
        }
        let started = Instant::now();
        // As the GPU's lanes do: each waits for its own answer word (`response` is
        // stored once every lane not posted has its answer or its ticket).
        let tag = seq_tag(self.seq);
        let answered = |lane: usize| self.answer(lane).is_some_and(|a| a.seq == tag);
        while header.response.load(Acquire) != self.seq
            || !(0..32).filter(|l| waiting & (1 << l) != 0).all(answered)
        {
            if started.elapsed() > patience {
                return false;
            }
            tend();
            std::thread::sleep(Duration::from_micros(50));
        }
        true
    }

    /// Lane `lane`'s answer word, decoded.
    pub fn answer(&self, lane: usize) -> Option<Answer> {
        // SAFETY: answer words are atomics; the port is live.
        Answer::decode(unsafe { (*self.port).answers[lane].load(Acquire) })
    }

    /// Lane `lane`'s slot as the host left it (result and bulk count when not inline).
    pub fn slot(&self, lane: usize) -> LaneSlot {
        // SAFETY: as for `write_slot`.
        unsafe { (&raw const (*self.port).lanes[lane]).read_volatile() }
    }

    /// Host paths of the GPU's open files that lie outside every mount (should be none).
    pub fn files_outside_mounts(&self) -> Vec<PathBuf> {
        let table = self.files.table.lock().unwrap_or_else(|p| p.into_inner());
        table
            .files()
            .iter()
            .filter_map(|f| std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok())
            .filter(|p| !self.mounts.iter().any(|m| p.starts_with(m)))
            .collect()
    }

    /// Bytes the services hold for the GPU: out-of-order posted writes and captures.
    pub fn held_bytes(&self) -> usize {
        let stdio = &self.files.stdio;
        stdio.held() + stdio.captured.as_ref().map_or(0, Capture::held)
    }

    /// Bytes the posted-write reorder buffers keep allocated beyond what they hold.
    pub fn retained_bytes(&self) -> usize {
        self.files.stdio.retained()
    }

    /// The most [`PortBench::retained_bytes`] may be: both fds' buffers at their bound.
    pub fn retained_limit() -> usize {
        2 * crate::services::RETAINED_MAX
    }

    /// Ends the run as `Host::run` does (the drain, then the run's files closed), and
    /// says what is left of it: jobs still queued in the blocking pool, and files below
    /// a mount the process holds open that it did not before the bench served anything
    /// (a job still running 10 s after the drain would hold one). Both should be 0.
    pub fn finish(&mut self) -> (usize, usize) {
        crate::server::drain(&self.ctx, Instant::now() + Duration::from_secs(1));
        // A job still running after the drain (an open starved of CPU on a loaded
        // machine) adds its fd when it ends, and a call the reactor's thread was
        // running as the run ended holds its files until it returns: both waited for,
        // up to 10 s, before what is left open is counted.
        let until = Instant::now() + Duration::from_secs(10);
        while self.ctx.busy_jobs() > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.files.close_all();
        let left = loop {
            let left = open_below(&self.mounts)
                .into_iter()
                .filter(|f| !self.open_before.contains(f))
                .count();
            if left == 0 || Instant::now() >= until {
                break left;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        (self.ctx.queued_jobs(), left)
    }

    /// Nanoseconds one copy of `n` input bytes out of the port takes, averaged over
    /// `iters` copies: the price of copying requests in before serving them.
    pub fn copy_in_ns(&self, n: usize, iters: u32) -> f64 {
        let cap = hostcall_abi::PORT_BULK;
        assert!(n <= cap, "at most the port's bulk area");
        // SAFETY: a field address inside the live port.
        let at = unsafe { (&raw const (*self.port).bulk).cast::<u8>() };
        let mut into = Vec::with_capacity(cap);
        let started = Instant::now();
        for _ in 0..iters {
            // SAFETY: the bulk area is 8-aligned and `cap` bytes long; `n <= cap`.
            unsafe { crate::server::copy_in(std::hint::black_box(at), n, cap, &mut into) };
            std::hint::black_box(&into);
        }
        started.elapsed().as_nanos() as f64 / iters as f64
    }

    /// How many handler panics the server caught since the process started.
    pub fn handler_panics() -> u64 {
        crate::server::HANDLER_PANICS.load(Relaxed)
    }
}

/// The process's open files at or below one of `mounts`, as (fd, path) pairs (the
/// sandbox's own handles of the mounts are open before the bench serves anything).
fn open_below(mounts: &[PathBuf]) -> Vec<(String, PathBuf)> {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|e| {
            let target = std::fs::read_link(e.path()).ok()?;
            mounts
                .iter()
                .any(|m| target.starts_with(m))
                .then(|| (e.file_name().to_string_lossy().into_owned(), target))
        })
        .collect()
}

impl Drop for PortBench {
    fn drop(&mut self) {
        self.ctx.retire();
        self.reactor.stop();
        // SAFETY: allocated in `new` with this layout; no pool job writes it after
        // `retire`.
        unsafe { std::alloc::dealloc(self.port.cast(), PORT_LAYOUT) };
    }
}
