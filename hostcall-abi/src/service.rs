//! The transport's own services, their ids and conventions, and the transport's status
//! codes.
//!
//! std's services are declared with `service!` (`crate::std_services`), whose
//! declarations are their conventions; `read` and `write` among them. These four keep
//! conventions of their own because each needs something of the transport that a
//! declared call does not have: stdout's and stderr's output in each thread's order
//! (a posted request nobody waits for, tickets taken when it is published, continuation
//! ports for the later pieces of a write, and a copy out of GPU memory in a ticket's
//! turn), the answer of a parked call (`Collect`, part of the transport itself), or
//! (`Ping`) nothing at all, as the null call every benchmark measures against.
//!
//! Arguments `a0..a5` are `LaneSlot::args`; "bulk" is the lane's bulk buffer. Out: `a0`
//! is the result, and `a5` the number of bulk bytes the host wrote back (0 for services
//! without bulk output):
//!
//! | service | arguments | bulk | result |
//! | --- | --- | --- | --- |
//! | `Ping` | any | – | `a0` echoed |
//! | `WritePosted` | fd (1 or 2), len, ticket, 0 or [`POSTED_WAITS`] | in: data | posted: none, nobody waits; with [`POSTED_WAITS`]: len, or `-EAGAIN` when the host holds too much output waiting for earlier tickets (send the same ticket again later) |
//! | `OrderedFromDevice` | fd (1 or 2), device address, len, ticket | – | bytes written, in ticket order with the posted writes: the host copies them out of GPU global memory by DMA (at most [`DEVICE_WRITE_MAX`]) when the ticket's turn has come, and answers `-EAGAIN` before (send it again later) |
//! | `Collect` | a parked call's ticket ([`crate::park`]) | out: the parked call's | the parked call's answer, status included: what it would have been answered on its own port |

/// The first id of std's services: they take [`crate::typed::STD_IDS`], which no user
/// service can, so that a user's id 0 is the default handler (as in AMD's hostcall API)
/// and user ids never collide with std's.
pub const STD_BASE: u32 = crate::typed::STD_IDS.start;

/// A host service of std's, by numeric id.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is documented by the table above
pub enum Service {
    Ping = STD_BASE,
    WritePosted = STD_BASE + 1,
    OrderedFromDevice = STD_BASE + 2,
    Collect = STD_BASE + 3,
}

/// `Environment.startup`'s `which`: the program's arguments (`argv`).
pub const STARTUP_ARGS: u64 = 0;

/// `Environment.startup`'s `which`: the program's environment (`environ`).
pub const STARTUP_ENV: u64 = 1;

/// `WritePosted`'s fourth argument when the caller waits for the answer: the host then
/// answers `EAGAIN` rather than refusing a piece it has no room to hold, so a large
/// write slows down instead of losing output.
pub const POSTED_WAITS: u64 = 1;

/// Most bytes one `Fs.write_from_device` or `OrderedFromDevice` call moves; the client
/// loops over larger writes.
pub const DEVICE_WRITE_MAX: u64 = 64 << 20;

/// Most bytes one `Fs.read_to_device` call reads (a larger read is short, as POSIX allows):
/// the host holds them while it copies, so this bounds its memory per call.
pub const DEVICE_READ_MAX: u64 = 4 << 20;

/// Bytes in a path, its terminating NUL included, as on Linux: the host answers
/// `ENAMETOOLONG` for a longer one.
pub const PATH_MAX: usize = 4096;

/// Bytes in one component of a path, as on Linux.
pub const NAME_MAX: usize = 255;

impl Service {
    /// Every service, in id order.
    pub const ALL: [Service; 4] = [
        Service::Ping,
        Service::WritePosted,
        Service::OrderedFromDevice,
        Service::Collect,
    ];

    /// Every service's id, in id order (for `const` checks that no declared service
    /// takes one).
    pub const IDS: [u32; 4] = {
        let mut ids = [0; 4];
        let mut i = 0;
        while i < ids.len() {
            ids[i] = Service::ALL[i] as u32;
            i += 1;
        }
        ids
    };

    /// The service with this id, if any.
    pub fn from_id(id: u32) -> Option<Service> {
        Service::ALL
            .get(id.checked_sub(STD_BASE)? as usize)
            .copied()
    }

    /// Its index among std's services (its id less [`STD_BASE`]).
    pub const fn index(self) -> usize {
        (self as u32 - STD_BASE) as usize
    }

    /// The argument holding the length of the bytes the lane sends in its bulk buffer,
    /// for services that send any (the table above). The host copies exactly those
    /// bytes out of the port before the service runs.
    pub const fn input_len_arg(self) -> Option<usize> {
        match self {
            Service::WritePosted => Some(1),
            _ => None,
        }
    }

    /// A short lowercase name for traces.
    pub fn name(self) -> &'static str {
        match self {
            Service::Ping => "ping",
            Service::WritePosted => "write_posted",
            Service::OrderedFromDevice => "ordered_from_device",
            Service::Collect => "collect",
        }
    }
}

/// Whether the host ran the service: the transport's own verdict, kept apart from the
/// service's result so the client knows whether a result came back at all. The client
/// turns an unknown service into `ENOSYS` and a malformed request into `EINVAL` (what a
/// kernel answers for a call it lacks or arguments it refuses); a stop traps.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The service ran; `args[0]` holds its result.
    Ok = 0,
    /// No service has this id on the host (`args[0]` = `-ENOSYS`).
    UnknownService = 1,
    /// The request broke the service's argument rules, e.g. a length over the lane's
    /// bulk buffer (`args[0]` = `-EINVAL`).
    Malformed = 2,
    /// The host has stopped the launch (its timeout fired): the lane records
    /// [`crate::FaultKind::Killed`] and traps instead of returning.
    Killed = 3,
}

impl Status {
    /// The status with this code; unknown codes read as `Malformed`.
    pub const fn from_code(code: u32) -> Status {
        match code {
            0 => Status::Ok,
            1 => Status::UnknownService,
            3 => Status::Killed,
            _ => Status::Malformed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for (i, s) in Service::ALL.iter().enumerate() {
            assert_eq!(*s as u32, STD_BASE + i as u32);
            assert_eq!(s.index(), i);
            assert_eq!(Service::from_id(STD_BASE + i as u32), Some(*s));
        }
        assert_eq!(Service::from_id(STD_BASE + Service::ALL.len() as u32), None);
        assert_eq!(Service::from_id(0), None, "id 0 is the default handler's");
        assert!(crate::typed::STD_IDS.contains(&(Service::WritePosted as u32)));
    }

    #[test]
    fn input_lengths_follow_the_table() {
        assert_eq!(Service::WritePosted.input_len_arg(), Some(1));
        assert_eq!(Service::OrderedFromDevice.input_len_arg(), None);
        assert_eq!(
            Service::Collect.input_len_arg(),
            None,
            "a collection's bulk is output only"
        );
    }

    #[test]
    fn status_codes_round_trip() {
        for s in [
            Status::Ok,
            Status::UnknownService,
            Status::Malformed,
            Status::Killed,
        ] {
            assert_eq!(Status::from_code(s as u32), s);
        }
        assert_eq!(Status::from_code(77), Status::Malformed);
    }
}
