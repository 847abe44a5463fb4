//! Port acquisition, publication and completion: steps 1–6 of the protocol documented
//! in `hostcall_abi`.

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use hostcall_abi::{
    BULK_PER_LANE, DeviceConfig, FLAG_SINGLE_LANE, LaneSlot, PORT_BULK, PORT_FREE,
    PORT_FREE_POSTED, PORT_HELD, Port, PortState, Status,
};

use crate::Platform;
use crate::copy::{copy_from_bulk, copy_to_bulk};

/// Longest sleep between polls of a busy lock or an unanswered port, in nanoseconds.
const MAX_BACKOFF_NS: u32 = 2048;

/// Polls of `response` before the leader starts sleeping between polls.
const EAGER_POLLS: u32 = 16;

/// `LaneSlot::status` while a request waits for the host (the host always overwrites
/// it with a `Status`).
const PENDING: u32 = u32::MAX;

/// The GPU's view of the channel the host prepared (see `hostcall_abi::DeviceConfig`).
#[derive(Clone, Copy, Debug)]
pub struct Channel {
    ports: *mut Port,
    states: *const PortState,
    num_ports: u32,
    single_lane: bool,
}

// SAFETY: a Channel is two addresses and a count; all shared state it reaches is accessed
// through atomics or under a port lock, per the protocol.
unsafe impl Send for Channel {}
// SAFETY: as for Send.
unsafe impl Sync for Channel {}

/// What the host answered for the calling lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// Whether the service ran.
    pub status: Status,
    /// The slot's arguments as the host left them: `args[0]` is the result.
    pub args: [u64; 6],
}

impl Reply {
    /// The service's result as a signed value (`-errno` on failure).
    pub fn result(&self) -> i64 {
        self.args[0] as i64
    }
}

impl Channel {
    /// A channel over the memory `config` describes.
    ///
    /// # Safety
    /// `config.ports` must address `config.num_ports` [`Port`]s readable and writable by
    /// this thread and served by a host following the protocol; `config.port_states` must
    /// address as many [`PortState`]s shared by every caller of this channel. Both must
    /// stay valid for as long as the channel is used.
    pub unsafe fn new(config: &DeviceConfig) -> Channel {
        Channel {
            ports: config.ports as *mut Port,
            states: config.port_states as *const PortState,
            num_ports: config.num_ports,
            single_lane: config.flags & FLAG_SINGLE_LANE != 0,
        }
    }

    /// One round trip for this lane: `send` goes to the host in the lane's bulk buffer,
    /// the reply's bulk bytes (as many as the host reports in `args[5]`) are copied into
    /// `recv`. Lanes of the warp that call at the same time share a port and one
    /// publication. Blocks while every port is busy.
    ///
    /// The bulk buffer holds [`BULK_PER_LANE`] bytes in a shared packet and [`PORT_BULK`]
    /// for a lone lane; `send` and `recv` are cut to it, and `args[len_arg]`, if given, is
    /// set to the bytes that travel (`send`'s if any, else `recv`'s). [`crate::calls`]
    /// loops over what did not fit.
    pub fn call<P: Platform>(
        &self,
        service: u32,
        args: [u64; 6],
        send: &[u8],
        recv: &mut [u8],
        len_arg: Option<usize>,
    ) -> Reply {
        self.exchange::<P>(service, args, send, recv, len_arg, false)
    }

    /// Publishes a request without waiting for its answer (a *posted* request: the host
    /// serves it later; the next owner of the port waits until it has). `send` is cut to
    /// the bulk buffer as in [`Channel::call`]; returns the bytes that went.
    pub fn post<P: Platform>(
        &self,
        service: u32,
        args: [u64; 6],
        send: &[u8],
        len_arg: Option<usize>,
    ) -> usize {
        self.exchange::<P>(service, args, send, &mut [], len_arg, true)
            .args[0] as usize
    }

