//! Tagged streams (dh_comms's messages), the host's side: a stream's shape
//! and handle, the per-launch memory of its rings, and the thread that empties them
//! into the stream's callbacks while a kernel runs. The protocol is stated in
//! `hostcall_abi::stream`; the writer's side is `hostcall_client::stream`.

mod callbacks;
mod reader;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::JoinHandle;
use std::time::Duration;

use hostcall_abi::stream::{RING_MAX_WORDS, RingControl, RingCursor, StreamDesc};

pub use callbacks::{
    Callbacks, FileWriter, HeatMap, Histogram, STREAM_FILE_MAGIC, TAGS_MAX, TagCounter,
};
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
    /// 64 rings of 256 KiB (16 MiB of host-pinned memory per launch), writers waiting.
    /// Rings of 64 KiB held too little for 1056 x 256 threads' batches of 64-byte
    /// messages: writers waited, at half the rate (`bench-results/gpu-issue16.md`).
    fn default() -> StreamSpec {
        StreamSpec {
            rings: 64,
            ring_bytes: 256 << 10,
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

pub use crate::module::StreamHandle;

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
    /// Messages on which a callback panicked (the panic was caught; the rings were read
    /// on).
    pub callback_panics: u64,
}

/// A stream the host serves: its shape and callbacks.
pub(crate) struct Registered {
    pub spec: StreamSpec,
    pub callbacks: Arc<Callbacks>,
}

/// One stream's memory in one launch.
struct InLaunch {
    words: HostMemory,
    controls: HostMemory,
    cursors: u64,
    rings: usize,
    ring_words: usize,
    callbacks: Arc<Callbacks>,
}

// SAFETY: the host-mapped memory is owned by the module for the launch and reached only
// through atomics, each ring by the one reader thread it belongs to.
unsafe impl Send for InLaunch {}
// SAFETY: as above; the callbacks are `Sync`.
unsafe impl Sync for InLaunch {}

impl InLaunch {
    /// Ring `r` and its control.
    fn ring(&self, r: usize) -> (&[AtomicU64], &RingControl) {
        assert!(r < self.rings);
        // SAFETY: `LaunchStreams::allocate` made `rings` rings of `ring_words` words
        // and their controls, zeroed and page-aligned, for the launch: the module keeps
        // them until the launch has ended, after `Draining::finish` has joined the
        // readers and dropped this; they are reached only by atomics.
        unsafe {
            (
                std::slice::from_raw_parts(
                    self.words.host.cast::<AtomicU64>().add(r * self.ring_words),
                    self.ring_words,
                ),
                &*self.controls.host.cast::<RingControl>().add(r),
            )
        }
    }
}

/// A reader thread's rings (stream, ring, reader), and per stream the messages it has
/// taken and the callback panics it caught.
struct Shard {
    rings: Vec<(usize, usize, RingReader)>,
    messages: Vec<u64>,
    panics: Vec<u64>,
}

impl Shard {
    /// Takes what its rings hold now, handing each message to its stream's callbacks;
    /// returns the messages taken. Other shards read and dispatch their rings meanwhile.
    /// A callback that panics has its panic caught (the embedder's panic hook reports
    /// it; the first is also said here, once per stream and thread): the message counts
    /// as taken, and the rings are read on.
    fn take_all(&mut self, streams: &[InLaunch]) -> usize {
        let mut taken = 0;
        for (s, r, reader) in &mut self.rings {
            let (words, control) = streams[*s].ring(*r);
            let callbacks = &streams[*s].callbacks;
            let panics = &mut self.panics[*s];
            let n = reader
                .take(words, control, |tag, m| {
                    let run = AssertUnwindSafe(|| callbacks.dispatch(tag, m));
                    if std::panic::catch_unwind(run).is_err() {
                        if *panics == 0 {
                            log::error!(
                                "a callback of stream {s} panicked on a message tagged {tag}; its messages are still taken (the run's report counts its panics)"
                            );
                        }
                        *panics += 1;
                    }
                })
                .unwrap_or(0);
            self.messages[*s] += n as u64;
            taken += n;
        }
        taken
    }
}

/// One launch's streams: their memory, and the host threads that empty them while the
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
            let desc = StreamDesc {
                words: words.device,
                controls: controls.device,
                cursors,
                num_rings: reg.spec.rings,
                ring_words: ring_words as u32,
                drop_when_full: u32::from(reg.spec.when_full == WhenFull::Drop),
                reserved: 0,
            };
            // SAFETY: `StreamDesc` is `repr(C)`, three `u64`s and four `u32`s, 40 bytes
            // (asserted in hostcall-abi): no padding, every byte initialized.
            let bytes = unsafe {
                std::slice::from_raw_parts((&raw const desc).cast::<u8>(), size_of::<StreamDesc>())
            };
            // In device memory: every GPU thread that opens the stream reads it.
            descs.push(module.alloc_device_copy(bytes)?);
            streams.push(InLaunch {
                words,
                controls,
                cursors,
                rings,
                ring_words,
                callbacks: reg.callbacks.clone(),
            });
        }
        Ok((LaunchStreams { streams }, descs))
    }

    /// Starts `readers` threads (at least one, at most one per ring) that empty the
    /// rings until [`Draining::finish`], ring `g` of all the streams' rings in turn
    /// belonging to thread `g % readers`: one thread reads a ring, so its messages reach
    /// the callbacks in order.
    pub fn start(self, readers: usize) -> Draining {
        let stop = Arc::new(AtomicBool::new(false));
        let all: Vec<(usize, usize)> = self
            .streams
            .iter()
            .enumerate()
            .flat_map(|(s, st)| (0..st.rings).map(move |r| (s, r)))
            .collect();
        let readers = readers.clamp(1, all.len().max(1));
        let mut shards: Vec<Shard> = (0..readers)
            .map(|_| Shard {
                rings: Vec::new(),
                messages: vec![0; self.streams.len()],
                panics: vec![0; self.streams.len()],
            })
            .collect();
        for (g, &(s, r)) in all.iter().enumerate() {
            shards[g % readers].rings.push((s, r, RingReader::new()));
        }
        let streams = Arc::new(self.streams);
        let threads = if all.is_empty() {
            Vec::new()
        } else {
            shards
                .into_iter()
                .enumerate()
                .map(|(k, mut shard)| {
                    let (stop, streams) = (stop.clone(), streams.clone());
                    std::thread::Builder::new()
                        .name(format!("hostcall-streams-{k}"))
                        .spawn(move || {
                            // Spins while messages come; idle, sleeps from 50 µs up to
                            // 1 ms, so that a launch that streams little costs next to
                            // no CPU.
                            let mut idle = 0u32;
                            while !stop.load(Relaxed) {
                                let taken = shard.take_all(&streams);
                                idle = if taken > 0 { 0 } else { idle.saturating_add(1) };
                                match idle {
                                    0..=64 => std::hint::spin_loop(),
                                    n => std::thread::sleep(Duration::from_micros(
                                        (50 * u64::from(n - 64)).min(1000),
                                    )),
                                }
                            }
                            shard
                        })
                })
                .collect()
        };
        Draining {
            stop,
            streams,
            threads,
        }
    }
}

