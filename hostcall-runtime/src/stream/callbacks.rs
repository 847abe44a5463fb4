//! What the host does with a stream's messages: callbacks per tag and for every message,
//! and the ready-made ones (counts per tag, a histogram, a heat map, a file). The
//! stream's reader threads call them at once, each with its own rings' messages, so a
//! callback is `Fn + Sync` and the ready-made ones keep their counts in atomics.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard};

/// A callback for every message of one tag.
type OnTag = Box<dyn Fn(&[u64]) + Send + Sync>;
/// A callback for every message.
type OnEvery = Box<dyn Fn(u32, &[u64]) + Send + Sync>;

/// What the host does with a stream's messages (dh_comms's message handlers): callbacks
/// per tag, then callbacks for every message, each in the order added (a chain).
/// Messages of one ring, so each GPU thread's, reach them in order, one at a time; the
/// stream's reader threads dispatch their own rings' messages at once, without a lock,
/// so that taking messages scales with them.
#[derive(Default)]
pub struct Callbacks {
    /// The chains of tags below [`DIRECT_TAGS`], by tag: found without hashing, which
    /// took most of the time a host thread spends per message.
    direct: Vec<Vec<OnTag>>,
    per_tag: HashMap<u32, Vec<OnTag>>,
    every: Vec<OnEvery>,
}

/// Tags whose chains [`Callbacks`] finds by index.
const DIRECT_TAGS: usize = 256;

impl Callbacks {
    /// No callbacks: messages are taken and counted only.
    pub fn new() -> Callbacks {
        Callbacks::default()
    }

    /// Adds `f` for each message tagged `tag`, after those added before for it.
    pub fn on(mut self, tag: u32, f: impl Fn(&[u64]) + Send + Sync + 'static) -> Callbacks {
        match usize::try_from(tag).ok().filter(|&t| t < DIRECT_TAGS) {
            Some(t) => {
                if self.direct.len() <= t {
                    self.direct.resize_with(t + 1, Vec::new);
                }
                self.direct[t].push(Box::new(f));
            }
            None => self.per_tag.entry(tag).or_default().push(Box::new(f)),
        }
        self
    }

    /// Adds `f` for every message, after the per-tag ones.
    pub fn on_every(mut self, f: impl Fn(u32, &[u64]) + Send + Sync + 'static) -> Callbacks {
        self.every.push(Box::new(f));
        self
    }

    /// Hands one message to its tag's chain, then to every-message callbacks.
    pub(super) fn dispatch(&self, tag: u32, words: &[u64]) {
        let chain = match self.direct.get(tag as usize) {
            Some(chain) => Some(chain),
            None if self.per_tag.is_empty() => None,
            None => self.per_tag.get(&tag),
        };
        for f in chain.into_iter().flatten() {
            f(words);
        }
        for f in &self.every {
            f(tag, words);
        }
    }
}

/// Tags below this are counted in atomics (no lock per message); others in a map.
const COUNTED_FAST: usize = 64;

/// Copies of the fast counts: each thread counting adds to one of its own, so that
/// reader threads counting at once do not contend for one cache line.
const COUNT_SHARDS: usize = 16;

/// Distinct tags past `COUNTED_FAST` a [`TagCounter`] counts one by one: tags are the
/// GPU's to choose, and a map entry for each of 2^32 would take over 100 GB. Messages
/// of further tags are counted together ([`TagCounter::uncounted`]).
pub const TAGS_MAX: usize = 65_536;

/// A ready-made callback: messages counted per tag (per tag up to [`TAGS_MAX`] tags,
/// then together).
#[derive(Clone, Debug, Default)]
pub struct TagCounter(Arc<TagCounts>);

#[derive(Debug)]
struct TagCounts {
    small: [Shard; COUNT_SHARDS],
    other: Mutex<BTreeMap<u32, u64>>,
    /// Messages of tags past [`TAGS_MAX`].
    uncounted: AtomicU64,
}

/// One thread's copy of the fast counts, on cache lines of its own.
#[derive(Debug)]
#[repr(align(128))]
struct Shard([AtomicU64; COUNTED_FAST]);