    /// `call` (`posted` false) or `post` (true): protocol steps 1–6, or 1–3 when posted.
    fn exchange<P: Platform>(
        &self,
        service: u32,
        mut args: [u64; 6],
        send: &[u8],
        recv: &mut [u8],
        len_arg: Option<usize>,
        posted: bool,
    ) -> Reply {
        let lane = P::lane_id();
        let mask = if self.single_lane {
            1 << lane
        } else {
            P::active_mask()
        };
        let leader = mask.trailing_zeros();
        let is_leader = lane == leader;

        let mine = if is_leader { self.acquire::<P>() } else { 0 };
        let index = P::broadcast(mask, mine, leader);
        // SAFETY: `index < num_ports` (acquire's result); the port stays valid (`new`).
        // Lanes touch only their own slot and bulk buffer through raw pointers, and the
        // header only through atomics, so no reference aliases another lane's access.
        let port = unsafe { self.ports.add(index as usize) };
        // SAFETY: as above, for the device-side state of the same port.
        let state = unsafe { &*self.states.add(index as usize) };
        // SAFETY: `port` is valid; the header is only ever accessed through atomics.
        let header = unsafe { &(*port).header };
        let shared = mask.count_ones() > 1;
        // SAFETY: `lane < WARP_SIZE`, in bounds of the port's arrays; this lane is the only
        // GPU-side user of its slot and bulk buffer (the whole area when alone) while the
        // warp holds the lock, and the host reads them only between `request` and
        // `response` (protocol steps 3–4).
        let (slot, bulk, capacity) = unsafe {
            let slot = (&raw mut (*port).lanes)
                .cast::<LaneSlot>()
                .add(lane as usize);
            let area = (&raw mut (*port).bulk).cast::<u8>();
            if shared {
                (slot, area.add(lane as usize * BULK_PER_LANE), BULK_PER_LANE)
            } else {
                (slot, area, PORT_BULK)
            }
        };

        let (block, thread) = P::caller();
        let send = &send[..send.len().min(capacity)];
        let recv_len = recv.len().min(capacity);
        if let Some(i) = len_arg {
            args[i] = if send.is_empty() {
                recv_len
            } else {
                send.len()
            } as u64;
        }
        // SAFETY: see `slot` and `bulk` above.
        unsafe {
            slot.write(LaneSlot {
                service,
                status: PENDING,
                block,
                thread,
                args,
            });
            copy_to_bulk(bulk, send);
        }
        // When lanes share the packet, each makes its own writes visible at system scope
        // before the barrier rather than relying on the leader's release being cumulative
        // over the barrier. A lone lane is the leader: its release store below orders its
        // own writes.
        if shared {
            P::fence_system();
        }
        P::sync_warp(mask);

        if posted {
            if is_leader {
                let seq = state.seq.load(Relaxed).wrapping_add(1);
                state.seq.store(seq, Relaxed);
                header.lane_mask.store(mask, Relaxed);
                header.request.store(seq, Release);
                state.lock.store(PORT_FREE_POSTED, Release);
            }
            return Reply {
                status: Status::Ok,
                args: [send.len() as u64, 0, 0, 0, 0, 0],
            };
        }
        if is_leader {
            let seq = state.seq.load(Relaxed).wrapping_add(1);
            state.seq.store(seq, Relaxed);
            header.lane_mask.store(mask, Relaxed);
            header.request.store(seq, Release);
            // Each poll is a read across PCIe (about a microsecond): poll back to back
            // first, then back off so a slow service does not flood the bus.
            let mut polls = 0u32;
            let mut backoff = 32;
            while header.response.load(Acquire) != seq {
                polls += 1;
                if polls > EAGER_POLLS {
                    P::nanosleep(backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF_NS);
                }
            }
        }
        P::sync_warp(mask);
        // The other lanes' acquire side (the leader's is its acquire load): their reads
        // below must not be served from a cache line filled before the host's answer;
        // they are volatile (strong) loads too.
        if shared {
            P::fence_system();
        }

        // The host answered (the leader saw `response == seq`, and the warp barrier passed
        // that on), so the slot and bulk buffer are this lane's again. Each lane still
        // checks that its own slot holds an answer to its own request before trusting it:
        // a stress run on an H100 once saw a lane read its slot after another warp had
        // reused the port. Waiting here turns any such case into a stall the host's
        // timeout reports, never a wrong result.
        let mut backoff = 32;
        let slot = loop {
            // SAFETY: see above; volatile so every poll reads host memory.
            let s = unsafe { slot.read_volatile() };
            if s.status != PENDING && s.block == block && s.thread == thread {
                break s;
            }
            P::nanosleep(backoff);
            backoff = (backoff * 2).min(MAX_BACKOFF_NS);
        };
        let take = recv_len.min(slot.args[5] as usize);
        // SAFETY: as above; `take <= capacity`.
        unsafe { copy_from_bulk(&mut recv[..take], bulk) };
        P::sync_warp(mask);
        if is_leader {
            state.lock.store(PORT_FREE, Release);
        }
        Reply {
            status: Status::from_code(slot.status),
            args: slot.args,
        }
    }

    /// Takes a free port's lock, starting at a place spread by the caller's coordinates
    /// so that warps do not all contend for port 0. Backs off while all are held. A port
    /// whose last request was posted is used only once the host has answered it.
    fn acquire<P: Platform>(&self) -> u32 {
        let (block, thread) = P::caller();
        let n = self.num_ports;
        let start = block.wrapping_mul(0x9E37_79B1).wrapping_add(thread / 32) % n;
        let mut backoff = 64;
        loop {
            for i in 0..n {
                let p = (start + i) % n;
                // SAFETY: `p < num_ports`, the length of the state array (`new`'s contract).
                let state = unsafe { &*self.states.add(p as usize) };
                let was = state.lock.load(Relaxed);
                if was == PORT_HELD
                    || state
                        .lock
                        .compare_exchange(was, PORT_HELD, Acquire, Relaxed)
                        .is_err()
                {
                    continue;
                }
                if was == PORT_FREE_POSTED {
                    // SAFETY: `p < num_ports` (`new`'s contract); the header is atomics only.
                    let header = unsafe { &(*self.ports.add(p as usize)).header };
                    let seq = state.seq.load(Relaxed);
                    let mut wait = 32;
                    while header.response.load(Acquire) != seq {
                        P::nanosleep(wait);
                        wait = (wait * 2).min(MAX_BACKOFF_NS);
                    }
                }
                return p;
            }
            P::nanosleep(backoff);
            backoff = (backoff * 2).min(MAX_BACKOFF_NS);
        }
    }
}