/// The threads that empty a launch's streams.
pub(crate) struct Draining {
    stop: Arc<AtomicBool>,
    streams: Arc<Vec<InLaunch>>,
    threads: Vec<std::io::Result<JoinHandle<Shard>>>,
}

impl Draining {
    /// Once the kernel has ended: stops the threads, takes what is left, and accounts
    /// for each stream (its dropped count read from device memory through `device`).
    pub fn finish(self, device: &dyn DeviceMemory) -> Vec<StreamReport> {
        self.stop.store(true, Relaxed);
        let mut reports: Vec<StreamReport> = self
            .streams
            .iter()
            .map(|s| StreamReport {
                dropped: dropped(s, device),
                ..StreamReport::default()
            })
            .collect();
        for thread in self.threads {
            let mut shard = match thread
                .map_err(|e| e.to_string())
                .and_then(|t| t.join().map_err(|_| "a stream thread panicked".to_string()))
            {
                Ok(s) => s,
                Err(e) => {
                    log::warn!("emptying the launch's streams: {e}");
                    continue;
                }
            };
            shard.take_all(&self.streams);
            for (report, (n, p)) in reports
                .iter_mut()
                .zip(shard.messages.iter().zip(&shard.panics))
            {
                report.messages += n;
                report.callback_panics += p;
            }
            for (s, _, reader) in &shard.rings {
                reports[*s].broken.extend(reader.broken());
            }
        }
        reports
    }
}

/// Messages of stream `s` dropped for want of room, summed over its rings' cursors in
/// device memory.
fn dropped(s: &InLaunch, device: &dyn DeviceMemory) -> u64 {
    let mut bytes = Vec::new();
    let _ = device.stream(
        s.cursors,
        (s.rings * size_of::<RingCursor>()) as u64,
        &mut |b| {
            bytes.extend_from_slice(b);
            Ok(())
        },
    );
    dropped_in(&bytes)
}

/// The dropped counts of the ring cursors in `bytes`, summed. GPU-writable: a kernel
/// that ignores the protocol may write any count, so the sum saturates rather than
/// overflowing.
fn dropped_in(bytes: &[u8]) -> u64 {
    bytes
        .as_chunks::<{ size_of::<RingCursor>() }>()
        .0
        .iter()
        .map(|cursor| {
            let at = std::mem::offset_of!(RingCursor, dropped);
            u64::from_le_bytes(cursor[at..at + 8].try_into().expect("8 bytes"))
        })
        .fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dropped counts forged by the GPU overflowed the sum: the
    /// host panicked (in a debug build).
    #[test]
    fn forged_dropped_counts_saturate() {
        let mut bytes = vec![0u8; 3 * size_of::<RingCursor>()];
        let at = std::mem::offset_of!(RingCursor, dropped);
        for c in 0..2 {
            let o = c * size_of::<RingCursor>() + at;
            bytes[o..o + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        }
        assert_eq!(dropped_in(&bytes), u64::MAX);
        assert_eq!(dropped_in(&bytes[2 * size_of::<RingCursor>()..]), 0);
    }

    #[test]
    fn the_default_stream_is_64_rings_of_256_kib_that_wait() {
        let d = StreamSpec::default();
        assert_eq!(
            (d.rings, d.ring_words(), d.when_full),
            (64, Ok(32768), WhenFull::Wait)
        );
        let odd = StreamSpec {
            ring_bytes: 100,
            ..d
        };
        assert!(odd.ring_words().is_err());
    }
}
