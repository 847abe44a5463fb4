//! Packets, ports, publication and answers: steps 1–7 of the protocol documented in
//! `hostcall_abi` (and checked by `hostcall-model`).

use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::{Acquire, Relaxed};

use hostcall_abi::answer::{self, Answer};
use hostcall_abi::park::{PARKED, PARKED_POLL_MAX_NS, Ticket};
use hostcall_abi::{
    BULK_PER_LANE, DeviceConfig, Doorbell, FLAG_SINGLE_LANE, FaultKind, FaultRecord, LaneSlot,
    LaunchState, PORT_BULK, PORT_POSTED, PORT_SEQ_SHIFT, Port, PortState, SLOT_POSTED, Service,
    Status,
};

mod search;

use crate::Platform;
use crate::copy::{copy_from_bulk, copy_to_bulk};
use crate::stages::{Marks, Stage, StageClock};

/// The port [`Channel::acquire`]'s leader broadcasts for a request it leaves unsent.
const UNSENT: u32 = u32::MAX;

/// Longest sleep between polls of a busy lock or an unanswered port, in nanoseconds.
const MAX_BACKOFF_NS: u32 = 2048;

/// Clock cycles a lane spins before its first poll: about 0.3 µs at the H100's 1.7 GHz,
/// so that the first poll reaches host memory after the host can have answered.
const FIRST_POLL_CYCLES: u32 = 512;
/// Polls of an answer word before the lane starts sleeping between polls.
const EAGER_POLLS: u32 = 4;

/// The GPU's view of the channel the host prepared (see `hostcall_abi::DeviceConfig`).
#[derive(Clone, Copy, Debug)]
pub struct Channel {
    ports: *mut Port,
    doorbells: *const Doorbell,
    states: *const PortState,
    num_ports: u32,
    single_lane: bool,
    wait_limit_ns: u64,
    launch: *const LaunchState,
    fault: *mut FaultRecord,
    wake: *const AtomicU64,
    wake_words: u32,
}

// SAFETY: a Channel is addresses and counts; all shared state it reaches is accessed
// through atomics or under a port lock, per the protocol.
unsafe impl Send for Channel {}
// SAFETY: as for Send.
unsafe impl Sync for Channel {}

/// What the host answered for the calling lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// Whether the service ran.
    pub status: Status,
    /// The service's result (`-errno` on failure); for a posted request, the bytes sent
    /// (`-EAGAIN`: none, [`Request::unsent_if_held`]).
    pub result: i64,
    /// The first number a [`Numbering`] request took, else 0.
    pub number: u64,
    /// The slot's `args[1..5]` as the host left them with a result that is not inline
    /// (where typed calls' values of up to 32 bytes travel), else zeros.
    pub words: [u64; 4],
    /// Whether the answer came in the answer word alone (no slot or bulk bytes read).
    pub inline: bool,
}

/// Numbers a request from `counter` at publication, while its packet holds the port:
/// `count` numbers are taken and the first goes into `args[arg]`. Posted writes to one
/// stream are numbered so (the host puts them back in that order): numbers taken before
/// waiting for a port would let a warp that waits long hold back everyone else's.
#[derive(Clone, Copy, Debug)]
pub struct Numbering<'a> {
    /// The shared counter.
    pub counter: &'a AtomicU64,
    /// The argument that receives the first number.
    pub arg: usize,
    /// Numbers to take (one per piece of a write cut into several requests).
    pub count: u64,
}

/// One lane's request to [`Channel::exchange`].
#[derive(Debug)]
pub struct Request<'a> {
    /// The service id.
    pub service: u32,
    /// The arguments (`hostcall_abi::service` gives each service's convention).
    pub args: [u64; 6],
    /// Bytes for the host, cut to the lane's bulk buffer.
    pub send: &'a [u8],
    /// Further parts for the host, each placed after the previous one at the next
    /// multiple of 8 bytes (typed calls' slices); the caller keeps the whole within the
    /// bulk buffer.
    pub send_more: &'a [&'a [u8]],
    /// Room for the bytes the host sends back, cut to the lane's bulk buffer.
    pub recv: &'a mut [u8],
    /// `args[i]` is set to the bytes that travel (`send`'s if any, else `recv`'s).
    pub len_arg: Option<usize>,
    /// Whether the caller waits for the answer (posted: it does not).
    pub posted: bool,
    /// Number the request at publication.
    pub numbering: Option<Numbering<'a>>,
    /// The request carries a ticket an earlier request took (a write's later pieces,
    /// a piece sent again): it goes on a continuation port
    /// (`hostcall_abi::continuation_ports`), which the host never holds back.
    pub continues: bool,
    /// A posted request that comes back unsent (result `-EAGAIN`, nothing numbered) if
    /// it meets a port whose posted packet the host holds back for lack of room for its
    /// output (`hostcall_abi::PortHeader::held`): its caller then sends it as a request
    /// that waits, so that posted output stops piling onto ports while the host's
    /// stdout is stalled. Posted writes to stdout and stderr are.
    pub unsent_if_held: bool,
}

