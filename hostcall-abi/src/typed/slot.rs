//! A declared service's identity: its [`Signature`], the [`Shape`]s that enter its
//! fingerprint and fixed part, and the [`ServiceSlot`] it leaves in a GPU module for the
//! host to check and bind.

use core::sync::atomic::AtomicU32;

use super::{FIXED_INLINE, Plain, SLOT_HEADER, UNBOUND, round_up};

/// One service as a declaration describes it: what the host checks a module against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Signature {
    /// `Trait.method`.
    pub name: &'static str,
    /// The method's signature as declared, e.g. `fn get(&self, key: &str) -> u64`.
    pub text: &'static str,
    /// The fixed id, or [`UNBOUND`] for a service by name.
    pub id: u32,
    /// [`fingerprint`] of the name, the text, the id and the argument and result
    /// layouts.
    pub fingerprint: u64,
    /// Whether its calls send input bytes ([`reads_input`]); the host copies none for
    /// the others, whose arguments all lie in the slot.
    pub reads_input: bool,
    /// How long its calls may keep the host: where the host serves them. Part of the
    /// declaration (`= 7, blocks`), not of the fingerprint: the GPU's side of a call is
    /// the same whichever it is.
    pub waits: Waits,
    /// How many bytes of the bulk buffer its answer may fill ([`answer_bytes`]): what
    /// the host keeps room for while a call runs, waits included.
    pub answer: AnswerBytes,
}

/// How many bytes of the bulk buffer a declared service's answer may fill, as its
/// declaration says before any call: the room the host keeps for a call while it runs,
/// which a call that waits inside its service keeps for the whole wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnswerBytes {
    /// None: its value travels in the slot, and it has no output buffer.
    Nothing,
    /// Its value's bytes: a value over [`VALUE_WORDS`](super::VALUE_WORDS) bytes, at the
    /// start of the bulk buffer.
    Value(usize),
    /// As many as its output buffer holds, a `u64` of the request's fixed part.
    Output {
        /// The length's byte offset in the fixed part.
        at: usize,
        /// Whether the fixed part is `args[1..6]`; else it opens the bytes sent.
        inline: bool,
    },
}

/// The [`AnswerBytes`] of a service with arguments of these shapes and a value of
/// `value` bytes (the answer's layout, in the module's docs: an output buffer, or else
/// a value too large for the slot, fills the bulk buffer).
pub const fn answer_bytes(shapes: &[Shape], value: usize) -> AnswerBytes {
    let inline = fixed_len(shapes) <= FIXED_INLINE;
    let mut at = 0;
    let mut i = 0;
    while i < shapes.len() {
        at = round_up(at, shapes[i].align);
        if shapes[i].kind == 2 {
            return AnswerBytes::Output { at, inline };
        }
        at += shapes[i].size;
        i += 1;
    }
    if value > super::VALUE_WORDS {
        AnswerBytes::Value(value)
    } else {
        AnswerBytes::Nothing
    }
}

impl AnswerBytes {
    /// The bytes the answer to a call with `args` that sent `input` may fill (host
    /// side): the output buffer's length as the request gives it, unchecked (the decoder
    /// refuses one over the bulk buffer). `None` when the request is too short to hold
    /// it, which the decoder refuses too.
    pub fn of(self, args: &[u64; 6], input: &[u8]) -> Option<u64> {
        match self {
            AnswerBytes::Nothing => Some(0),
            AnswerBytes::Value(n) => Some(n as u64),
            AnswerBytes::Output { at, inline } => {
                let inline_bytes;
                let fixed: &[u8] = if inline {
                    inline_bytes = super::args_bytes(args);
                    &inline_bytes
                } else {
                    input
                };
                let len = fixed.get(at..at + 8)?;
                Some(u64::from_le_bytes(len.try_into().ok()?))
            }
        }
    }
}

/// How long a declared service's calls may keep the host waiting, as its declaration
/// says: a host serves a call that may wait on a thread that polls no ports, so that a
/// slow call never holds up the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Waits {
    /// Answered at once, from the host's own state (declared `quick`, or nothing said).
    Never,
    /// May take long on the host (a file system, a terminal): served on the blocking
    /// pool, whose workers it shares (declared `blocks`).
    Blocks,
    /// May wait as long as another party likes (a FIFO's other end, which may be another
    /// GPU thread): served on the blocking pool by a worker of its own when none is idle,
    /// so that calls waiting on each other never starve it (declared `waits`).
    OnPeer,
    /// Reads, writes or copies into the fd its first argument names (declared
    /// `reads_fd`, `writes_fd`, `copies_to_fd`; std's declarations alone): how long it
    /// may take depends on what the fd is, which only the host knows when the call
    /// comes (a regular file takes time, stdin and a socket are waited for without a
    /// thread, stdout waits while its writer has no room).
    OnFd(FdUse),
}

