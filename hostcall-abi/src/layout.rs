//! Memory layouts shared by the GPU and the host. Every struct is `repr(C)` and its size
//! is asserted at compile time: a change here is a change of [`crate::ABI_VERSION`].

use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU32, AtomicU64};

/// Lanes in an NVIDIA warp; a port carries one [`LaneSlot`] per lane.
pub const WARP_SIZE: usize = 32;

/// Bytes of bulk data each lane of a shared packet can send or receive per round trip.
/// Larger transfers are split by the client into chunks.
pub const BULK_PER_LANE: usize = 4096;

/// Bytes of bulk data a lone lane (a packet whose lane mask has one bit) can send or
/// receive per round trip: the port's whole bulk area, from `bulk[0]`.
pub const PORT_BULK: usize = BULK_PER_LANE * WARP_SIZE;

/// Name of the module global (a [`DeviceConfig`]) the host fills before each launch.
pub const CONFIG_SYMBOL: &str = "__hostcall_config";

/// Name of the module global (a `u32`) holding the ABI version the module was built with.
pub const VERSION_SYMBOL: &str = "__hostcall_abi_version";

/// Bytes at the start of the device heap reserved for the allocator's own state; the host
/// zeroes them before a launch.
pub const HEAP_RESERVED: usize = 64 << 10;

/// The largest device heap (just under 64 GiB): libc-hostcall's allocator names a block by
/// its index in 16-byte units, in the 32 bits of a free-list word beside its ABA tag, and
/// the index plus one must fit.
pub const HEAP_MAX_BYTES: u64 = HEAP_RESERVED as u64 + ((1 << 32) - 1) * 16;

/// pthread keys available to each GPU thread (std needs a handful).
pub const MAX_KEYS: usize = 31;

/// Heap size classes (16 B, 32 B, ...) of which each GPU thread keeps one freed block
/// for its next allocation ([`ThreadArea::heap_cache`]).
pub const CACHED_CLASSES: usize = 8;

/// Where the GPU finds everything the host prepared, written into [`CONFIG_SYMBOL`].
/// Addresses are device virtual addresses.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceConfig {
    /// Must equal the module's own [`crate::ABI_VERSION`]; the host checks before launch.
    pub abi_version: u32,
    /// Ports in the channel.
    pub num_ports: u32,
    /// Device address of `Port[0]` (host-pinned memory mapped into the device).
    pub ports: u64,
    /// Device address of `PortState[0]` (device memory).
    pub port_states: u64,
    /// Device address of the heap (device memory); its first [`HEAP_RESERVED`] bytes are
    /// the allocator's state.
    pub heap_base: u64,
    /// Bytes in the heap, including the reserved ones.
    pub heap_size: u64,
    /// Device address of `ThreadArea[0]`, one per thread of the launch.
    pub thread_area: u64,
    /// Threads the thread area has room for (grid size times block size).
    pub thread_capacity: u64,
    /// [`FLAG_SINGLE_LANE`] and future switches.
    pub flags: u32,
    /// 0 when the host runs this launch alone; in a run over several GPUs
    /// (`Host::run_all`), the device's place in it plus one, so that thread names, and
    /// with them panic messages, say which GPU a thread is on.
    pub gpu: u32,
    /// Device address of this launch's [`LaunchState`] (device memory, zeroed).
    pub launch_state: u64,
    /// Longest a GPU thread waits for a port or an answer before it gives up, reports a
    /// [`FaultRecord`] and traps, in nanoseconds; 0 waits forever.
    pub wait_limit_ns: u64,
    /// Device address of the launch's [`FaultRecord`] (host-pinned memory, zeroed).
    pub fault: u64,
    /// Device address of the doorbells: `num_ports` [`Doorbell`]s (host-pinned memory,
    /// zeroed), side by side so that a host thread checks every port in a few cache lines.
    pub doorbells: u64,
    /// Device address of the wake words of parked calls ([`crate::park`]): `wake_words`
    /// 64-bit words (host-pinned memory, zeroed), written only by the host.
    pub wake: u64,
    /// Wake words at `wake`: calls that may be parked at once.
    pub wake_words: u32,
    /// In a [`crate::START_KERNEL`] launch, the lanes of each warp that run the program's
    /// threads (the main thread and those held back for `pthread_create`), from lane 0;
    /// the warp's other lanes end at once. 0 reads as 1 (see [`crate::spawn`]).
    pub thread_lanes: u32,
    /// In a [`crate::START_KERNEL`] launch, the threads held back for `pthread_create`
    /// (the program's threads past the main one), at most what the lanes that run
    /// threads hold; 0: all of them.
    pub held_back: u32,
    /// The device's streaming multiprocessors (0: unknown, as on the emulator):
    /// `available_parallelism` reports one thread per multiprocessor at most
    /// ([`crate::spawn::processors`]).
    pub multiprocessors: u32,
}