impl Request<'_> {
    /// A request of `service` with `args` and nothing else: no bytes either way, waited
    /// for, unnumbered (the others are set over it: `Request { posted: true,
    /// ..Request::bare(..) }`).
    pub fn bare(service: u32, args: [u64; 6]) -> Self {
        Request {
            service,
            args,
            send: &[],
            send_more: &[],
            recv: &mut [],
            len_arg: None,
            posted: false,
            numbering: None,
            continues: false,
            unsent_if_held: false,
        }
    }

    /// A ping of `value`: the host echoes it (a transport round trip and nothing else).
    pub fn ping(value: u64) -> Self {
        Request::bare(Service::Ping as u32, [value, 0, 0, 0, 0, 0])
    }
}

/// A wait that may have to be given up: counts polls, sleeps with a doubling delay
/// after the eager ones, and reads the clock only once it sleeps.
struct Wait {
    polls: u32,
    backoff: u32,
    since: u64,
}

impl Wait {
    fn new(backoff: u32) -> Wait {
        Wait {
            polls: 0,
            backoff,
            since: 0,
        }
    }

    /// Waits a little; returns the nanoseconds waited so far once over `limit` (0: none).
    fn pause<P: Platform>(&mut self, eager: u32, limit: u64) -> Option<u64> {
        self.polls += 1;
        if self.polls <= eager {
            return None;
        }
        let now = P::now_ns();
        if self.since == 0 {
            self.since = now;
        }
        let waited = now.wrapping_sub(self.since);
        if limit != 0 && waited > limit {
            return Some(waited);
        }
        P::nanosleep(self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF_NS);
        None
    }
}

impl Channel {
    /// A channel over the memory `config` describes.
    ///
    /// # Safety
    /// `config.ports` must address `config.num_ports` [`Port`]s readable and writable by
    /// this thread and served by a host following the protocol, `config.doorbells` as
    /// many [`Doorbell`]s; `config.port_states` must
    /// address as many [`PortState`]s shared by every caller of this channel;
    /// `config.launch_state` a [`LaunchState`] and `config.fault` a [`FaultRecord`] (or be
    /// 0), and `config.wake` `config.wake_words` 64-bit words the host writes. All must
    /// stay valid for as long as the channel is used.
    pub unsafe fn new(config: &DeviceConfig) -> Channel {
        Channel {
            ports: config.ports as *mut Port,
            doorbells: config.doorbells as *const Doorbell,
            states: config.port_states as *const PortState,
            num_ports: config.num_ports,
            single_lane: config.flags & FLAG_SINGLE_LANE != 0,
            wait_limit_ns: config.wait_limit_ns,
            launch: config.launch_state as *const LaunchState,
            fault: config.fault as *mut FaultRecord,
            wake: config.wake as *const AtomicU64,
            wake_words: config.wake_words,
        }
    }

    /// Echoes `value`: the null call, a transport round trip and nothing else.
    pub fn ping<P: Platform>(&self, value: u64) -> u64 {
        self.exchange::<P>(Request::ping(value)).result as u64
    }

