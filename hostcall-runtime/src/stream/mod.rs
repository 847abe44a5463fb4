//! Tagged streams (issue 16, dh_comms's messages), the host's side: a stream's shape
//! and handle, the per-launch memory of its rings, and the thread that empties them
//! into the stream's callbacks while a kernel runs. The protocol is stated in
//! `hostcall_abi::stream`; the writer's side is `hostcall_client::stream`.

mod callbacks;
mod reader;

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hostcall_abi::stream::{RING_MAX_WORDS, RingControl, RingCursor, StreamDesc};

use callbacks::lock;
pub use callbacks::{Callbacks, FileWriter, HeatMap, Histogram, STREAM_FILE_MAGIC, TagCounter};
pub use reader::{BrokenRecord, RingReader};

use crate::module::{DeviceMemory, GpuModule, HostMemory};

/// What a full ring does with a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenFull {
    /// The writer waits until the host has taken enough: nothing is lost.
    Wait,
    /// The message is dropped and counted ([`StreamReport::dropped`]).
    Drop,
}

/// A stream's shape: its rings, the bytes of each, and what a full one does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamSpec {
    /// Rings (one per warp of a block, shared by the same warp of other blocks).
    pub rings: u32,
    /// Bytes of each ring, a multiple of 8, under `8 * RING_MAX_WORDS`.
    pub ring_bytes: usize,
    /// What a full ring does.
    pub when_full: WhenFull,
}

impl Default for StreamSpec {
    /// 64 rings of 64 KiB (4 MiB of host-pinned memory per launch), writers waiting.
    fn default() -> StreamSpec {
        StreamSpec {
            rings: 64,
            ring_bytes: 64 << 10,
            when_full: WhenFull::Wait,
        }
    }
}

impl StreamSpec {
    fn ring_words(&self) -> Result<usize, String> {
        let words = self.ring_bytes / 8;
        if self.rings == 0
            || !self.ring_bytes.is_multiple_of(8)
            || !(2..RING_MAX_WORDS).contains(&words)
        {
            return Err(format!(
                "a stream needs at least one ring of 16 bytes to {} bytes, a multiple of 8: not {} rings of {} bytes",
                8 * (RING_MAX_WORDS - 1),
                self.rings,
                self.ring_bytes
            ));
        }
        Ok(words)
    }
}

/// A stream the host serves: a kernel gets it as `KernelArg::Stream(handle)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamHandle(pub(crate) u32);

/// One stream's account of a launch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamReport {
    /// Messages the host took and handed to the callbacks.
    pub messages: u64,
    /// Messages dropped for want of room.
    pub dropped: u64,
    /// Records the host could not take (only a kernel ignoring the protocol writes one):
    /// their rings were read no further.
    pub broken: Vec<BrokenRecord>,
}

/// A stream the host serves: its shape and callbacks.
pub(crate) struct Registered {
    pub spec: StreamSpec,
    pub callbacks: Arc<Mutex<Callbacks>>,
}

/// One stream's memory in one launch, and the host's readers of its rings.
struct InLaunch {
    words: HostMemory,
    controls: HostMemory,
    cursors: u64,
    ring_words: usize,
    readers: Vec<RingReader>,
    callbacks: Arc<Mutex<Callbacks>>,
    messages: u64,
}

// SAFETY: the host-mapped memory is owned by the module for the launch and reached only
// through atomics.
unsafe impl Send for InLaunch {}

/// Ring `r` of the rings of `ring_words` words at `words`, with its control.
///
/// # Safety
/// `words` and `controls` must be as `LaunchStreams::allocate` made them (more than `r`
/// rings and controls, zeroed, page-aligned), live for `'a`, and reached only through
/// atomics.
unsafe fn ring<'a>(
    words: HostMemory,
    controls: HostMemory,
    ring_words: usize,
    r: usize,
) -> (&'a [AtomicU64], &'a RingControl) {
    // SAFETY: the caller's contract.
    unsafe {
        (
            std::slice::from_raw_parts(
                words.host.cast::<AtomicU64>().add(r * ring_words),
                ring_words,
            ),
            &*controls.host.cast::<RingControl>().add(r),
        )
    }
}

impl InLaunch {
    /// Takes what every ring holds now; returns the messages taken.
    fn take_all(&mut self) -> usize {
        let mut callbacks = lock(&self.callbacks);
        let mut taken = 0;
        for (r, reader) in self.readers.iter_mut().enumerate() {
            // SAFETY: allocated so by `LaunchStreams::allocate`, for the launch, which
            // outlives this (the module keeps its allocations).
            let (words, control) = unsafe { ring(self.words, self.controls, self.ring_words, r) };
            if let Ok(n) = reader.take(words, control, |tag, m| callbacks.dispatch(tag, m)) {
                taken += n;
            }
        }
        self.messages += taken as u64;
        taken
    }
}