impl Default for TagCounts {
    fn default() -> TagCounts {
        TagCounts {
            small: [const { Shard([const { AtomicU64::new(0) }; COUNTED_FAST]) }; COUNT_SHARDS],
            other: Mutex::default(),
            uncounted: AtomicU64::new(0),
        }
    }
}

/// The calling thread's shard of every [`TagCounter`]: threads take shards in turn.
fn my_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local!(static SHARD: usize = NEXT.fetch_add(1, Relaxed) % COUNT_SHARDS);
    SHARD.with(|s| *s)
}

impl TagCounter {
    /// A counter of nothing yet.
    pub fn new() -> TagCounter {
        TagCounter::default()
    }

    /// The callback to add with [`Callbacks::on_every`].
    pub fn callback(&self) -> impl Fn(u32, &[u64]) + Send + Sync + 'static {
        let counts = self.0.clone();
        move |tag, _| match counts.small[my_shard()].0.get(tag as usize) {
            Some(n) => {
                n.fetch_add(1, Relaxed);
            }
            None => {
                let mut other = lock(&counts.other);
                let room = other.len() < TAGS_MAX;
                match other.get_mut(&tag) {
                    Some(n) => *n += 1,
                    None if room => {
                        other.insert(tag, 1);
                    }
                    None => {
                        counts.uncounted.fetch_add(1, Relaxed);
                    }
                }
            }
        }
    }

    /// Messages of tags past the first [`TAGS_MAX`] of their kind, counted together.
    pub fn uncounted(&self) -> u64 {
        self.0.uncounted.load(Relaxed)
    }

    /// Messages counted so far, per tag.
    pub fn counts(&self) -> BTreeMap<u32, u64> {
        let mut all = lock(&self.0.other).clone();
        for tag in 0..COUNTED_FAST {
            match self.0.small.iter().map(|s| s.0[tag].load(Relaxed)).sum() {
                0 => {}
                n => {
                    all.insert(tag as u32, n);
                }
            }
        }
        all
    }
}

/// A ready-made callback: the values of one word of each message, in buckets of
/// `width` (dh_comms's histogram handler). Values past the last bucket count in it.
#[derive(Clone, Debug)]
pub struct Histogram {
    word: usize,
    width: u64,
    buckets: Arc<[AtomicU64]>,
}

impl Histogram {
    /// `buckets` buckets of `width` (at least 1) over word `word` of each message; a
    /// message without that word is not counted.
    pub fn new(word: usize, width: u64, buckets: usize) -> Histogram {
        Histogram {
            word,
            width: width.max(1),
            buckets: zeroed(buckets),
        }
    }

    /// The callback to add with [`Callbacks::on`] (one tag's messages).
    pub fn callback(&self) -> impl Fn(&[u64]) + Send + Sync + 'static {
        let (word, width, buckets) = (self.word, self.width, self.buckets.clone());
        move |m| {
            if let Some(&v) = m.get(word) {
                let last = buckets.len() - 1;
                buckets[((v / width) as usize).min(last)].fetch_add(1, Relaxed);
            }
        }
    }

    /// The counts so far, bucket by bucket.
    pub fn counts(&self) -> Vec<u64> {
        loaded(&self.buckets)
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
    cells: Arc<[AtomicU64]>,
}

impl HeatMap {
    /// A map of `base .. base + len` in `cells` ranges, `width` to a row (both at least 1).
    pub fn new(word: usize, base: u64, len: u64, cells: usize, width: usize) -> HeatMap {
        HeatMap {
            word,
            base,
            len: len.max(1),
            width: width.max(1),
            cells: zeroed(cells),
        }
    }

