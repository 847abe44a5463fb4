//! The hostcall wire format: the one definition of every byte the GPU and the host
//! exchange. Both halves of the transport compile this crate (nvptx64 and x86_64), so
//! a layout can never drift between them; `const` asserts pin each size and offset.
//!
//! # Memory
//!
//! The host allocates three regions before a launch and describes them to the GPU in
//! [`DeviceConfig`], which it writes into the module's global [`CONFIG_SYMBOL`]:
//!
//! * the **channel**: `num_ports` [`Port`]s in host-pinned, device-mapped memory. Only
//!   plain loads and stores cross PCIe (no read-modify-write on host memory, which PCIe
//!   atomics would need);
//! * the **port states**: one [`PortState`] per port in device memory, holding the lock
//!   that GPU warps contend on and the port's next sequence number;
//! * the **device heap** and the **thread area** (per-thread `errno` and pthread keys)
//!   used by libc-hostcall without any hostcall.
//!
//! # Protocol (one port)
//!
//! A port is owned either by the GPU or by the host; ownership moves by two counters in
//! the port's [`PortHeader`]: `request` (written only by the GPU) and `response` (written
//! only by the host). `request == response` means the host owns nothing on it.
//!
//! 1. A warp's leader lane (lowest lane of the active mask) takes the port's lock in
//!    [`PortState::lock`] with a compare-exchange in device memory; the port index is
//!    broadcast to the other active lanes.
//! 2. Each active lane writes its own [`LaneSlot`] (service id, caller coordinates,
//!    arguments, `status` = pending) and its bulk bytes: lane `i` of a shared packet uses
//!    `bulk[i]` ([`BULK_PER_LANE`] bytes); a lone lane uses the whole bulk area
//!    ([`PORT_BULK`] bytes from `bulk[0]`), so large transfers take fewer round trips. When several lanes share the
//!    packet, each then executes a **system-scope fence**, and all meet at a warp barrier.
//! 3. The leader writes the lane mask, then stores `request = seq` with **system-scope
//!    release** semantics. The payload is therefore visible to any host thread that
//!    observes the new `request`.
//! 4. The host polls `request` with acquire loads. On `request != response` it reads the
//!    mask and the slots, serves each lane, writes each lane's results and then its
//!    `status`, then stores `response = request` with release semantics.
//! 5. The leader polls `response` with system-scope acquire loads until it equals `seq`;
//!    a warp barrier (and, for a shared packet, a fence in each lane) hands the results
//!    to all lanes. Each lane reads its slot with volatile loads and accepts it only once
//!    `status` is no longer pending and the slot still holds its own coordinates.
//! 6. A final warp barrier, then the leader releases the lock (release store).
//!
//! A **posted** request (stdout/stderr writes) stops after step 3: the leader releases
//! the lock as [`PORT_FREE_POSTED`] without waiting, and whoever takes the port next
//! first waits for `response == seq`. Posted writes carry a ticket from
//! [`LaunchState::stdio_tickets`]; the host writes them in ticket order, and serves every
//! port once more after the launch ends so none is lost.
//!
//! A result is any `i64`: completion is the `response` counter, never a sentinel value.
//! When every port is locked the caller backs off and retries: back-pressure, no loss.
//!
//! # Errors
//!
//! Results follow the Linux system call convention: `-errno` on failure, with errno
//! numbers of x86_64 Linux ([`errno`]), which libc-hostcall stores in `errno` unchanged.
//! Transport-level failures (unknown service, malformed request) are reported separately
//! in [`LaneSlot::status`] so they can never be confused with a service's own error.

#![no_std]

pub mod errno;
pub mod layout;
pub mod service;
pub mod stat;

pub use layout::{
    BULK_PER_LANE, CONFIG_SYMBOL, DeviceConfig, FLAG_SINGLE_LANE, HEAP_RESERVED, LaneSlot,
    LaunchState, MAX_KEYS, PORT_BULK, PORT_FREE, PORT_FREE_POSTED, PORT_HELD, Port, PortHeader,
    PortState, ThreadArea, VERSION_SYMBOL, WARP_SIZE,
};
pub use service::{DEVICE_WRITE_MAX, Service, Status};

/// The version both halves must agree on; bump it on any change to this crate's layouts,
/// service ids or argument conventions. The host refuses a module built with another.
pub const ABI_VERSION: u32 = 1;