impl DeviceConfig {
    /// All zero: what a module holds before a host runtime fills it (`num_ports == 0`
    /// tells the GPU side that nobody serves it).
    pub const UNSET: DeviceConfig = DeviceConfig {
        abi_version: 0,
        num_ports: 0,
        ports: 0,
        port_states: 0,
        heap_base: 0,
        heap_size: 0,
        thread_area: 0,
        thread_capacity: 0,
        flags: 0,
        gpu: 0,
        launch_state: 0,
        wait_limit_ns: 0,
        fault: 0,
        doorbells: 0,
        wake: 0,
        wake_words: 0,
        thread_lanes: 0,
        held_back: 0,
        multiprocessors: 0,
    };
}

/// Device-wide state of one launch that the GPU's libc keeps (zeroed by the host).
#[repr(C)]
#[derive(Debug, Default)]
pub struct LaunchState {
    /// Next ticket of posted writes to fd 0, 1, 2: the host writes posted data of one fd
    /// in ticket order, whatever order the ports are served in.
    pub stdio_tickets: [AtomicU64; 3],
    /// 0 until a GPU thread claims the right to write the [`FaultRecord`] (first one wins).
    pub fault_claim: AtomicU32,
    /// 1 once a thread-local value with a destructor has been set: the host then runs
    /// the destructors (`THREAD_EXIT_KERNEL`) when the kernel ends.
    pub tls_destructors: AtomicU32,
    /// The program's `argv` array (device heap), fetched once per launch by the first
    /// thread that asks: 0 not yet, 1 being fetched, else the address.
    pub argv: AtomicU64,
    /// The address of the program's `environ` variable (device heap), as `argv`.
    pub environ: AtomicU64,
    /// Threads `pthread_create` can start at once: the held-back GPU threads of a
    /// [`START_KERNEL`] launch, set by its main thread before `main` runs (0: none, as in
    /// a launch whose every thread runs the kernel).
    pub workers: AtomicU32,
    /// Held-back threads that have parked, ready to take a thread ([`crate::spawn`]).
    pub workers_ready: AtomicU32,
    /// Bytes of the heap mapped from its base (`DeviceConfig::heap_base`), set by the
    /// host before the launch: a heap is an address range of `heap_size` bytes of which
    /// only a prefix need be backed by memory at first, so that a process does not pay
    /// at its start and end for tens of GiB it may never touch. The allocator asks the
    /// host to map more (`Memory::grow_heap`, which maps before it answers) before it
    /// hands out bytes past it, and raises this word to the answer (`fetch_max`, Release;
    /// read with Acquire).
    pub heap_mapped: AtomicU64,
}

/// The kernel every module exports (from libc-hostcall) that runs a launch's
/// thread-local destructors: the host launches it with the launch's own geometry once
/// the kernel has ended, so each GPU thread's destructors run on that thread's
/// coordinates, as on Linux when a thread ends.
pub const THREAD_EXIT_KERNEL: &str = "__hostcall_thread_exit";

/// The kernel that runs a binary crate's `fn main` as a process would (libc-hostcall's
/// `start` feature, which `ptx_builder` turns on for a binary): `argv` from the host,
/// rustc's C `main`, then `exit` with what it returns.
pub const START_KERNEL: &str = "__hostcall_start";

/// Why a GPU thread gave up on the transport (`FaultRecord::kind`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// No port became free within the wait limit.
    NoPort = 1,
    /// The host did not answer a request within the wait limit.
    NoAnswer = 2,
    /// The host did not finish a posted request within the wait limit.
    NoPostedAnswer = 3,
    /// The lane's answer word carried another sequence: the host broke the protocol.
    ForeignAnswer = 4,
    /// The host answered [`crate::Status::Killed`]: its timeout fired, or the run
    /// halted (a call no handler serves, under the halting policy).
    Killed = 5,
    /// A declared service that cannot fail got a failure (no handler, a malformed
    /// request, a handler's panic): `port` holds the service id, `detail` the errno.
    ServiceFailed = 6,
}

