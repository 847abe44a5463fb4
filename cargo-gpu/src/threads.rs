//! Where a program's threads go on the GPU: how many one-warp blocks the launch has and
//! how many lanes of each run threads (libc-hostcall's start kernel holds them back for
//! `pthread_create`; `hostcall_abi::spawn` numbers them across the warps first).
//!
//! Measured on an H100 (`bench-results/h100-issue33.md`): a thread that has a warp to
//! itself runs as fast beside 31 parked lanes as alone (rayon's sum of 10^8 `u64`s, 279
//! against 276 ms), while threads that share a warp's lanes take turns at its issue
//! slots (the same sum on 528 threads packed 32 to a warp: 749 ms; on 16,896: 65 s). So
//! the first threads get a warp each, `available_parallelism` counts one per
//! multiprocessor of those (at most half the threads, `hostcall_abi::spawn::processors`,
//! which says why), and the rest of the lanes take the threads a program starts beyond
//! them (a `thread::scope` of 10,000 beside rayon's pool), which otherwise fail with
//! `EAGAIN`.

use hostcall_abi::WARP_SIZE;

/// Warps per multiprocessor that get a thread of their own: one per warp scheduler (four
/// on Hopper).
const WARPS_PER_MULTIPROCESSOR: u32 = 4;

/// The most warps per multiprocessor a program's threads may take: half the 32 one-warp
/// blocks a Hopper SM keeps resident, so that every held-back thread is resident beside
/// `main`.
const WARPS_PER_MULTIPROCESSOR_MOST: u32 = 16;

/// The launch of a program: `warps` one-warp blocks, the first `lanes` lanes of each
/// running threads, `threads` of them held back besides the main thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// One-warp blocks in the launch.
    pub warps: u32,
    /// Lanes of each that run threads.
    pub lanes: u32,
    /// Threads held back for `pthread_create`.
    pub threads: u32,
}

/// The geometry for `asked` threads (default: every lane of the spread warps) on a GPU of
/// `multiprocessors` SMs. Holding a thread back costs no memory: each takes its frame
/// stack from the heap when it first runs, and a spawn without room fails with `EAGAIN`.
pub fn geometry(asked: Option<u32>, multiprocessors: u32) -> Result<Geometry, String> {
    let spread = multiprocessors * WARPS_PER_MULTIPROCESSOR + 1;
    let most_warps = multiprocessors * WARPS_PER_MULTIPROCESSOR_MOST;
    let lanes_max = WARP_SIZE as u32;
    let threads = asked.unwrap_or(spread * lanes_max - 1);
    let most = most_warps * lanes_max - 1;
    if threads > most {
        return Err(format!(
            "--threads {threads}: a program can have at most {most} here \
             ({WARPS_PER_MULTIPROCESSOR_MOST} warps of {lanes_max} lanes per multiprocessor)"
        ));
    }
    let all = threads + 1;
    let warps = all.min(spread).max(all.div_ceil(lanes_max));
    Ok(Geometry {
        warps,
        lanes: all.div_ceil(warps),
        threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: u32 = 132;

    #[test]
    fn threads_take_a_warp_each_before_they_share_one() {
        let g = |t| geometry(Some(t), H100).unwrap();
        assert_eq!(
            g(4),
            Geometry {
                warps: 5,
                lanes: 1,
                threads: 4
            }
        );
        assert_eq!(
            g(528),
            Geometry {
                warps: 529,
                lanes: 1,
                threads: 528
            }
        );
        assert_eq!(
            g(529),
            Geometry {
                warps: 529,
                lanes: 2,
                threads: 529
            }
        );
        assert_eq!(
            g(20_000),
            Geometry {
                warps: 626,
                lanes: 32,
                threads: 20_000
            }
        );
        assert_eq!(
            g(0),
            Geometry {
                warps: 1,
                lanes: 1,
                threads: 0
            }
        );
    }

    #[test]
    fn the_default_fills_every_lane_of_the_spread_warps() {
        let d = geometry(None, H100).unwrap();
        assert_eq!(
            d,
            Geometry {
                warps: 529,
                lanes: 32,
                threads: 529 * 32 - 1
            }
        );
    }

    #[test]
    fn more_threads_than_resident_warps_hold_is_refused_with_the_limit() {
        let e = geometry(Some(H100 * 16 * 32), H100).unwrap_err();
        assert!(e.contains("at most 67583"), "{e}");
    }
}