/// What a method declared with an fd does with it ([`Waits::OnFd`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FdUse {
    /// Reads from it (`reads_fd`).
    Read,
    /// Writes at most one bulk buffer of bytes to it (`writes_fd`).
    Write,
    /// Writes bytes the host copies out of GPU memory to it, up to
    /// [`DEVICE_WRITE_MAX`](crate::DEVICE_WRITE_MAX) (`copies_to_fd`).
    CopyOut,
}

/// Whether the first of these argument shapes is an fd (`i32`), as a method declared
/// `reads_fd`, `writes_fd` or `copies_to_fd` needs: the host finds the fd in the
/// request's first argument word.
pub const fn first_is_fd(shapes: &[Shape]) -> bool {
    !shapes.is_empty() && shapes[0].kind == 0 && super::declare::same_str(shapes[0].name, "i32")
}

/// Whether the fixed ids of `lists`, and `others`, are distinct ([`UNBOUND`] aside): for
/// the `const` check that no two services of a declaration, or of std, share one.
pub const fn ids_distinct(lists: &[&[Signature]], others: &[u32]) -> bool {
    let mut ids = [0u32; 256];
    let mut n = 0;
    let mut l = 0;
    while l < lists.len() {
        let mut i = 0;
        while i < lists[l].len() {
            if lists[l][i].id != UNBOUND {
                assert!(n < ids.len(), "more than 256 fixed ids in one check");
                ids[n] = lists[l][i].id;
                n += 1;
            }
            i += 1;
        }
        l += 1;
    }
    let mut i = 0;
    while i < others.len() {
        assert!(n < ids.len(), "more than 256 fixed ids in one check");
        ids[n] = others[i];
        n += 1;
        i += 1;
    }
    let mut a = 0;
    while a < n {
        let mut b = a + 1;
        while b < n {
            if ids[a] == ids[b] {
                return false;
            }
            b += 1;
        }
        a += 1;
    }
    true
}

/// The shape of one argument or result type, as it enters a fingerprint and the fixed
/// part: its bytes there, their alignment, and what else it moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Bytes in the fixed part.
    pub size: usize,
    /// Their alignment.
    pub align: usize,
    /// 0: plain value, 1: input slice, 2: output buffer, 3: a `str`, 4: a
    /// [`DeviceSlice`](super::DeviceSlice).
    pub kind: u8,
    /// A plain value's [`Plain::NAME`].
    pub name: &'static str,
}

impl Shape {
    /// A plain value's shape.
    pub const fn of<T: Plain>() -> Shape {
        Shape {
            size: size_of::<T>(),
            align: align_of::<T>(),
            kind: 0,
            name: T::NAME,
        }
    }

    pub(crate) const fn word(kind: u8) -> Shape {
        Shape {
            size: 8,
            align: 8,
            kind,
            name: "",
        }
    }
}

/// Bytes of the fixed part of arguments of these shapes.
#[inline]
pub const fn fixed_len(shapes: &[Shape]) -> usize {
    let mut at = 0;
    let mut i = 0;
    while i < shapes.len() {
        at = round_up(at, shapes[i].align) + shapes[i].size;
        i += 1;
    }
    at
}

/// Whether a call with arguments of these shapes sends bytes beyond the slot: a slice or
/// `str` argument, or a fixed part over [`FIXED_INLINE`] bytes.
pub const fn reads_input(shapes: &[Shape]) -> bool {
    count_kind(shapes, 1) + count_kind(shapes, 3) > 0 || fixed_len(shapes) > FIXED_INLINE
}

/// How many arguments of these shapes are of `kind`.
pub const fn count_kind(shapes: &[Shape], kind: u8) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < shapes.len() {
        if shapes[i].kind == kind {
            n += 1;
        }
        i += 1;
    }
    n
}

/// FNV-1a of `bytes`, continuing from `hash`.
const fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