impl FaultKind {
    /// The kind with this code, if any.
    pub fn from_code(code: u32) -> Option<FaultKind> {
        [
            FaultKind::NoPort,
            FaultKind::NoAnswer,
            FaultKind::NoPostedAnswer,
            FaultKind::ForeignAnswer,
            FaultKind::Killed,
            FaultKind::ServiceFailed,
        ]
        .into_iter()
        .find(|k| *k as u32 == code)
    }
}

/// The first transport failure of a launch, written by the GPU thread that met it just
/// before it traps, so that the host can say which thread gave up on what. Lives in
/// host-pinned memory: a trapped context can no longer be read.
#[repr(C)]
#[derive(Debug, Default)]
pub struct FaultRecord {
    /// Set to 1, with release semantics, once the other fields are written.
    pub valid: AtomicU32,
    /// A [`FaultKind`].
    pub kind: u32,
    /// The port index.
    pub port: u32,
    /// The request's sequence number on that port.
    pub seq: u32,
    /// The thread's linear block index.
    pub block: u32,
    /// The thread's index within its block.
    pub thread: u32,
    /// How long it waited, in nanoseconds.
    pub waited_ns: u64,
    /// The answer word found ([`FaultKind::ForeignAnswer`]), else 0.
    pub detail: u64,
}

/// `DeviceConfig::flags`: every lane calls alone (one-lane packets) instead of sharing a
/// packet with the lanes of its warp that call at the same time.
pub const FLAG_SINGLE_LANE: u32 = 1;

/// `PortState::word` bit: a packet holds the port.
pub const PORT_HELD: u32 = 1;
/// `PortState::word` bit: the port's last packet was posted (nobody waited for its
/// answer), so the next owner waits until `response` equals the word's sequence before
/// using the slots.
pub const PORT_POSTED: u32 = 2;
/// `PortState::word`: the sequence of the port's last published packet sits above the
/// two flag bits (so it counts modulo 2^30).
pub const PORT_SEQ_SHIFT: u32 = 2;

/// Ports at the end of a channel of `num_ports` kept for requests whose tickets (the
/// numbers that order stdout and stderr) an earlier request took: the later pieces of a
/// write, and a piece sent again. The host never holds a request back on one of these,
/// while it may leave a posted piece it has no room for on any other: so the piece
/// whose turn it is always finds a port, and held-back pieces can never take every
/// port from it. None in a channel of one port.
pub const fn continuation_ports(num_ports: u32) -> u32 {
    if num_ports < 2 {
        0
    } else {
        let n = num_ports / 16;
        if n == 0 { 1 } else { n }
    }
}

/// Per-port state that only GPU threads touch, in device memory so that taking the
/// lock never crosses PCIe.
#[repr(C)]
#[derive(Debug, Default)]
pub struct PortState {
    /// [`PORT_HELD`], [`PORT_POSTED`] and the last published sequence (from
    /// [`PORT_SEQ_SHIFT`]), in one word: one atomic OR of `PORT_HELD` takes the port and
    /// reads its sequence, one store releases it with the next.
    pub word: AtomicU32,
    /// Zero.
    pub reserved: u32,
}

/// A port's doorbell, written only by the GPU: the sequence number of the latest packet
/// published on the port. The doorbells of all ports sit side by side, apart from the
/// ports, so that the host's scan of every port reads a few cache lines, not one page per
/// port.
pub type Doorbell = AtomicU32;

/// The rest of a port's handshake, alone on its cache line.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct PortHeader {
    /// Written only by the host: the sequence number of the latest packet whose
    /// requests it has finished reading (answered, or copied for the blocking pool).
    pub response: AtomicU32,
    /// Lanes of the packet (bit i = lane i), written before the doorbell.
    pub lane_mask: AtomicU32,
    /// Written only by the host: [`PORT_HELD_BACK`] with the sequence of a posted packet
    /// it leaves on the port, unserved, for lack of room for its output (its bytes wait
    /// on the port until the host's stdout takes what is ahead of them). A GPU thread
    /// that finds the port's last packet so marked takes another port rather than wait
    /// for a reader that may never come back.
    pub held: AtomicU32,
}

/// [`PortHeader::held`]'s mark: the rest of the word is the held-back packet's sequence
/// (sequences count modulo 2^30, so a zeroed header marks none).
pub const PORT_HELD_BACK: u32 = 1 << 31;

/// `LaneSlot::seq` bit: the request is posted, nobody waits for its answer. A host that
/// serves it later (a call that may block) frees the port at once and drops the answer,
/// and never parks it. Sequences count modulo 2^30 ([`PORT_SEQ_SHIFT`]), so the bit is
/// free.
pub const SLOT_POSTED: u32 = 1 << 31;

