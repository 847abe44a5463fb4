//! Tagged streams, the ring on its own: writer threads running the GPU side
//! (`hostcall_client::stream::Ring`, on the emulator's platform) against the host's
//! `RingReader`. Rings far smaller than the traffic make writers wait and records wrap.
//! The protocol's memory ordering is `hostcall-model streams`'s to check; these tests
//! check the code that implements it.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hostcall_abi::stream::{BatchHeader, RecordHeader, RingControl, RingCursor};
use hostcall_client::stream::{Ring, Submitted};
use hostcall_emulator::Emu;
use hostcall_runtime::stream::{BrokenRecord, RingReader};

/// A message of three words: who sent it, its number among the sender's, and a check.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    writer: u32,
    n: u32,
    payload: [u64; 2],
}

// SAFETY: repr(C), plain integers, no padding (4 + 4 + 16 bytes).
unsafe impl hostcall_client::Plain for Sample {
    const NAME: &'static str = "Sample";
}

/// One ring's memory, as the host allocates it.
struct Memory {
    words: Vec<AtomicU64>,
    control: RingControl,
    cursor: RingCursor,
}

impl Memory {
    fn new(words: usize) -> Arc<Memory> {
        Arc::new(Memory {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            control: RingControl::default(),
            cursor: RingCursor::default(),
        })
    }

    fn ring(&self, drop_when_full: bool) -> Ring<'_> {
        Ring::new(&self.words, &self.control, &self.cursor, drop_when_full)
    }
}

/// Runs `writers` threads submitting `each` samples to one ring of `words` words while
/// the host takes them; returns what the host took, in order, and what was dropped.
fn run(words: usize, writers: u32, each: u32, drop_when_full: bool) -> (Vec<(u32, Sample)>, u64) {
    let mem = Memory::new(words);
    let done = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let (mem, done) = (mem.clone(), done.clone());
            std::thread::spawn(move || {
                let ring = mem.ring(drop_when_full);
                for n in 0..each {
                    let s = Sample {
                        writer: w,
                        n,
                        payload: [u64::from(w) << 32 | u64::from(n), !u64::from(n)],
                    };
                    ring.submit::<Emu, _>(7 + w % 3, &s);
                }
                done.fetch_add(1, Relaxed);
            })
        })
        .collect();
    let mut reader = RingReader::new();
    let mut got = Vec::new();
    let started = Instant::now();
    loop {
        let finished = done.load(Relaxed) == u64::from(writers);
        reader
            .take(&mem.words, &mem.control, |tag, words| {
                assert_eq!(words.len(), 3, "a sample is three words");
                let s = Sample {
                    writer: words[0] as u32,
                    n: (words[0] >> 32) as u32,
                    payload: [words[1], words[2]],
                };
                got.push((tag, s));
            })
            .unwrap();
        // The writers' last records are complete once they are done.
        if finished && reader.taken() == mem.cursor.reserved.load(Relaxed) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the ring stalled"
        );
        std::thread::yield_now();
    }
    for t in threads {
        t.join().unwrap();
    }
    (got, mem.cursor.dropped.load(Relaxed))
}

/// Each writer's samples, in the order the host took them, whole and under its tag.
fn check_order(got: &[(u32, Sample)], writers: u32) -> Vec<Vec<u32>> {
    let mut by_writer = vec![Vec::new(); writers as usize];
    for (tag, s) in got {
        assert_eq!(*tag, 7 + s.writer % 3, "{s:?} under tag {tag}");
        assert_eq!(
            s.payload,
            [u64::from(s.writer) << 32 | u64::from(s.n), !u64::from(s.n)],
            "a torn sample: {s:?}"
        );
        by_writer[s.writer as usize].push(s.n);
    }
    for (w, ns) in by_writer.iter().enumerate() {
        assert!(
            ns.windows(2).all(|p| p[0] < p[1]),
            "writer {w} out of order: {ns:?}"
        );
    }
    by_writer
}

#[test]
fn every_message_arrives_whole_once_and_in_its_writers_order_while_writers_wait() {
    // 8 writers x 2,000 records of 4 words through a ring of 64: it fills over and over,
    // and records wrap around its end.
    let (got, dropped) = run(64, 8, 2000, false);
    assert_eq!(dropped, 0);
    let by_writer = check_order(&got, 8);
    for ns in by_writer {
        assert_eq!(ns, (0..2000).collect::<Vec<_>>());
    }
}

