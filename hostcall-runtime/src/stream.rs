//! The host's side of a tagged stream's ring (`hostcall_abi::stream`, which states the
//! protocol): take every complete record at the front, in order, hand each message to
//! the caller, and publish how far it has taken, so that writers waiting for room go on.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use hostcall_abi::stream::{RING_MAX_WORDS, RecordHeader, RingControl, RingCursor, StreamDesc};

use crate::module::{DeviceMemory, GpuModule, HostMemory};

/// A record the host cannot take: a header whose message is longer than the ring.
/// Only a kernel that ignores the protocol writes one; the ring is read no further.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the record at position {position} claims {words} words, more than its ring of {ring_words}"
)]
pub struct BrokenRecord {
    /// Its position.
    pub position: u64,
    /// The words its header claims.
    pub words: u16,
    /// The ring's words.
    pub ring_words: usize,
}

/// How far the host has taken one ring, and the room to copy a message out of it.
#[derive(Debug, Default)]
pub struct RingReader {
    taken: u64,
    message: Vec<u64>,
    broken: Option<BrokenRecord>,
}

impl RingReader {
    /// A reader of a ring nothing has been written to.
    pub fn new() -> RingReader {
        RingReader::default()
    }

    /// The position up to which every record has been taken.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// The record that stopped this reader, if one did.
    pub fn broken(&self) -> Option<BrokenRecord> {
        self.broken
    }

    /// Takes every complete record at the front of the ring `words`, in order, calling
    /// `each(tag, message)` for each, then publishes the new position in `control`.
    /// Returns the messages taken, or why the ring can be read no further.
    pub fn take(
        &mut self,
        words: &[AtomicU64],
        control: &RingControl,
        mut each: impl FnMut(u32, &[u64]),
    ) -> Result<usize, BrokenRecord> {
        if let Some(m) = self.broken {
            return Err(m);
        }
        let ring = words.len() as u64;
        debug_assert!(words.len() > 1 && words.len() < RING_MAX_WORDS);
        let mut taken = 0;
        loop {
            let at = self.taken;
            // Acquire: the writer's fence put every word of the message before this one.
            let Some(header) = RecordHeader::decode(words[(at % ring) as usize].load(Acquire))
            else {
                break;
            };
            if !header.completes(at) {
                break;
            }
            if u64::from(header.words) >= ring {
                let m = BrokenRecord {
                    position: at,
                    words: header.words,
                    ring_words: words.len(),
                };
                self.broken = Some(m);
                self.publish(control);
                return Err(m);
            }
            self.message.clear();
            self.message.extend(
                (0..u64::from(header.words))
                    .map(|i| words[((at + 1 + i) % ring) as usize].load(Acquire)),
            );
            each(header.tag, &self.message);
            self.taken = at + 1 + u64::from(header.words);
            taken += 1;
        }
        if taken > 0 {
            self.publish(control);
        }
        Ok(taken)
    }

    /// Stores `tail` with release: every word taken was read before a writer may
    /// overwrite it.
    fn publish(&self, control: &RingControl) {
        control.tail.store(self.taken, Release);
    }
}

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

/// A callback for every message of one tag.
type OnTag = Box<dyn FnMut(&[u64]) + Send>;
/// A callback for every message.
type OnEvery = Box<dyn FnMut(u32, &[u64]) + Send>;

/// What the host does with a stream's messages (dh_comms's message handlers): callbacks
/// per tag, then callbacks for every message, each in the order added (a chain).
#[derive(Default)]
pub struct Callbacks {
    per_tag: HashMap<u32, Vec<OnTag>>,
    every: Vec<OnEvery>,
}

impl Callbacks {
    /// No callbacks: messages are taken and counted only.
    pub fn new() -> Callbacks {
        Callbacks::default()
    }

    /// Adds `f` for each message tagged `tag`, after those added before for it.
    pub fn on(mut self, tag: u32, f: impl FnMut(&[u64]) + Send + 'static) -> Callbacks {
        self.per_tag.entry(tag).or_default().push(Box::new(f));
        self
    }

    /// Adds `f` for every message, after the per-tag ones.
    pub fn on_every(mut self, f: impl FnMut(u32, &[u64]) + Send + 'static) -> Callbacks {
        self.every.push(Box::new(f));
        self
    }

    fn dispatch(&mut self, tag: u32, words: &[u64]) {
        if let Some(chain) = self.per_tag.get_mut(&tag) {
            for f in chain {
                f(words);
            }
        }
        for f in &mut self.every {
            f(tag, words);
        }
    }
}

