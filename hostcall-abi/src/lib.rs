//! The hostcall wire format: the layout of every byte the GPU and the host exchange,
//! the transport's own services' conventions ([`Service`]), the typed convention
//! declared services travel by ([`typed`]), and the constants both sides pass (errno numbers,
//! `fcntl` flags). Both halves of the transport compile this crate (nvptx64 and x86_64),
//! so a layout can never drift between them; `const` asserts pin each size and offset.
//! std's own services are declared here too ([`std_services`]), by that convention, so
//! that both halves depend on the declarations and neither on the other.
//!
//! # Memory
//!
//! The host allocates three regions before a launch and describes them to the GPU in
//! [`DeviceConfig`], which it writes into the module's global [`CONFIG_SYMBOL`]:
//!
//! * the **channel**: `num_ports` [`Port`]s and as many [`Doorbell`]s in host-pinned,
//!   device-mapped memory, and the launch's [`FaultRecord`]. Only plain loads and stores cross PCIe (no
//!   read-modify-write on host memory, which PCIe atomics would need);
//! * the **port states**: one [`PortState`] per port in device memory, holding the lock
//!   that GPU warps contend on and the port's next sequence number;
//! * the **device heap** and the **thread area** (per-thread `errno` and pthread keys)
//!   used by libc-hostcall without any hostcall.
//!
//! # Protocol (one port)
//!
//! A port is owned by one packet of lanes at a time: a GPU warp's lanes that call
//! together *and take the same path*. The lock and the sequence counter are in device
//! memory ([`PortState`]); everything the host sees is in the [`Port`]. Steps, with the
//! ordering that makes each handoff safe:
//!
//! 1. **Packet.** Each calling lane takes `activemask`, then `match.any.sync` on its
//!    *posted* flag: the packet is the lanes that agree. Posted and waiting lanes never
//!    share a packet, so every lane of a packet executes the same sequence of
//!    warp-synchronous operations with the same mask. That matters because the hardware
//!    matches warp barriers by mask value, not program location, and counts an exited
//!    lane as arrived: a lane that left early would release the others.
//! 2. **Port.** The packet's leader (its lowest lane) takes a port with one atomic OR of
//!    [`PORT_HELD`] into its [`PortState`] word (acquire at GPU scope: only GPU threads
//!    touch device memory), which also yields the port's last sequence; `shfl.sync`
//!    hands the port index and `seq = last + 1` to every lane of the packet. If the word
//!    had [`PORT_POSTED`], the leader first waits for `response == last` (system-scope
//!    acquire): the host has finished reading the posted packet. Posted requests that
//!    must keep their order (stdout, stderr) take their ticket now, while the port is
//!    held, so tickets are handed out in nearly the order the host will see them.
//! 3. **Request.** Each lane writes its [`LaneSlot`] (service, `seq` with
//!    [`SLOT_POSTED`] if posted, coordinates, arguments), its bulk bytes, and, unless
//!    posted, [`answer::PENDING`] into its answer word. In a
//!    packet of several lanes each lane then issues a system-scope fence, and all meet
//!    at `bar.warp.sync(packet)`.
//! 4. **Publish.** The leader stores the lane mask (relaxed), then the port's doorbell
//!    `request = seq` with a **system-scope release**. A posted leader then releases the port, storing `seq`
//!    and [`PORT_POSTED`] into its word (GPU-scope release); posted lanes return here.
//! 5. **Serve.** A host consumer sees the doorbell differ from the last sequence it
//!    answered on that port (acquire load), reads the mask, and for each lane of it copies the slot out once, checks that the slot's
//!    `seq` is `request` (else answers `Malformed`), runs the service, writes the bulk
//!    bytes and any non-inline result into the slot, and then the lane's answer word with
//!    **release** (an atomic release store: on x86-64 a plain store, which the
//!    processor keeps in order and the compiler may not move above the writes before it). After the
//!    last lane it stores `response = request` (release). A lane whose call may block,
//!    or waits for an fd, is handed off, its request copied into host memory, to a pool
//!    thread or to the host's reactor, which answer it later; the packet then holds the
//!    port, its consumer does not serve the port again, and whoever writes the packet's
//!    last answer stores `response`, after it. Stored before (when the lane was handed
//!    off), a posted packet's next owner would reuse the slots while a late answer was
//!    still to be written into them. A posted lane ([`SLOT_POSTED`]) handed off holds
//!    nothing: nobody waits for its answer, which is dropped. A stop answers every lane
//!    handed off; a consumer that hands one off after a stop answers it itself
//!    (`hostcall-model`'s holding host checks all of this, stops included).
//! 6. **Answer.** Each waiting lane polls its own answer word until it is no longer
//!    pending. An inline answer is the word itself, read by one single-copy-atomic load,
//!    so the polls are relaxed; a lane whose result or bulk bytes are in its slot issues
//!    a **system-scope acquire** fence after the word and before reading them. The word carries `seq` (its low [`answer::SEQ_BITS`]
//!    bits): a word answered for any other sequence is a protocol violation, reported and
//!    fatal, never accepted. Because the word is written last and read first, the slot's
//!    results and bulk bytes read after it are the host's answer to *this* request:
//!    stale data cannot be read, rather than being detected.
//! 7. **Release.** The lanes meet at `bar.warp.sync(packet)` once each has read its
//!    answer and bulk bytes; the leader releases the port, storing `seq` into its word
//!    (release store, GPU scope). The host never
//!    touches a packet's slots after writing its last answer word, so the next owner may
//!    reuse them at once.
//! 8. **Parked calls.** A lane whose call waits long on the host is answered with a
//!    ticket instead ([`park`]), releases the port with its packet, waits for its wake
//!    word, and collects its answer with a second call. So a waiting call holds no
//!    port: any number of GPU threads may wait on their peers at once.
//!
//! **Scope.** Every ordering above that involves the host is at system scope, and the
//! GPU side states it in its own PTX (`hostcall_client::Platform`'s `fence_system`,
//! `load_acquire_system`, `store_release_system`); relaxed polls of host memory keep
//! the compiler's default, system scope. A binary's other atomics order only GPU
//! threads and are built at GPU scope (ptx-builder's `scope`), which on an H100 costs
//! 300 to 540 ns less per release, fence or read-modify-write.
//!
//! A lane gives up only when a wait exceeds [`DeviceConfig::wait_limit_ns`], or when its
//! answer word carries another sequence: it writes the launch's [`FaultRecord`] (port,
//! sequence, its coordinates) and traps, and the host reports that record. Once the
//! host's timeout fires it answers every packet it finds, every lane it has handed off
//! and every parked call with [`Status::Killed`] (and the tagged sequence, as usual): a
//! lane that reads it records [`FaultKind::Killed`] and traps, so a kernel that keeps
//! calling the host, or waits in it, ends within a round trip.
//!
//! What the host reads from a port is GPU-writable and untrusted: it copies a lane's
//! slot, and exactly the input bytes its service declares (`args[0]` for a declared
//! service, [`Service::input_len_arg`] for the transport's own), into its own memory once,
//! checks them there and serves the copy; it writes output bytes back with one copy
//! after the service ran.
//!
//! Posted writes carry a ticket from [`LaunchState::stdio_tickets`]; the host writes them
//! in ticket order, and serves every port once more after the launch ends so none is
//! lost. The host holds a bounded amount of output that waits for earlier tickets (or
//! for the host's own stdout to take it), so only writes of one piece are posted, and
//! one the host has no room for stays on its port, unserved, until it has: the port
//! waits, nothing is lost. The host marks such a port ([`PortHeader::held`], after it
//! looked at the packet; `Release`), and a GPU thread that takes the port's lock word
//! and finds its last packet held back (read after `response`, which it found short of
//! that packet) puts the word back and takes another port: a reader of the host's
//! stdout that stalls holds up only the threads that print. A posted write that meets
//! a held-back port is sent as a waiting one instead (below), which the host, having no
//! room for it, parks at once: printers do not go on to fill every port, nor retry on
//! any. A thread that finds every other port held or held back takes a continuation
//! port. No thread gives up its wait for a port while one is held back, nor while the
//! ports' sequences move (the host is alive, and a stalled stdout blocks as long as
//! Linux's `write(2)` would). Larger writes are not posted: their pieces wait for the
//! host, which answers `EAGAIN` ([`POSTED_WAITS`]) to one it cannot hold yet, and the
//! writer sends it again. A request whose ticket an earlier request took (a write's
//! later pieces, a piece sent again) takes one of the last [`continuation_ports`],
//! which the host never holds back: the piece whose turn it is always finds a port and
//! is always taken, so nothing is dropped and nothing deadlocks (`hostcall-model`'s
//! ticket model checks this, and finds the deadlock without those ports). A result is
//! any `i64`: completion is the answer word's `done` bit, never a sentinel value. When
//! every port is locked the caller backs off and retries:
//! back-pressure, no loss.
//!
//! The `hostcall-model` crate checks these steps exhaustively against the GPU's warp
//! semantics (any `activemask` subset, mask-matched barriers, exits as arrivals).
//!
//! # Errors
//!
//! Results follow the Linux system call convention: `-errno` on failure, with errno
//! numbers of x86_64 Linux ([`errno`]), which libc-hostcall stores in `errno` unchanged.
//! Transport-level failures (unknown service, malformed request, a stop) are reported
//! separately, in the answer word's status ([`answer::Answer::status`]), so the client
//! always knows which it got. What it hands on is its own choice: a typed call that
//! cannot fail ends its launch; libc's calls (`hostcall_client::fd_io`) turn them into
//! `ENOSYS`, `EINVAL` and `EIO`, the errnos C code would expect of such failures.