    /// The callback to add with [`Callbacks::on`] (one tag's messages).
    pub fn callback(&self) -> impl Fn(&[u64]) + Send + Sync + 'static {
        let (word, base, len, cells) = (self.word, self.base, self.len, self.cells.clone());
        move |m| {
            let Some(offset) = m.get(word).and_then(|a| a.checked_sub(base)) else {
                return;
            };
            if offset < len {
                let n = cells.len() as u128;
                cells[(u128::from(offset) * n / u128::from(len)) as usize].fetch_add(1, Relaxed);
            }
        }
    }

    /// The touches counted so far, cell by cell.
    pub fn counts(&self) -> Vec<u64> {
        loaded(&self.cells)
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
    pub fn callback(&self) -> impl Fn(u32, &[u64]) + Send + Sync + 'static {
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

/// `n` counters (at least one) at zero.
fn zeroed(n: usize) -> Arc<[AtomicU64]> {
    (0..n.max(1)).map(|_| AtomicU64::new(0)).collect()
}

/// The counters' values now.
fn loaded(counters: &[AtomicU64]) -> Vec<u64> {
    counters.iter().map(|c| c.load(Relaxed)).collect()
}

/// `m` locked, even if a callback panicked while holding it.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter kept an entry for every tag the GPU chose: 4,194,304
    /// fresh tags cost 117 MiB. Past `TAGS_MAX` tags, messages are counted together.
    #[test]
    fn a_tag_counter_holds_at_most_its_bound_of_tags() {
        let counter = TagCounter::new();
        let count = counter.callback();
        let tags = TAGS_MAX as u32 + 1000;
        for tag in 0..tags {
            count(tag + COUNTED_FAST as u32, &[]);
        }
        count(7, &[]);
        let counts = counter.counts();
        assert_eq!(counts.len(), TAGS_MAX + 1);
        assert_eq!(counter.uncounted(), 1000);
        assert_eq!(
            counts.values().sum::<u64>() + counter.uncounted(),
            u64::from(tags) + 1
        );
    }

    #[test]
    fn chains_of_small_and_large_tags_run_in_order_and_only_for_their_tag() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = |name: &'static str| {
            let seen = seen.clone();
            move |m: &[u64]| lock(&seen).push((name, m[0]))
        };
        let c = Callbacks::new()
            .on(5, log("5a"))
            .on(70_000, log("big a"))
            .on(5, log("5b"))
            .on(70_000, log("big b"));
        for (tag, word) in [(5, 1), (70_000, 2), (77, 3), (255, 4), (u32::MAX, 5)] {
            c.dispatch(tag, &[word]);
        }
        assert_eq!(
            *lock(&seen),
            [("5a", 1), ("5b", 1), ("big a", 2), ("big b", 2)]
        );
    }

    #[test]
    fn a_tag_counter_counts_small_and_large_tags_alike() {
        let counter = TagCounter::new();
        let (f, g) = (counter.callback(), counter.clone().callback());
        for tag in [0, 63, 64, 7, u32::MAX, 63] {
            f(tag, &[]);
        }
        g(64, &[1]);
        let counts: Vec<_> = counter.counts().into_iter().collect();
        assert_eq!(counts, [(0, 1), (7, 1), (63, 2), (64, 2), (u32::MAX, 1)]);
    }

    #[test]
    fn a_histogram_buckets_one_word_and_the_last_bucket_takes_the_rest() {
        let h = Histogram::new(1, 10, 5);
        let f = h.callback();
        for v in 0..100u64 {
            f(&[7, v]);
        }
        f(&[7]);
        assert_eq!(h.counts(), [10, 10, 10, 10, 60]);
    }

    #[test]
    fn a_heat_map_counts_addresses_in_their_cells_and_renders_them() {
        let map = HeatMap::new(0, 0x1000, 0x400, 4, 2);
        let f = map.callback();
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
    fn the_file_writer_writes_the_documented_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("messages.bin");
        let w = FileWriter::create(&path).unwrap();
        let f = w.callback();
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
    fn a_file_that_cannot_be_written_is_reported_at_finish() {
        let w = FileWriter::create(std::path::Path::new("/dev/full")).unwrap();
        let f = w.callback();
        for _ in 0..10_000 {
            f(1, &[0; 8]);
        }
        let e = w.finish().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28), "{e}");
    }
}