/// One lane's request. When its answer is not inline (see [`crate::answer`]), the host
/// writes the result into `args[0]` and the bulk bytes it wrote back into `args[5]`.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneSlot {
    /// A [`crate::Service`] id.
    pub service: u32,
    /// The sequence number of the packet this request belongs to (the host serves the
    /// slot only if it equals the `request` it was handed), and [`SLOT_POSTED`] for a
    /// posted request.
    pub seq: u32,
    /// Linear block index of the caller, for traces and error reports.
    pub block: u32,
    /// Linear thread index of the caller within its block.
    pub thread: u32,
    /// The service's arguments.
    pub args: [u64; 6],
}

impl LaneSlot {
    /// The sequence of the packet the request was written for.
    pub const fn sequence(&self) -> u32 {
        self.seq & !SLOT_POSTED
    }

    /// Whether the request is posted ([`SLOT_POSTED`]).
    pub const fn posted(&self) -> bool {
        self.seq & SLOT_POSTED != 0
    }
}

/// A port: doorbell, an answer word per lane, a request slot per lane, bulk buffers.
#[repr(C, align(64))]
pub struct Port {
    /// The doorbell.
    pub header: PortHeader,
    /// Lane `i`'s answer word (see [`crate::answer`]); the 32 words share four cache
    /// lines, so a warp polling its answers reads host memory in four transactions.
    pub answers: [AtomicU64; WARP_SIZE],
    /// Lane `i` uses `lanes[i]`.
    pub lanes: [LaneSlot; WARP_SIZE],
    /// Lane `i` uses `bulk[i]` for data in either direction.
    pub bulk: [[u8; BULK_PER_LANE]; WARP_SIZE],
}

/// Per-GPU-thread libc state, indexed by the thread's global linear id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadArea {
    /// The thread's `errno`.
    pub errno: i32,
    /// The offset of the top of the thread's frame stack (at `frame_stack`).
    pub frame_top: u32,
    /// Values of pthread keys `1..=MAX_KEYS` (key `k` lives at `keys[k - 1]`).
    pub keys: [u64; MAX_KEYS],
    /// The generation of key `k` when `keys[k - 1]` was set: keys are recycled, and a
    /// value set under an older generation reads as NULL.
    pub key_gens: [u32; MAX_KEYS],
    /// 1 once the thread's frame stack overflowed: the room kept for the report is then
    /// open to it.
    pub frame_overflowed: u32,
    /// Per small heap class, a block this thread freed and will allocate next (0: none),
    /// so that a thread's allocate/free pairs touch no shared free list.
    pub heap_cache: [u64; CACHED_CLASSES],
    /// This thread's hand-off word when it is held back to run spawned threads
    /// ([`crate::spawn`] states; 0 otherwise).
    pub spawn_state: u32,
    /// Pads `spawn_start` to 8 bytes.
    pub reserved3: u32,
    /// The spawned thread's start routine (`void *(*)(void *)`), set before `RUNNING`.
    pub spawn_start: u64,
    /// Its argument.
    pub spawn_arg: u64,
    /// std's landing for a panic of the spawned thread running here (fixup 0010): the
    /// address of a (function, join packet) pair in the thread's start frame, 0 while
    /// none is armed.
    pub panic_landing: u64,
    /// The device address of this GPU thread's frame stack ([`crate::FRAME_STACK_BYTES`]
    /// taken from the heap for good when it is first given a thread, or as the main
    /// thread starts), 0 until then.
    pub frame_stack: u64,
    /// The exception this thread is unwinding with ([`crate::unwind`]), 0 while it is
    /// not.
    pub unwinding: u64,
}

const _: () = {
    assert!(size_of::<DeviceConfig>() == 120);
    assert!(continuation_ports(1) == 0 && continuation_ports(2) == 1);
    assert!(continuation_ports(128) == 8);
    assert!(size_of::<LaunchState>() == 64);
    assert!(size_of::<FaultRecord>() == 40);
    assert!(size_of::<PortState>() == 8);
    assert!(size_of::<PortHeader>() == 64);
    assert!(size_of::<LaneSlot>() == 64);
    assert!(offset_of!(LaneSlot, args) == 16);
    assert!(offset_of!(Port, answers) == 64);
    assert!(offset_of!(Port, lanes) == 64 + 8 * WARP_SIZE);
    assert!(offset_of!(Port, bulk) == 64 + 72 * WARP_SIZE);
    assert!(size_of::<Port>() == 64 + 72 * WARP_SIZE + BULK_PER_LANE * WARP_SIZE);
    assert!(size_of::<ThreadArea>() == 496);
};