/// A ready-made callback: messages counted per tag.
#[derive(Clone, Debug, Default)]
pub struct TagCounter(Arc<Mutex<BTreeMap<u32, u64>>>);

impl TagCounter {
    /// A counter of nothing yet.
    pub fn new() -> TagCounter {
        TagCounter::default()
    }

    /// The callback to add with [`Callbacks::on_every`].
    pub fn callback(&self) -> impl FnMut(u32, &[u64]) + Send + 'static {
        let counts = self.0.clone();
        move |tag, _| *lock(&counts).entry(tag).or_default() += 1
    }

    /// Messages counted so far, per tag.
    pub fn counts(&self) -> BTreeMap<u32, u64> {
        lock(&self.0).clone()
    }
}

/// A ready-made callback: the values of one word of each message, in buckets of
/// `width` (dh_comms's histogram handler). Values past the last bucket count in it.
#[derive(Clone, Debug)]
pub struct Histogram {
    word: usize,
    width: u64,
    buckets: Arc<Mutex<Vec<u64>>>,
}

impl Histogram {
    /// `buckets` buckets of `width` (at least 1) over word `word` of each message; a
    /// message without that word is not counted.
    pub fn new(word: usize, width: u64, buckets: usize) -> Histogram {
        Histogram {
            word,
            width: width.max(1),
            buckets: Arc::new(Mutex::new(vec![0; buckets.max(1)])),
        }
    }

    /// The callback to add with [`Callbacks::on`] (one tag's messages).
    pub fn callback(&self) -> impl FnMut(&[u64]) + Send + 'static {
        let (word, width, buckets) = (self.word, self.width, self.buckets.clone());
        move |m| {
            if let Some(&v) = m.get(word) {
                let mut b = lock(&buckets);
                let last = b.len() - 1;
                b[((v / width) as usize).min(last)] += 1;
            }
        }
    }

    /// The counts so far, bucket by bucket.
    pub fn counts(&self) -> Vec<u64> {
        lock(&self.buckets).clone()
    }
}

/// A ready-made callback: an address heat map (dh_comms's memory heat map). Word
/// `word` of each message is an address; those in `base .. base + len` are counted in
/// `cells` equal ranges, shown as rows of `width` cells, and rendered as an image.
#[derive(Clone, Debug)]
pub struct HeatMap {
    word: usize,
    base: u64,
    len: u64,
    width: usize,
    cells: Arc<Mutex<Vec<u64>>>,
}

impl HeatMap {
    /// A map of `base .. base + len` in `cells` ranges, `width` to a row (both at least 1).
    pub fn new(word: usize, base: u64, len: u64, cells: usize, width: usize) -> HeatMap {
        HeatMap {
            word,
            base,
            len: len.max(1),
            width: width.max(1),
            cells: Arc::new(Mutex::new(vec![0; cells.max(1)])),
        }
    }

    /// The callback to add with [`Callbacks::on`] (one tag's messages).
    pub fn callback(&self) -> impl FnMut(&[u64]) + Send + 'static {
        let (word, base, len, cells) = (self.word, self.base, self.len, self.cells.clone());
        move |m| {
            let Some(offset) = m.get(word).and_then(|a| a.checked_sub(base)) else {
                return;
            };
            if offset < len {
                let mut c = lock(&cells);
                let n = c.len() as u128;
                c[(u128::from(offset) * n / u128::from(len)) as usize] += 1;
            }
        }
    }

    /// The touches counted so far, cell by cell.
    pub fn counts(&self) -> Vec<u64> {
        lock(&self.cells).clone()
    }

    /// The map as a binary PPM image (`P6`), one `scale` x `scale` square per cell, from
    /// black (untouched) through red and yellow to white (the most touched cell).
    pub fn ppm(&self, scale: usize) -> Vec<u8> {
        let cells = self.counts();
        let scale = scale.max(1);
        let rows = cells.len().div_ceil(self.width);
        let (w, h) = (self.width * scale, rows * scale);
        let most = cells.iter().copied().max().unwrap_or(0).max(1) as f64;
        let mut out = format!("P6\n{w} {h}\n255\n").into_bytes();
        for y in 0..h {
            for x in 0..w {
                let i = (y / scale) * self.width + x / scale;
                let heat = cells.get(i).map_or(0.0, |&c| c as f64 / most);
                let ramp = |from: f64| ((heat * 3.0 - from).clamp(0.0, 1.0) * 255.0) as u8;
                out.extend_from_slice(&[ramp(0.0), ramp(1.0), ramp(2.0)]);
            }
        }
        out
    }
}