    /// One round trip for this lane: `send` goes to the host in the lane's bulk buffer,
    /// the reply's bulk bytes (as many as the host wrote back) are copied into `recv`.
    /// Lanes of the warp that call at the same time share a port and one publication.
    /// Blocks while every port is busy.
    ///
    /// The bulk buffer holds [`BULK_PER_LANE`] bytes in a shared packet and [`PORT_BULK`]
    /// for a lone lane; `send` and `recv` are cut to it, and `args[len_arg]`, if given, is
    /// set to the bytes that travel (`send`'s if any, else `recv`'s).
    pub fn call<P: Platform>(
        &self,
        service: u32,
        args: [u64; 6],
        send: &[u8],
        recv: &mut [u8],
        len_arg: Option<usize>,
    ) -> Reply {
        self.exchange::<P>(Request {
            send,
            recv,
            len_arg,
            ..Request::bare(service, args)
        })
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
        self.exchange::<P>(Request {
            send,
            len_arg,
            posted: true,
            ..Request::bare(service, args)
        })
        .result as usize
    }

    /// Any request: a call or a posted one, chosen per lane (lanes of one warp may pass
    /// different `posted` values at the same call site), numbered or not.
    pub fn exchange<P: Platform>(&self, request: Request<'_>) -> Reply {
        self.exchange_marked::<P, ()>(request, &mut ())
    }

    /// [`Channel::call`] without bulk data, timing each stage of the round trip.
    pub fn call_timed<P: Platform>(&self, service: u32, args: [u64; 6]) -> (Reply, StageClock) {
        let mut clock = StageClock::start::<P>();
        let r = self.exchange_marked::<P, _>(Request::bare(service, args), &mut clock);
        (r, clock)
    }

    fn exchange_marked<P: Platform, M: Marks>(&self, request: Request<'_>, marks: &mut M) -> Reply {
        let mut request = request;
        let mut number = None;
        loop {
            let (reply, parked) = self.exchange_once::<P, M>(&mut request, marks);
            let number = *number.get_or_insert(reply.number);
            let Some((ticket, port, seq)) = parked else {
                return Reply { number, ..reply };
            };
            // Step 8: the call waits on the host without its port; once answered, its
            // answer is collected by a call of its own, into the same buffer.
            self.await_wake::<P>(ticket, port, seq);
            request = Request {
                recv: core::mem::take(&mut request.recv),
                ..Request::bare(Service::Collect as u32, [ticket.encode(), 0, 0, 0, 0, 0])
            };
        }
    }

