//! Who made a call and which of its calls it was: the names the models' programs give
//! their calls and the names a [`Violation`](crate::Violation) reports, below both.

use std::fmt;

impl Token {
    /// Call `call` of the main warp's lane `lane`.
    pub fn main(lane: u8, call: u8) -> Token {
        Token {
            who: LaneRef { warp: 0, lane },
            call,
        }
    }

    /// Call `call` of the foreign warp's lane `lane`.
    pub fn foreign(lane: u8, call: u8) -> Token {
        Token {
            who: LaneRef { warp: 1, lane },
            call,
        }
    }
}

/// Who a lane is: its warp (0 main, 1 foreign) and lane id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaneRef {
    /// 0 for the main warp, 1 for the foreign one.
    pub warp: u8,
    /// The lane id (its slot on the port).
    pub lane: u8,
}

/// A request: the lane that made it and which of its calls it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Token {
    /// The caller.
    pub who: LaneRef,
    /// The caller's call number, from 0.
    pub call: u8,
}

impl fmt::Display for LaneRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = if self.warp == 0 { "main" } else { "foreign" };
        write!(f, "{w} lane {}", self.lane)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} call {}", self.who, self.call)
    }
}
