//! An exhaustive model check of the hostcall port protocol (the one documented in
//! `hostcall_abi`), under the warp semantics an NVIDIA GPU really has.
//!
//! The GPU half of the transport is a few dozen lines, but it runs on lanes that the
//! hardware schedules independently, that group by `activemask` in ways the program does
//! not control, and whose warp barriers are matched by mask value rather than by program
//! location. Tests on a GPU see such races once in millions of calls; this crate
//! enumerates every interleaving of a small configuration instead.
//!
//! # What is modelled
//!
//! * Lanes of a **main warp** and of a **foreign warp** whose lane ids collide with it,
//!   each running a short script of calls; each call is posted or not, chosen per lane
//!   and per call (every choice is explored).
//! * **`activemask`** returns any non-empty subset of the lanes of the warp that are
//!   currently at the entry of a call ([`Op::ActiveMask`]); the lanes of that subset
//!   receive it together.
//! * **Warp-synchronous operations** (`shfl.sync`, `bar.warp.sync`, `match.any.sync`)
//!   block a lane until every lane of the mask is waiting at an operation of the same
//!   kind with the same mask, *wherever it is in the program*, or has exited: an exited
//!   lane counts as arrived.
//! * **Ports** ([`Config::ports`]; a leader takes any free one): the lock and sequence
//!   counter in device memory, the header's `request`/`response`/lane mask, one request
//!   slot and one answer word per lane id.
//!   Every step is atomic and memory is sequentially consistent: the model checks the
//!   protocol's structure (who may touch what, when), while the acquire/release pairs
//!   that make each step's writes visible are stated in `hostcall_abi`'s docs.
//! * **The host** serves a published packet lane by lane, interleaved with everything
//!   else, then answers the header ([`HostModel::Atomic`]); or, as the runtime's server
//!   did at 600ca0b ([`HostModel::Pooled`]), a consumer goes by its own record of
//!   the sequence it last took, serves posted packets itself and hands waiting ones to a
//!   pool job whose answers and `response` store are steps of their own; or, as the
//!   runtime's server does now ([`HostModel::Holding`]), the consumer serves each lane
//!   itself or hands it off as a job of its own (a call that may block:
//!   [`Config::blocking`], which may wait for another call, or for ever), the port stays
//!   the packet's until its waiting lanes have answers, a handed-off lane may be
//!   **parked** (answered a ticket; it frees the port and collects its answer later,
//!   alone), a **stop** may come at any step and must reach every call, and the **end**
//!   of the run serves what is left. Each knob of [`Holding`] is a way the server was;
//!   [`Holding::today`] is how it is.
//!
//! # Invariants ([`Violation`])
//!
//! * each lane receives the answer to its own request;
//! * the host serves only slots written for the packet it was handed;
//! * a port is released only once every lane of its packet has finished with its slot
//!   and bulk buffer;
//! * every request is served exactly once, and the run ends with nothing outstanding
//!   (no parked call's ticket left uncollected), unless a stop ended it: a lane that
//!   reads `Killed` traps, which ends the launch;
//! * no deadlock: some step is always possible until every lane has exited, and a run
//!   that only a stop could end is a deadlock unless a call in it never ends by itself.
//!
//! Two protocols are encoded, as sequences of [`Op`]s per lane: [`Protocol::V1`], the
//! protocol as it landed first (packets of the raw `activemask`, posted and waiting
//! lanes mixed, the leader polls the header and lanes re-check their slot), and
//! [`Protocol::V2`], the current one (packets split by `match.any.sync` on the posted
//! flag, per-lane answer words tagged with the sequence). [`check`] explores one
//! [`Config`] and reports the shortest trace to each kind of violation.
//!
//! A second model, [`check_tickets`], takes the host's side of posted output: writers
//! reserving tickets for their pieces, ports served in any order, the host writing
//! pieces in ticket order within a budget ([`TicketHost`]).
//!
//! A third, [`check_streams`], takes the tagged streams' protocol:
//! writers reserving records in a ring in host memory, their stores reaching it in any
//! order a fence allows, and the host taking complete records in order.
//!
//! A fourth, [`check_spawn`], takes the hand-off of threads to GPU threads held back at
//! launch (`std::thread` on the GPU): creators, parked workers, join and detach, a
//! worker that retires after a thread that panicked, a creator that cannot ready a
//! worker, and the program's end: announced, every thread that waits leaves and counts
//! itself gone, and the ending thread waits for the count or traps.
//!
//! A fifth, [`check_resources`], takes the host's bounded resources as the server has
//! them (ports taken as the client takes them, consumers, base workers and their queue,
//! waiters, parking, stdout's writer and a reader that may stall, the end of the run)
//! and checks that nothing that can wait without bound holds one that a call needing
//! only the host waits for; each field of [`Rules`] is a way the host was at c839d74 or
//! is today.

mod call;
mod explore;
mod holding;
mod model;
mod resources;
mod spawn;
mod streams;
mod tickets;
mod violation;

pub use explore::{Report, Trace};
pub use model::{
    Blocks, CallKind, Config, Holding, HostModel, LaneRef, Op, Protocol, Stop, Token, check,
};
pub use resources::{Call, ResourceConfig, Rules, Search, check_resources};
pub use spawn::{SpawnConfig, Then, check_spawn};
pub use streams::{HeaderCheck, StreamConfig, WhenFull, check_streams};
pub use tickets::{TicketConfig, TicketHost, check_tickets};
pub use violation::{Holder, Violation};