    /// One request's steps 1 to 7; the reply, and the ticket of a call the host parked
    /// (step 8 is the caller's).
    fn exchange_once<P: Platform, M: Marks>(
        &self,
        request: &mut Request<'_>,
        marks: &mut M,
    ) -> (Reply, Option<(Ticket, u32, u32)>) {
        let Request {
            service,
            mut args,
            send,
            send_more,
            ref mut recv,
            len_arg,
            posted,
            numbering,
            continues,
            unsent_if_held,
        } = *request;
        // Step 1: the packet is the lanes here now that take the same path.
        let lane = P::lane_id();
        // A collection goes alone: the parked call's bulk bytes may be a lone lane's.
        // Posted lanes go apart from waiting ones, and those that may come back unsent
        // from those that may not: the leader's request decides for the packet.
        let mask = if self.single_lane || service == Service::Collect as u32 {
            1 << lane
        } else {
            P::match_any(
                P::active_mask(),
                posted as u32 | ((posted && unsent_if_held) as u32) << 1,
            )
        };
        let leader = mask.trailing_zeros();
        let is_leader = lane == leader;
        marks.mark::<P>(Stage::Packet);

        // Step 2: the leader takes a port; every lane learns it and the sequence.
        let (mine, mine_seq) = if is_leader {
            self.acquire::<P>(continues, posted && unsent_if_held)
                .unwrap_or((UNSENT, 0))
        } else {
            (0, 0)
        };
        let index = P::broadcast(mask, mine, leader);
        let seq = P::broadcast(mask, mine_seq, leader);
        if index == UNSENT {
            let reply = Reply {
                status: Status::Ok,
                result: -(hostcall_abi::errno::EAGAIN as i64),
                number: 0,
                words: [0; 4],
                inline: true,
            };
            return (reply, None);
        }
        let number = numbering.map_or(0, |n| {
            let first = n.counter.fetch_add(n.count, Relaxed);
            args[n.arg] = first;
            first
        });
        marks.mark::<P>(Stage::Port);
        // SAFETY: `index < num_ports` (acquire's result); the port stays valid (`new`).
        // Lanes touch only their own slot, answer word and bulk buffer through raw
        // pointers, and the header only through atomics, so no reference aliases another
        // lane's access.
        let port = unsafe { self.ports.add(index as usize) };
        // SAFETY: as above, for the device-side state of the same port.
        let state = unsafe { &*self.states.add(index as usize) };
        // SAFETY: `port` is valid; the header and answer words are only ever accessed
        // through atomics.
        let (header, answer) = unsafe { (&(*port).header, &(*port).answers[lane as usize]) };
        let shared = mask.count_ones() > 1;
        // SAFETY: `lane < WARP_SIZE`, in bounds of the port's arrays; this lane is the only
        // GPU-side user of its slot and bulk buffer (the whole area when alone) while the
        // packet holds the lock, and the host reads them only between `request` and this
        // lane's answer word (protocol steps 4–6).
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

        // Step 3: the request.
        let (block, thread) = P::caller();
        let send = &send[..send.len().min(capacity)];
        let mut sent = send.len();
        for part in send_more {
            let at = sent.next_multiple_of(8);
            let n = part.len().min(capacity.saturating_sub(at));
            // SAFETY: `at + n <= capacity`, inside the lane's bulk buffer; `at` is a
            // multiple of 8, as `copy_to_bulk` needs.
            unsafe { copy_to_bulk(bulk.add(at), &part[..n]) };
            sent = at + n;
        }
        let recv_len = recv.len().min(capacity);
        if let Some(i) = len_arg {
            args[i] = if sent == 0 { recv_len } else { sent } as u64;
        }
        // SAFETY: see `slot` and `bulk` above.
        unsafe {
            slot.write(LaneSlot {
                service,
                seq: if posted { seq | SLOT_POSTED } else { seq },
                block,
                thread,
                args,
            });
            copy_to_bulk(bulk, send);
        }
        if !posted {
            answer.store(answer::PENDING, Relaxed);
        }
        // When lanes share the packet, each makes its own writes visible at system scope
        // before the barrier rather than relying on the leader's release being cumulative
        // over the barrier. A lone lane is the leader: its release below orders its writes.
        if shared {
            P::fence_system();
        }
        P::sync_warp(mask);
        marks.mark::<P>(Stage::Request);

        // Step 4: publication.
        if is_leader {
            header.lane_mask.store(mask, Relaxed);
            // SAFETY: `index < num_ports`, the length of the doorbell array (`new`).
            P::store_release_system(unsafe { &*self.doorbells.add(index as usize) }, seq);
            if posted {
                P::lock_store(&state.word, seq << PORT_SEQ_SHIFT | PORT_POSTED);
            }
        }
        marks.mark::<P>(Stage::Published);
        if posted {
            let reply = Reply {
                status: Status::Ok,
                result: sent as i64,
                number,
                words: [0; 4],
                inline: true,
            };
            return (reply, None);
        }

        // Step 6: this lane's answer, tagged with this sequence. Polls are relaxed: an
        // inline answer is the word itself (one single-copy-atomic read); only a lane
        // that must read its slot or bulk bytes after it needs acquire, taken below.
        let word = self.await_answer::<P>(answer, index, seq);
        let got = match Answer::decode(word) {
            Some(a) if a.seq == answer::seq_tag(seq) && a.status != Status::Killed => a,
            Some(a) if a.seq == answer::seq_tag(seq) => {
                self.give_up::<P>(FaultKind::Killed, index, seq, 0, word)
            }
            _ => self.give_up::<P>(FaultKind::ForeignAnswer, index, seq, 0, word),
        };
        let mut parked = None;
        let (result, bulk_out, words) = match got.inline {
            Some(r) => (r, 0, [0; 4]),
            None => {
                // The acquire half of the handoff: the word was written (release) after
                // the slot's results and bulk bytes, so reads after this fence see them.
                P::fence_system();
                // SAFETY: as above; volatile so that every read goes to host memory.
                let s = unsafe { slot.read_volatile() };
                let a = s.args;
                if a[5] == PARKED {
                    parked = Some(Ticket::decode(a[0]));
                    (0, 0, [0; 4])
                } else {
                    (a[0] as i64, a[5] as usize, [a[1], a[2], a[3], a[4]])
                }
            }
        };
        let take = recv_len.min(bulk_out);
        // SAFETY: as above; `take <= capacity`.
        unsafe { copy_from_bulk(&mut recv[..take], bulk) };
        marks.mark::<P>(Stage::Answered);

        // Step 7: every lane is done with the port; the leader releases it.
        P::sync_warp(mask);
        if is_leader {
            P::lock_store(&state.word, seq << PORT_SEQ_SHIFT);
        }
        marks.mark::<P>(Stage::Released);
        let reply = Reply {
            status: got.status,
            result,
            number,
            words,
            inline: got.inline.is_some(),
        };
        (reply, parked.map(|t| (t, index, seq)))
    }

