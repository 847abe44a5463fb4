//! Memory layouts shared by the GPU and the host. Every struct is `repr(C)` and its size
//! is asserted at compile time: a change here is a change of [`crate::ABI_VERSION`].

use core::mem::{offset_of, size_of};
use core::sync::atomic::AtomicU32;

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

/// pthread keys available to each GPU thread (std needs a handful).
pub const MAX_KEYS: usize = 31;

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
    /// Zero.
    pub reserved: u32,
    /// Device address of this launch's [`LaunchState`] (device memory, zeroed).
    pub launch_state: u64,
}

/// Device-wide state of one launch that the GPU's libc keeps (zeroed by the host).
#[repr(C)]
#[derive(Debug, Default)]
pub struct LaunchState {
    /// Next ticket of posted writes to fd 0, 1, 2: the host writes posted data of one fd
    /// in ticket order, whatever order the ports are served in.
    pub stdio_tickets: [core::sync::atomic::AtomicU64; 3],
    /// Room to grow without changing the allocation.
    pub reserved: [u64; 5],
}

/// `DeviceConfig::flags`: every lane calls alone (one-lane packets) instead of sharing a
/// packet with the lanes of its warp that call at the same time.
pub const FLAG_SINGLE_LANE: u32 = 1;

/// `PortState::lock`: free.
pub const PORT_FREE: u32 = 0;
/// `PortState::lock`: held by a warp.
pub const PORT_HELD: u32 = 1;
/// `PortState::lock`: free, but its last request was posted (nobody waited for the
/// answer), so the next owner waits until `response == seq` before using the slots.
pub const PORT_FREE_POSTED: u32 = 2;

/// Per-port state that only GPU threads touch, in device memory so that the lock's
/// compare-exchange never crosses PCIe.
#[repr(C)]
#[derive(Debug, Default)]
pub struct PortState {
    /// [`PORT_FREE`], [`PORT_HELD`] by a warp, or [`PORT_FREE_POSTED`]: free, but the
    /// last request was posted and may still be unanswered.
    pub lock: AtomicU32,
    /// The last `request` value published on this port (read and written under the lock).
    pub seq: AtomicU32,
}

/// The two ownership counters of a port, alone on their cache line.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct PortHeader {
    /// Written only by the GPU: the sequence number of the latest request.
    pub request: AtomicU32,
    /// Written only by the host: the sequence number of the latest answered request.
    pub response: AtomicU32,
    /// Lanes that take part in the current request (bit i = lane i), set before `request`.
    pub lane_mask: AtomicU32,
}

/// One lane's request and, once answered, its result.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneSlot {
    /// In: a [`crate::Service`] id.
    pub service: u32,
    /// Out: a [`crate::Status`]; anything but `Ok` means the host did not run the service.
    pub status: u32,
    /// In: linear block index of the caller, for traces and error reports.
    pub block: u32,
    /// In: linear thread index of the caller within its block.
    pub thread: u32,
    /// In: the service's arguments. Out: `args[0]` is the result (`i64`, `-errno` on
    /// failure); services that return more say where.
    pub args: [u64; 6],
}

/// A port: header, a slot per lane and a bulk buffer per lane.
#[repr(C, align(64))]
pub struct Port {
    /// Ownership counters and lane mask.
    pub header: PortHeader,
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
    /// Keeps `keys` 8-byte aligned.
    pub reserved: u32,
    /// Values of pthread keys `1..=MAX_KEYS` (key `k` lives at `keys[k - 1]`).
    pub keys: [u64; MAX_KEYS],
    /// The generation of key `k` when `keys[k - 1]` was set: keys are recycled, and a
    /// value set under an older generation reads as NULL.
    pub key_gens: [u32; MAX_KEYS],
    /// Pads the area to a multiple of 16 bytes.
    pub reserved2: u32,
}

const _: () = {
    assert!(size_of::<DeviceConfig>() == 72);
    assert!(size_of::<LaunchState>() == 64);
    assert!(size_of::<PortState>() == 8);
    assert!(size_of::<PortHeader>() == 64);
    assert!(size_of::<LaneSlot>() == 64);
    assert!(offset_of!(LaneSlot, args) == 16);
    assert!(offset_of!(Port, lanes) == 64);
    assert!(offset_of!(Port, bulk) == 64 + 64 * WARP_SIZE);
    assert!(size_of::<Port>() == 64 + 64 * WARP_SIZE + BULK_PER_LANE * WARP_SIZE);
    assert!(size_of::<ThreadArea>() == 384);
};