/// The fingerprint of a service: its name, signature text, id, and the shapes of its
/// arguments and of its value. Two declarations agree only if all of these do.
pub const fn fingerprint(name: &str, text: &str, id: u32, shapes: &[Shape], value: Shape) -> u64 {
    let mut h = fnv(0xcbf2_9ce4_8422_2325, name.as_bytes());
    h = fnv(h, &[0]);
    h = fnv(h, text.as_bytes());
    h = fnv(h, &id.to_le_bytes());
    let mut i = 0;
    while i < shapes.len() {
        h = fnv(h, &(shapes[i].size as u64).to_le_bytes());
        h = fnv(h, &(shapes[i].align as u64).to_le_bytes());
        h = fnv(h, &[shapes[i].kind]);
        h = fnv(h, shapes[i].name.as_bytes());
        i += 1;
    }
    h = fnv(h, &(value.size as u64).to_le_bytes());
    h = fnv(h, value.name.as_bytes());
    fnv(h, &(value.align as u64).to_le_bytes())
}

/// A service's record in a GPU module, under the symbol
/// `__HOSTCALL__<Trait>__<method>`: the host reads the name, the signature and the
/// fingerprint when it loads the module, and writes the service's id into `id`
/// (VectorWare's `__HOSTCALL__<name>` globals, with the signature to check against).
/// `N` is the name's length plus the text's.
#[repr(C)]
pub struct ServiceSlot<const N: usize> {
    /// The id the GPU calls the service by: the declaration's fixed id, or [`UNBOUND`]
    /// until the host binds it.
    pub id: AtomicU32,
    /// Bytes of the name at the start of `text`.
    pub name_len: u16,
    /// Bytes of the signature text after it.
    pub text_len: u16,
    /// [`Signature::fingerprint`].
    pub fingerprint: u64,
    /// The name, then the signature text.
    pub text: [u8; N],
}

impl<const N: usize> ServiceSlot<N> {
    /// The slot of `sig`; `N` must be `sig.name.len() + sig.text.len()`.
    pub const fn new(sig: &Signature) -> Self {
        let (name, text) = (sig.name.as_bytes(), sig.text.as_bytes());
        assert!(name.len() + text.len() == N && N <= u16::MAX as usize);
        let mut bytes = [0u8; N];
        let mut i = 0;
        while i < N {
            bytes[i] = if i < name.len() {
                name[i]
            } else {
                text[i - name.len()]
            };
            i += 1;
        }
        ServiceSlot {
            id: AtomicU32::new(sig.id),
            name_len: name.len() as u16,
            text_len: text.len() as u16,
            fingerprint: sig.fingerprint,
            text: bytes,
        }
    }
}

impl Signature {
    /// The first [`SLOT_HEADER`] bytes of this service's [`ServiceSlot`], which its name
    /// and text follow: for modules that are not compiled (the emulator's).
    pub fn slot_header(&self) -> [u8; SLOT_HEADER] {
        let mut h = [0u8; SLOT_HEADER];
        h[..4].copy_from_slice(&self.id.to_le_bytes());
        h[4..6].copy_from_slice(&(self.name.len() as u16).to_le_bytes());
        h[6..8].copy_from_slice(&(self.text.len() as u16).to_le_bytes());
        h[8..].copy_from_slice(&self.fingerprint.to_le_bytes());
        h
    }
}

/// A slot as the host read it out of a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRecord<'a> {
    /// The id it holds.
    pub id: u32,
    /// `Trait.method`.
    pub name: &'a str,
    /// The signature text.
    pub text: &'a str,
    /// The fingerprint.
    pub fingerprint: u64,
}

impl<'a> SlotRecord<'a> {
    /// Parses a slot's bytes (as copied out of the module), or says why they are not one.
    pub fn parse(bytes: &'a [u8]) -> Result<SlotRecord<'a>, &'static str> {
        let header = bytes
            .get(..SLOT_HEADER)
            .ok_or("shorter than a slot header")?;
        let word = |at: usize, n: usize| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&header[at..at + n]);
            u64::from_le_bytes(b)
        };
        let name_len = word(4, 2) as usize;
        let text_len = word(6, 2) as usize;
        let rest = &bytes[SLOT_HEADER..];
        if rest.len() < name_len + text_len {
            return Err("its name and signature overrun it");
        }
        let utf8 = |b: &'a [u8]| core::str::from_utf8(b).map_err(|_| "its text is not UTF-8");
        Ok(SlotRecord {
            id: word(0, 4) as u32,
            name: utf8(&rest[..name_len])?,
            text: utf8(&rest[name_len..name_len + text_len])?,
            fingerprint: word(8, 8),
        })
    }
}