#![no_std]

pub mod answer;
pub mod dirent;
pub mod errno;
pub mod fcntl;
pub mod layout;
pub mod net;
pub mod park;
pub mod service;
pub mod spawn;
pub mod stat;
pub mod std_services;
pub mod stream;
pub mod typed;
pub mod unwind;

pub use fcntl::{AT_FDCWD, AT_REMOVEDIR};
pub use layout::{
    BULK_PER_LANE, CACHED_CLASSES, CONFIG_SYMBOL, DeviceConfig, Doorbell, FLAG_SINGLE_LANE,
    FaultKind, FaultRecord, HEAP_MAX_BYTES, HEAP_RESERVED, LaneSlot, LaunchState, MAX_KEYS,
    PORT_BULK, PORT_HELD, PORT_HELD_BACK, PORT_POSTED, PORT_SEQ_SHIFT, Port, PortHeader, PortState,
    SLOT_POSTED, START_KERNEL, THREAD_EXIT_KERNEL, ThreadArea, VERSION_SYMBOL, WARP_SIZE,
    continuation_ports,
};
pub use service::{
    DEVICE_READ_MAX, DEVICE_WRITE_MAX, NAME_MAX, PATH_MAX, POSTED_WAITS, STARTUP_ARGS, STARTUP_ENV,
    STD_BASE, Service, Status,
};
pub use spawn::{FRAME_POP, FRAME_PUSH, FRAME_STACK_BYTES};
pub use unwind::{UNWIND_RESUME, UNWIND_TAKE, UNWINDERS, UNWINDING};

/// The version both halves must agree on; bump it on any change to this crate's layouts
/// or to the transport's own services' ids and argument conventions ([`Service`]).
/// Declared services (std's included) need no bump: each carries a fingerprint of its
/// signature, which the host checks when it loads a module. The host refuses a module
/// built with another version.
pub const ABI_VERSION: u32 = 15;