#[test]
fn with_dropping_what_does_not_arrive_is_counted() {
    let (got, dropped) = run(64, 8, 2000, true);
    check_order(&got, 8);
    assert_eq!(got.len() as u64 + dropped, 8 * 2000);
}

#[test]
fn a_header_claiming_more_than_it_has_stops_the_reader_with_its_position() {
    let mem = Memory::new(8);
    // A batch at position 0 claiming 40 words, as only a kernel ignoring the protocol
    // writes.
    mem.words[0].store(BatchHeader::new(40, 0).encode(), Relaxed);
    let mut reader = RingReader::new();
    let broken = BrokenRecord {
        position: 0,
        words: 40,
        room: 7,
    };
    for _ in 0..2 {
        assert_eq!(
            reader.take(&mem.words, &mem.control, |_, _| ()),
            Err(broken)
        );
    }
    // A batch of 4 words whose one whole record (tag 1, one word) is taken, then a
    // record claiming 3 words where 1 is left.
    let mem = Memory::new(8);
    for (i, w) in [
        BatchHeader::new(4, 0).encode(),
        RecordHeader::new(1, 1).encode(),
        77,
        RecordHeader::new(2, 3).encode(),
    ]
    .into_iter()
    .enumerate()
    {
        mem.words[i].store(w, Relaxed);
    }
    let mut reader = RingReader::new();
    let mut got = Vec::new();
    let e = reader.take(&mem.words, &mem.control, |tag, m| {
        got.push((tag, m.to_vec()))
    });
    assert_eq!(
        e,
        Err(BrokenRecord {
            position: 3,
            words: 3,
            room: 1,
        })
    );
    assert_eq!(got, [(1, vec![77])]);
}

#[test]
fn a_submitted_message_waits_for_room_and_goes_on_when_the_host_takes() {
    let mem = Memory::new(8);
    let order = Arc::new(Mutex::new(Vec::new()));
    // Batches of 5 and 7 words do not fit a ring of 8 together: the second waits for the
    // first to be taken.
    assert_eq!(
        mem.ring(false).submit::<Emu, _>(1, &[1u64, 2, 3]),
        Submitted::Queued
    );
    let writer = {
        let (mem, order) = (mem.clone(), order.clone());
        std::thread::spawn(move || {
            mem.ring(false).submit::<Emu, _>(2, &[4u64, 5, 6, 7, 8]);
            order.lock().unwrap().push("second queued");
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        order.lock().unwrap().is_empty(),
        "the second record did not wait"
    );
    assert_eq!(
        mem.ring(true).submit::<Emu, _>(3, &[9u64]),
        Submitted::Dropped,
        "a dropping writer does not wait"
    );
    let mut reader = RingReader::new();
    let mut got = Vec::new();
    order.lock().unwrap().push("host takes");
    while got.len() < 2 {
        reader
            .take(&mem.words, &mem.control, |tag, w| {
                got.push((tag, w.to_vec()))
            })
            .unwrap();
        std::thread::yield_now();
    }
    writer.join().unwrap();
    assert_eq!(got, [(1, vec![1, 2, 3]), (2, vec![4, 5, 6, 7, 8])]);
    assert_eq!(*order.lock().unwrap(), ["host takes", "second queued"]);
    assert_eq!(mem.cursor.dropped.load(Relaxed), 1);
}

/// A message word that looks like a commit word. One writer sends
/// one-word messages through a 16-word ring, a batch of three words each (commit word,
/// record header, the word), and the host takes each batch as it comes. Once caught up,
/// the host reads the word at its position before the next commit word is there: a word
/// of the last lap, the message of the batch six before, here made to equal the commit
/// word the host expects (bit 63 and the position's low 16 bits). It was taken for one:
/// the host left the batch boundaries for good. Now the host clears the words it took,
/// so whatever the messages hold, each arrives as sent.
#[test]
fn a_message_that_looks_like_a_commit_word_is_taken_as_a_message() {
    let mem = Memory::new(16);
    let ring = mem.ring(false);
    let mut reader = RingReader::new();
    let mut got = Vec::new();
    let sent: Vec<u64> = (0..40u64)
        .map(|i| BatchHeader::new(1, 3 * i + 18).encode())
        .collect();
    for m in &sent {
        ring.submit::<Emu, u64>(5, m);
        let took = reader.take(&mem.words, &mem.control, |tag, words| {
            got.push((tag, words.to_vec()))
        });
        assert_eq!(took, Ok(1), "after {} messages", got.len());
    }
    let expected: Vec<(u32, Vec<u64>)> = sent.iter().map(|&m| (5, vec![m])).collect();
    assert_eq!(got, expected);
}
