//! Breadth-first exploration of every reachable state, so that each violation is
//! reported with a shortest trace leading to it.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, DefaultHasher, Hash, Hasher};

use crate::violation::Violation;

/// A system to explore: its initial state, the steps from each state, and which states
/// with no step are correct ends.
pub(crate) trait Space {
    /// A state; hashed to recognise states already seen.
    type State: Hash;
    /// A step, described in traces.
    type Action: Copy + fmt::Display;
    /// The state everything starts from.
    fn initial(&self) -> Self::State;
    /// Every step possible from `s`, with what it leads to.
    fn successors(&self, s: &Self::State) -> Vec<(Self::Action, Next<Self::State>)>;
    /// For a state with no step: whether it is a correct end (`false`: a deadlock), or
    /// the invariant it breaks.
    fn finished(&self, s: &Self::State) -> Result<bool, Violation>;
}

/// What one step leads to.
pub(crate) enum Next<S> {
    /// A state where every invariant holds.
    State(S),
    /// A state reached by breaking an invariant that does not stop the run (a port
    /// released too early): recorded, and explored further to show what follows.
    Flagged(S, Violation),
    /// An invariant broken in a way that ends the run (a wrong answer accepted).
    Broken(Violation),
}

/// The steps from the initial state to a violation.
#[derive(Clone, Debug)]
pub struct Trace {
    /// What broke.
    pub violation: Violation,
    /// Each step, described.
    pub steps: Vec<String>,
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.steps.iter().enumerate() {
            writeln!(f, "  {:>3}. {s}", i + 1)?;
        }
        write!(f, "  => {}", self.violation)
    }
}

/// The result of exploring one configuration.
#[derive(Clone, Debug)]
pub struct Report {
    /// Distinct states reached.
    pub states: usize,
    /// Reachable correct end states.
    pub ends: usize,
    /// A shortest trace to each kind of violation found, in the order found.
    pub violations: Vec<Trace>,
}

/// What was explored, the kinds of violation found, then each one's trace.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: Vec<&str> = self.violations.iter().map(|t| t.violation.kind()).collect();
        write!(
            f,
            "{} states, {} correct ends, violations: {kinds:?}",
            self.states, self.ends
        )?;
        for t in &self.violations {
            write!(f, "\n{}:\n{t}", t.violation.kind())?;
        }
        Ok(())
    }
}

impl Report {
    /// Prints what was explored as `name` (each violation's trace, should there be
    /// any), then checks that no invariant broke and that some run ended correctly: a
    /// test's verdict on a configuration that must be sound.
    pub fn assert_sound(&self, name: &str) {
        println!("{name}: {self}");
        assert!(self.violations.is_empty(), "{name}: an invariant broke");
        assert!(self.ends > 0, "{name}: no run ends correctly");
    }

    /// The trace of the first violation of `kind` (see [`Violation::kind`]), if any.
    pub fn find(&self, kind: &str) -> Option<&Trace> {
        self.violations.iter().find(|t| t.violation.kind() == kind)
    }
}

/// Explores every reachable state of `model` breadth first (see `crate::check`).
pub(crate) fn explore<M: Space>(model: &M) -> Report {
    let mut seen: HashSet<u128, BuildHasherDefault<Folded>> = HashSet::default();
    let mut parent: Vec<Option<(u32, M::Action)>> = Vec::new();
    let mut queue: VecDeque<(M::State, u32)> = VecDeque::new();
    let mut violations: Vec<Trace> = Vec::new();
    let mut ends = 0;

    let first = model.initial();
    let mut bytes = Bytes(Vec::new());
    seen.insert(fingerprint(&mut bytes, &first));
    parent.push(None);
    queue.push_back((first, 0));

    let path = |parent: &[Option<(u32, M::Action)>], mut at: u32| {
        let mut steps = Vec::new();
        while let Some((p, a)) = parent[at as usize] {
            steps.push(a.to_string());
            at = p;
        }
        steps.reverse();
        steps
    };
    let mut visit =
        |n: M::State, at: u32, action: M::Action, parent: &mut Vec<_>, queue: &mut VecDeque<_>| {
            if seen.insert(fingerprint(&mut bytes, &n)) {
                let id = u32::try_from(parent.len()).expect("fewer than 2^32 states");
                parent.push(Some((at, action)));
                queue.push_back((n, id));
            }
        };

    while let Some((s, at)) = queue.pop_front() {
        let steps = model.successors(&s);
        if steps.is_empty() {
            match model.finished(&s) {
                Ok(true) => ends += 1,
                Ok(false) => record(&mut violations, Violation::Deadlock, || path(&parent, at)),
                Err(v) => record(&mut violations, v, || path(&parent, at)),
            }
            continue;
        }
        for (action, n) in steps {
            let with_step = |parent: &[Option<(u32, M::Action)>]| {
                let mut steps = path(parent, at);
                steps.push(action.to_string());
                steps
            };
            match n {
                Next::Broken(v) => record(&mut violations, v, || with_step(&parent)),
                Next::Flagged(n, v) => {
                    record(&mut violations, v, || with_step(&parent));
                    visit(n, at, action, &mut parent, &mut queue);
                }
                Next::State(n) => visit(n, at, action, &mut parent, &mut queue),
            }
        }
    }
    Report {
        states: parent.len(),
        ends,
        violations,
    }
}

/// A state's 128-bit fingerprint: two SipHashes of the bytes its `Hash` writes (into
/// `bytes`, reused), each taken in one pass (hashing field by field costs a call of
/// the hasher per field).
fn fingerprint<S: Hash>(bytes: &mut Bytes, s: &S) -> u128 {
    bytes.0.clear();
    s.hash(bytes);
    let mut b = DefaultHasher::new();
    0x9e37_79b9_7f4a_7c15u64.hash(&mut b);
    b.write(&bytes.0);
    (u128::from(bytes.finish()) << 64) | u128::from(b.finish())
}

/// The bytes a value's `Hash` writes; their hash is a SipHash of them all at once.
struct Bytes(Vec<u8>);

impl Hasher for Bytes {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        let mut a = DefaultHasher::new();
        a.write(&self.0);
        a.finish()
    }
}

/// The hasher of the set of fingerprints seen, which are hashes already: it folds their
/// bytes into a word rather than hash them again.
#[derive(Default)]
struct Folded(u64);

impl Hasher for Folded {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Keeps the first (shortest, breadth-first) trace of each kind of violation.
fn record(out: &mut Vec<Trace>, v: Violation, steps: impl FnOnce() -> Vec<String>) {
    if out.iter().all(|t| t.violation.kind() != v.kind()) {
        out.push(Trace {
            violation: v,
            steps: steps(),
        });
    }
}