    /// Waits until the host has answered the call parked under `ticket` (it was
    /// published on `port` as `seq`): relaxed polls of its wake word, pausing longer and
    /// longer, then an acquire fence that orders the answer's collection after it. A
    /// parked wait has no limit: the call may wait for its peer as long as Linux would.
    fn await_wake<P: Platform>(&self, ticket: Ticket, port: u32, seq: u32) {
        if ticket.word >= self.wake_words {
            self.give_up::<P>(FaultKind::ForeignAnswer, port, seq, 0, ticket.encode());
        }
        // SAFETY: `ticket.word < wake_words`, inside the wake words (`new`'s contract),
        // which are only ever accessed as atomics.
        let word = unsafe { &*self.wake.add(ticket.word as usize) };
        let mut pause = 1_000;
        while word.load(Relaxed) != ticket.ready() {
            P::nanosleep(pause);
            pause = (pause * 2).min(PARKED_POLL_MAX_NS);
        }
        P::fence_system();
    }

    /// The lane's answer word once the host has written it. A poll is a PCIe round trip
    /// (about a microsecond), and polls of one word are not overlapped by the hardware
    /// (outstanding misses to one line merge), so one poll at a time: the first after
    /// [`FIRST_POLL_CYCLES`], roughly when the host can have answered, then
    /// [`EAGER_POLLS`] back to back, then with growing sleeps between them, so that
    /// warps waiting for a busy host do not fill the bus with reads.
    fn await_answer<P: Platform>(&self, word: &AtomicU64, port: u32, seq: u32) -> u64 {
        P::spin_cycles(FIRST_POLL_CYCLES);
        let mut wait = Wait::new(256);
        loop {
            let w = word.load(Relaxed);
            if w != answer::PENDING {
                return w;
            }
            if let Some(waited) = wait.pause::<P>(EAGER_POLLS, self.wait_limit_ns) {
                self.give_up::<P>(FaultKind::NoAnswer, port, seq, waited, 0);
            }
        }
    }

    /// Ends the launch because declared service `id`, which cannot fail, failed with
    /// `errno` (no handler, a malformed request, a handler's panic): the host reports the
    /// thread, the service and the errno.
    pub fn fail_service<P: Platform>(&self, id: u32, errno: i32) -> ! {
        self.give_up::<P>(FaultKind::ServiceFailed, id, 0, 0, errno as u64)
    }

    /// Records why this thread gives up on the transport (if no thread did before) where
    /// the host will find it after the launch, then ends the kernel.
    fn give_up<P: Platform>(
        &self,
        kind: FaultKind,
        port: u32,
        seq: u32,
        waited_ns: u64,
        detail: u64,
    ) -> ! {
        if !self.launch.is_null() && !self.fault.is_null() {
            // SAFETY: both are valid for the launch (`new`'s contract); the claim lets
            // exactly one thread write the record, whose fields only it touches.
            unsafe {
                let launch = &*self.launch;
                if launch
                    .fault_claim
                    .compare_exchange(0, 1, Acquire, Relaxed)
                    .is_ok()
                {
                    let f = self.fault;
                    let (block, thread) = P::caller();
                    (&raw mut (*f).kind).write_volatile(kind as u32);
                    (&raw mut (*f).port).write_volatile(port);
                    (&raw mut (*f).seq).write_volatile(seq);
                    (&raw mut (*f).block).write_volatile(block);
                    (&raw mut (*f).thread).write_volatile(thread);
                    (&raw mut (*f).waited_ns).write_volatile(waited_ns);
                    (&raw mut (*f).detail).write_volatile(detail);
                    P::store_release_system(&(*f).valid, 1);
                }
            }
        }
        P::trap()
    }
}