/// A ready-made callback: every message appended to a file, in this binary format
/// (all little-endian): the 8 bytes `HCSTRM01`, then per message its tag (`u32`), its
/// length in words (`u32`) and its words (`u64` each). A write that fails is logged
/// once and the rest are skipped; [`FileWriter::finish`] reports it.
pub struct FileWriter {
    out: Arc<Mutex<(std::io::BufWriter<std::fs::File>, Option<std::io::Error>)>>,
}

/// The first bytes of a [`FileWriter`]'s file.
pub const STREAM_FILE_MAGIC: &[u8; 8] = b"HCSTRM01";

impl FileWriter {
    /// Creates (or truncates) `path` and writes the format's first bytes.
    pub fn create(path: &std::path::Path) -> std::io::Result<FileWriter> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        f.write_all(STREAM_FILE_MAGIC)?;
        Ok(FileWriter {
            out: Arc::new(Mutex::new((f, None))),
        })
    }

    /// The callback to add with [`Callbacks::on_every`].
    pub fn callback(&self) -> impl FnMut(u32, &[u64]) + Send + 'static {
        let out = self.out.clone();
        move |tag, words| {
            let mut o = lock(&out);
            if o.1.is_some() {
                return;
            }
            let mut record = Vec::with_capacity(8 + 8 * words.len());
            record.extend_from_slice(&tag.to_le_bytes());
            record.extend_from_slice(&(words.len() as u32).to_le_bytes());
            for w in words {
                record.extend_from_slice(&w.to_le_bytes());
            }
            if let Err(e) = o.0.write_all(&record) {
                log::warn!("writing stream messages to a file: {e}; the rest are skipped");
                o.1 = Some(e);
            }
        }
    }

    /// Flushes the file; the first error of any write, if one failed.
    pub fn finish(self) -> std::io::Result<()> {
        let mut o = lock(&self.out);
        match o.1.take() {
            Some(e) => Err(e),
            None => o.0.flush(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

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

    #[test]
    fn a_histogram_buckets_one_word_and_the_last_bucket_takes_the_rest() {
        let h = Histogram::new(1, 10, 5);
        let mut f = h.callback();
        for v in 0..100u64 {
            f(&[7, v]);
        }
        f(&[7]);
        assert_eq!(h.counts(), [10, 10, 10, 10, 60]);
    }

    #[test]
    fn the_file_writer_writes_the_documented_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("messages.bin");
        let w = FileWriter::create(&path).unwrap();
        let mut f = w.callback();
        f(5, &[1, 2]);
        f(0xffff_ffff, &[]);
        w.finish().unwrap();
        let mut expected = b"HCSTRM01".to_vec();
        for (tag, words) in [(5u32, &[1u64, 2][..]), (0xffff_ffff, &[][..])] {
            expected.extend_from_slice(&tag.to_le_bytes());
            expected.extend_from_slice(&(words.len() as u32).to_le_bytes());
            for w in words {
                expected.extend_from_slice(&w.to_le_bytes());
            }
        }
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn a_heat_map_counts_addresses_in_their_cells_and_renders_them() {
        let map = HeatMap::new(0, 0x1000, 0x400, 4, 2);
        let mut f = map.callback();
        for a in [
            0x1000, 0x10ff, 0x1100, 0x13ff, 0x13ff, 0x13ff, 0xfff, 0x1400,
        ] {
            f(&[a, 9]);
        }
        f(&[]);
        assert_eq!(map.counts(), [2, 1, 0, 3]);
        let image = map.ppm(3);
        let header = b"P6\n6 6\n255\n";
        assert!(image.starts_with(header));
        assert_eq!(image.len(), header.len() + 6 * 6 * 3);
        let pixel = |x: usize, y: usize| {
            let at = header.len() + (y * 6 + x) * 3;
            &image[at..at + 3]
        };
        assert_eq!(pixel(0, 3), [0, 0, 0], "an untouched cell is black");
        assert_eq!(
            pixel(5, 5),
            [255, 255, 255],
            "the most touched cell is white"
        );
        assert_eq!(
            pixel(0, 0),
            [255, 255, 0],
            "two thirds of the most is yellow"
        );
    }

    #[test]
    fn a_file_that_cannot_be_written_is_reported_at_finish() {
        let w = FileWriter::create(std::path::Path::new("/dev/full")).unwrap();
        let mut f = w.callback();
        for _ in 0..10_000 {
            f(1, &[0; 8]);
        }
        let e = w.finish().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28), "{e}");
    }
}