/// One launch's streams: their memory, and the host thread that empties them while the
/// kernel runs.
pub(crate) struct LaunchStreams {
    streams: Vec<InLaunch>,
}

impl LaunchStreams {
    /// Allocates each stream's rings in `module` and writes its descriptor; returns the
    /// descriptors' device addresses, which the streams' kernel arguments become.
    pub fn allocate(
        module: &mut dyn GpuModule,
        registered: &[Registered],
    ) -> crate::Result<(LaunchStreams, Vec<u64>)> {
        let mut streams = Vec::new();
        let mut descs = Vec::new();
        for reg in registered {
            let ring_words = reg.spec.ring_words().map_err(crate::Error::InvalidLaunch)?;
            let rings = reg.spec.rings as usize;
            let words = module.alloc_host_mapped(rings * ring_words * 8)?;
            let controls = module.alloc_host_mapped(rings * size_of::<RingControl>())?;
            let cursors = module.alloc_device_zeroed(rings * size_of::<RingCursor>())?;
            let desc = module.alloc_host_mapped(size_of::<StreamDesc>())?;
            // SAFETY: `desc` is fresh host-mapped memory of a `StreamDesc`'s size,
            // page-aligned; no kernel runs yet.
            unsafe {
                desc.host.cast::<StreamDesc>().write(StreamDesc {
                    words: words.device,
                    controls: controls.device,
                    cursors,
                    num_rings: reg.spec.rings,
                    ring_words: ring_words as u32,
                    drop_when_full: u32::from(reg.spec.when_full == WhenFull::Drop),
                    reserved: 0,
                })
            };
            descs.push(desc.device);
            streams.push(InLaunch {
                words,
                controls,
                cursors,
                ring_words,
                readers: (0..rings).map(|_| RingReader::new()).collect(),
                callbacks: reg.callbacks.clone(),
                messages: 0,
            });
        }
        Ok((LaunchStreams { streams }, descs))
    }

    /// Starts the thread that empties the rings until [`Draining::finish`].
    pub fn start(self) -> Draining {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = (!self.streams.is_empty()).then(|| {
            let stop = stop.clone();
            let mut streams = self;
            std::thread::Builder::new()
                .name("hostcall-streams".into())
                .spawn(move || {
                    // Spins while messages come; idle, sleeps from 50 µs up to 1 ms, so
                    // that a launch that streams nothing costs next to no CPU.
                    let mut idle = 0u32;
                    while !stop.load(Relaxed) {
                        let taken: usize = streams.streams.iter_mut().map(InLaunch::take_all).sum();
                        idle = if taken > 0 { 0 } else { idle.saturating_add(1) };
                        match idle {
                            0..=64 => std::hint::spin_loop(),
                            n => std::thread::sleep(Duration::from_micros(
                                (50 * u64::from(n - 64)).min(1000),
                            )),
                        }
                    }
                    streams
                })
        });
        Draining { stop, thread }
    }
}

/// The thread that empties a launch's streams.
pub(crate) struct Draining {
    stop: Arc<AtomicBool>,
    thread: Option<std::io::Result<JoinHandle<LaunchStreams>>>,
}

impl Draining {
    /// Once the kernel has ended: stops the thread, takes what is left, and accounts for
    /// each stream (its dropped count read from device memory through `device`).
    pub fn finish(self, device: &dyn DeviceMemory) -> Vec<StreamReport> {
        self.stop.store(true, Relaxed);
        let Some(thread) = self.thread else {
            return Vec::new();
        };
        let mut streams = match thread.map_err(|e| e.to_string()).and_then(|t| {
            t.join()
                .map_err(|_| "the stream thread panicked".to_string())
        }) {
            Ok(s) => s,
            Err(e) => {
                log::warn!("emptying the launch's streams: {e}");
                return Vec::new();
            }
        };
        streams
            .streams
            .iter_mut()
            .map(|s| {
                s.take_all();
                let rings = s.readers.len();
                let mut dropped = 0;
                let mut bytes = Vec::new();
                let _ = device.stream(
                    s.cursors,
                    (rings * size_of::<RingCursor>()) as u64,
                    &mut |b| {
                        bytes.extend_from_slice(b);
                        Ok(())
                    },
                );
                for cursor in bytes.as_chunks::<{ size_of::<RingCursor>() }>().0 {
                    let (_, count) = cursor.split_at(8);
                    dropped += u64::from_le_bytes(count.try_into().expect("8 bytes"));
                }
                StreamReport {
                    messages: s.messages,
                    dropped,
                    broken: s.readers.iter().filter_map(RingReader::broken).collect(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_stream_is_64_rings_of_64_kib_that_wait() {
        let d = StreamSpec::default();
        assert_eq!(
            (d.rings, d.ring_words(), d.when_full),
            (64, Ok(8192), WhenFull::Wait)
        );
        let odd = StreamSpec {
            ring_bytes: 100,
            ..d
        };
        assert!(odd.ring_words().is_err());
    }
}
