//! Typed services: how a service declared with `hostcall_client::service!` travels, and
//! the checks both sides make of it.
//!
//! A declared trait's every method is one service, with a name (`Trait.method`), the
//! text of its signature, and a fingerprint of that text and of the layouts of its
//! argument and result types. Its id is fixed by the declaration (`= 7`, AMD's numeric
//! ids, which [`USER_IDS`] bounds) or, by default, assigned by the host when it loads a
//! module and finds the service's [`ServiceSlot`] there (VectorWare's services by name).
//!
//! # Request
//! * `args[0]`: bytes the lane sends in its bulk buffer;
//! * the *fixed part*: each argument in order, a [`Plain`] value as its bytes at the next
//!   multiple of its alignment, a byte or str slice, or an output buffer, as its length
//!   (`u64`). Up to [`FIXED_INLINE`] bytes it is `args[1..6]`; a larger one (at most
//!   [`FIXED_MAX`]) opens the bulk bytes;
//! * the bulk bytes: the fixed part if it did not fit, then each input slice, each part
//!   starting at the next multiple of 8.
//!
//! # Answer
//! * the result: `-errno` for a failure (a `Result`'s `Err`, or the transport's own
//!   `ENOSYS`/`EINVAL`); otherwise the value's bytes zero-extended when it has at most
//!   [`VALUE_INLINE`] of them (so most answers fit the answer word), else 0;
//! * a value of up to [`VALUE_WORDS`] bytes in the slot's `args[1..5]`, except one of 5
//!   to 8 bytes whose bits, read as a `u64`, are below 2^47 ([`SMALL_VALUE`]): that one
//!   travels in the result as the small ones do, so that most `u64` answers (counts,
//!   sizes, handles) fit the answer word and cost one read of host memory, not seven; a
//!   larger value goes at the start of the bulk buffer;
//! * the output buffer (at most one per service, and not beside a value that goes in the
//!   bulk buffer), whole, at the start of the bulk buffer.

use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::AtomicU32;

use crate::BULK_PER_LANE;

/// A failure, as Linux's errno number (x86_64 numbering, [`crate::errno`]).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::errno::*;
        let name = match self.0 {
            EPERM => "EPERM",
            ENOENT => "ENOENT",
            EIO => "EIO",
            EBADF => "EBADF",
            EAGAIN => "EAGAIN",
            ENOMEM => "ENOMEM",
            EACCES => "EACCES",
            EFAULT => "EFAULT",
            EEXIST => "EEXIST",
            EINVAL => "EINVAL",
            EPIPE => "EPIPE",
            ERANGE => "ERANGE",
            ENOSYS => "ENOSYS",
            _ => return write!(f, "Errno({})", self.0),
        };
        f.write_str(name)
    }
}

/// A value that travels as its bytes.
///
/// # Safety
/// Implement it only for primitives, arrays of `Plain`, and `#[repr(C)]` or
/// `#[repr(transparent)]` types made of `Plain` fields with no padding, for which every
/// bit pattern is a valid value, and which hold no pointer the other side would follow
/// (a device address is a `u64`). Such a type has the same layout on nvptx64 and x86_64.
pub unsafe trait Plain: Copy + fmt::Debug + 'static {
    /// The type's name in the fingerprints of host closures, whose signatures have no
    /// declared text: primitives give theirs, so `f32` and `i32` differ; other types
    /// are told apart by size and alignment only, unless they name themselves.
    const NAME: &'static str = "";
}

macro_rules! plain {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive: no padding, every bit pattern valid, one layout on both
        // targets (both are LP64 and little-endian).
        unsafe impl Plain for $t {
            const NAME: &'static str = stringify!($t);
        }
    )* };
}
plain!(
    (),
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64
);

// SAFETY: an array of `Plain` has no padding and every bit pattern of it is valid.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {
    const NAME: &'static str = T::NAME;
}

/// Fixed parts up to this many bytes travel in `args[1..6]`.
pub const FIXED_INLINE: usize = 40;
/// The largest fixed part (a declaration with a larger one does not compile).
pub const FIXED_MAX: usize = 256;
/// Values up to this many bytes travel in the result itself.
pub const VALUE_INLINE: usize = 4;
/// Values up to this many bytes travel in the slot's `args[1..5]`.
pub const VALUE_WORDS: usize = 32;
/// Values of up to 8 bytes whose bits are below this travel in the result.
pub const SMALL_VALUE: u64 = 1 << 47;
/// Bulk parts a request may send (the fixed part, when it does not fit, is one).
pub const MAX_INPUTS: usize = 4;
/// The largest value a service may return, and what one lane's bulk buffer holds.
pub const VALUE_MAX: usize = BULK_PER_LANE;

/// Ids a declaration may fix for its services (AMD's numeric ids). 0 is the default
/// handler's, which catches calls of ids nobody serves.
pub const USER_IDS: core::ops::Range<u32> = 1..0x4000_0000;
/// Ids the host assigns at load to services declared without one, and to closures.
pub const NAMED_IDS: core::ops::Range<u32> = 0x4000_0000..0x8000_0000;
/// Ids of std's own services ([`crate::Service`]): no user id can take them.
pub const STD_IDS: core::ops::Range<u32> = 0x8000_0000..0x8001_0000;
/// The id a by-name service's slot holds until the host binds it.
pub const UNBOUND: u32 = u32::MAX;

/// The prefix of every service slot's symbol in a GPU module; the rest is
/// `Trait__method`.
pub const SLOT_PREFIX: &str = "__HOSTCALL__";

/// Bytes of a [`ServiceSlot`] before its name and signature text.
pub const SLOT_HEADER: usize = 16;

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
    /// [`DeviceSlice`].
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

    const fn word(kind: u8) -> Shape {
        Shape {
            size: 8,
            align: 8,
            kind,
            name: "",
        }
    }
}

const fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
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

/// A request broken for its service's declaration (too short, a bad length, text that
/// is not UTF-8): the host answers `Malformed` with this reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireError(pub &'static str);

/// Words of the fixed part an encoder for a fixed part of `len` bytes holds: at least
/// the five of `args[1..6]`.
pub const fn fixed_words(len: usize) -> usize {
    let w = len.div_ceil(8);
    if w < 5 { 5 } else { w }
}

/// The GPU side's request under construction: the fixed part (`W` words, sized by the
/// declaration so that a call's stack holds no more than it needs: GPU stacks are local
/// memory), the input slices and the output buffer, in the order the arguments came.
pub struct Encoder<'a, const W: usize> {
    fixed: [u64; W],
    len: usize,
    inputs: [&'a [u8]; MAX_INPUTS],
    count: usize,
    output: Option<&'a mut [u8]>,
}

impl<const W: usize> Default for Encoder<'_, W> {
    fn default() -> Self {
        Encoder {
            fixed: [0; W],
            len: 0,
            inputs: [&[]; MAX_INPUTS],
            count: 0,
            output: None,
        }
    }
}

impl<'a, const W: usize> Encoder<'a, W> {
    /// Appends `v`'s bytes to the fixed part at the next multiple of its alignment.
    #[inline]
    pub fn plain<T: Plain>(&mut self, v: &T) {
        let at = round_up(self.len, align_of::<T>());
        let n = size_of::<T>();
        assert!(at + n <= W * 8, "a fixed part over the encoder's words");
        // SAFETY: `at + n <= W * 8`, inside `fixed`; a `Plain` value has no padding, so
        // all `n` bytes read are initialized.
        unsafe {
            core::ptr::copy_nonoverlapping(
                (v as *const T).cast::<u8>(),
                self.fixed.as_mut_ptr().cast::<u8>().add(at),
                n,
            )
        };
        self.len = at + n;
    }

    /// Appends an input slice: its length in the fixed part, its bytes as a bulk part.
    pub fn input(&mut self, bytes: &'a [u8]) {
        self.plain(&(bytes.len() as u64));
        assert!(self.count < MAX_INPUTS, "more than MAX_INPUTS input parts");
        self.inputs[self.count] = bytes;
        self.count += 1;
    }

    /// Sets the output buffer, cut to what one lane's bulk buffer carries in any packet
    /// (so that a thread gets the same answer whether it calls alone or beside others,
    /// as a short `read` does): its length in the fixed part.
    pub fn output(&mut self, buf: &'a mut [u8]) {
        let n = buf.len().min(crate::BULK_PER_LANE);
        let buf = &mut buf[..n];
        self.plain(&(buf.len() as u64));
        self.output = Some(buf);
    }

    /// The fixed part's bytes.
    pub fn fixed(&self) -> &[u8] {
        // SAFETY: `len <= W * 8` bytes of `fixed`, all initialized (zeroed at first).
        unsafe { core::slice::from_raw_parts(self.fixed.as_ptr().cast::<u8>(), self.len) }
    }

    /// The fixed part as `args[1..6]` (its first 40 bytes).
    pub fn fixed_words(&self) -> [u64; 5] {
        let mut w = [0; 5];
        w.copy_from_slice(&self.fixed[..5]);
        w
    }

    /// The input slices.
    pub fn inputs(&self) -> &[&'a [u8]] {
        &self.inputs[..self.count]
    }

    /// Takes the output buffer.
    pub fn take_output(&mut self) -> Option<&'a mut [u8]> {
        self.output.take()
    }
}

/// Bytes the bulk input of a request takes: `parts` each starting at a multiple of 8.
pub fn bulk_len(parts: &[&[u8]]) -> usize {
    parts.iter().fold(0, |at, p| round_up(at, 8) + p.len())
}

/// GPU memory as the host reaches it while a launch runs: which ranges the launch owns,
/// and a copy out of them (by DMA on a GPU).
pub trait DeviceReader: Sync {
    /// Whether the `len` bytes at device address `addr` lie inside memory the launch
    /// owns.
    fn owns(&self, addr: u64, len: u64) -> bool;
    /// Hands the `len` bytes at `addr` to `sink`, in order, in pieces.
    fn read(&self, addr: u64, len: u64, sink: &mut dyn FnMut(&[u8])) -> Result<(), Errno>;
}

/// Bytes in GPU global memory passed by address: data larger than the bulk buffer,
/// which the host copies out by DMA. The host checks, before the handler runs, that the
/// range lies inside memory the launch owns (its heap, where `Vec`, `Box` and `String`
/// live); anything else is refused as malformed. The caller's writes to the bytes
/// precede the request's system-scope release, so the host's copy sees them.
#[derive(Clone, Copy)]
pub struct DeviceSlice<'a> {
    addr: u64,
    len: u64,
    reader: Option<&'a dyn DeviceReader>,
    _bytes: PhantomData<&'a [u8]>,
}

impl<'a> DeviceSlice<'a> {
    /// `bytes`, by address (GPU side).
    pub fn new(bytes: &'a [u8]) -> Self {
        DeviceSlice {
            addr: bytes.as_ptr() as u64,
            len: bytes.len() as u64,
            reader: None,
            _bytes: PhantomData,
        }
    }

    /// The device address.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Hands its bytes to `sink`, in order (host side, in a handler).
    pub fn read(&self, sink: &mut dyn FnMut(&[u8])) -> Result<(), Errno> {
        match self.reader {
            Some(r) => r.read(self.addr, self.len, sink),
            None => Err(Errno(crate::errno::EFAULT)),
        }
    }
}

impl fmt::Debug for DeviceSlice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceSlice({:#x}, {} bytes)", self.addr, self.len)
    }
}

impl<'a> Arg<'a> for DeviceSlice<'a> {
    const SHAPE: Shape = Shape {
        size: 16,
        align: 8,
        kind: 4,
        name: "DeviceSlice",
    };
    fn put<const W: usize>(self, e: &mut Encoder<'a, W>) {
        e.plain(&[self.addr, self.len]);
    }
    fn take(d: &mut Decoder<'a>) -> Result<Self, WireError> {
        let [addr, len] = d.plain::<[u64; 2]>()?;
        let reader = d
            .device
            .filter(|r| r.owns(addr, len))
            .ok_or(WireError("a device pointer outside the launch's memory"))?;
        Ok(DeviceSlice {
            addr,
            len,
            reader: Some(reader),
            _bytes: PhantomData,
        })
    }
    fn show(&self, f: &mut dyn fmt::Write) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// The host side's reading of a request, in the order of its arguments.
pub struct Decoder<'a> {
    device: Option<&'a dyn DeviceReader>,
    fixed: &'a [u8],
    at: usize,
    input: &'a [u8],
    input_at: usize,
    output: Option<&'a mut [u8]>,
    output_len: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder of a request whose fixed part has `fixed_len` bytes, from its arguments,
    /// the bytes it sent and room for its output. `args_bytes` holds `args[1..6]`;
    /// `device` checks and reads [`DeviceSlice`] arguments (none: they are refused).
    #[inline]
    pub fn new(
        fixed_len: usize,
        args_bytes: &'a [u8; FIXED_INLINE],
        input: &'a [u8],
        output: &'a mut [u8],
        device: Option<&'a dyn DeviceReader>,
    ) -> Result<Decoder<'a>, WireError> {
        let (fixed, input_at) = if fixed_len <= FIXED_INLINE {
            (&args_bytes[..fixed_len], 0)
        } else {
            let fixed = input
                .get(..fixed_len)
                .ok_or(WireError("the request is shorter than its fixed part"))?;
            (fixed, round_up(fixed_len, 8))
        };
        Ok(Decoder {
            device,
            fixed,
            at: 0,
            input,
            input_at,
            output: Some(output),
            output_len: 0,
        })
    }

    /// The next plain value of the fixed part.
    pub fn plain<T: Plain>(&mut self) -> Result<T, WireError> {
        let at = round_up(self.at, align_of::<T>());
        let bytes = self
            .fixed
            .get(at..at + size_of::<T>())
            .ok_or(WireError("the fixed part is too short"))?;
        self.at = at + size_of::<T>();
        // SAFETY: `bytes` holds `size_of::<T>()` bytes, and every bit pattern is a valid
        // `T` (`Plain`'s contract); the read is unaligned.
        Ok(unsafe { bytes.as_ptr().cast::<T>().read_unaligned() })
    }

    /// The next input slice.
    #[inline]
    pub fn input(&mut self) -> Result<&'a [u8], WireError> {
        let len = self.plain::<u64>()?;
        let at = round_up(self.input_at, 8);
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| at.checked_add(l))
            .filter(|&e| e <= self.input.len())
            .ok_or(WireError("a slice runs past the bytes sent"))?;
        self.input_at = end;
        Ok(&self.input[at..end])
    }

    /// The output buffer, of the length the GPU asked for.
    #[inline]
    pub fn output(&mut self) -> Result<&'a mut [u8], WireError> {
        let len = self.plain::<u64>()?;
        let out = self
            .output
            .take()
            .ok_or(WireError("a second output buffer"))?;
        if len > out.len() as u64 {
            return Err(WireError(
                "the output buffer is larger than the bulk buffer",
            ));
        }
        let out = &mut out[..len as usize];
        out.fill(0);
        self.output_len = out.len();
        Ok(out)
    }

    /// Bytes of the output buffer taken (0 without one): what goes back.
    #[inline]
    pub fn output_len(&self) -> usize {
        self.output_len
    }
}

/// An argument type a declared service may take: any [`Plain`] value, `&[u8]` and
/// `&str` (sent through the bulk buffer), `&mut [u8]` (an output buffer filled by the
/// host, up to the bulk buffer), and [`DeviceSlice`] (larger data, by address).
pub trait Arg<'a>: Sized {
    /// Its shape in the fixed part.
    const SHAPE: Shape;
    /// Adds it to a request (GPU side).
    fn put<const W: usize>(self, e: &mut Encoder<'a, W>);
    /// Reads it from a request (host side).
    fn take(d: &mut Decoder<'a>) -> Result<Self, WireError>;
    /// Writes it for a trace line.
    fn show(&self, f: &mut dyn fmt::Write) -> fmt::Result;
}

impl<'a, T: Plain> Arg<'a> for T {
    const SHAPE: Shape = Shape::of::<T>();
    fn put<const W: usize>(self, e: &mut Encoder<'a, W>) {
        e.plain(&self)
    }
    fn take(d: &mut Decoder<'a>) -> Result<Self, WireError> {
        d.plain()
    }
    fn show(&self, f: &mut dyn fmt::Write) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// Bytes of a `&[u8]` or `&str` argument a trace line shows.
const SHOWN: usize = 64;

impl<'a> Arg<'a> for &'a [u8] {
    const SHAPE: Shape = Shape::word(1);
    fn put<const W: usize>(self, e: &mut Encoder<'a, W>) {
        e.input(self)
    }
    fn take(d: &mut Decoder<'a>) -> Result<Self, WireError> {
        d.input()
    }
    fn show(&self, f: &mut dyn fmt::Write) -> fmt::Result {
        // Escaped as a byte string: std's paths and names read as they are.
        let shown = &self[..self.len().min(SHOWN)];
        write!(f, "b\"{}\"", shown.escape_ascii())?;
        if shown.len() < self.len() {
            write!(f, "..({} bytes)", self.len())?;
        }
        Ok(())
    }
}

impl<'a> Arg<'a> for &'a str {
    const SHAPE: Shape = Shape::word(3);
    fn put<const W: usize>(self, e: &mut Encoder<'a, W>) {
        e.input(self.as_bytes())
    }
    fn take(d: &mut Decoder<'a>) -> Result<Self, WireError> {
        core::str::from_utf8(d.input()?).map_err(|_| WireError("a str that is not UTF-8"))
    }
    fn show(&self, f: &mut dyn fmt::Write) -> fmt::Result {
        let cut = self.floor_char_boundary(SHOWN);
        write!(f, "{:?}", &self[..cut])?;
        if cut < self.len() {
            write!(f, "..({} bytes)", self.len())?;
        }
        Ok(())
    }
}

impl<'a> Arg<'a> for &'a mut [u8] {
    const SHAPE: Shape = Shape::word(2);
    fn put<const W: usize>(self, e: &mut Encoder<'a, W>) {
        e.output(self)
    }
    fn take(d: &mut Decoder<'a>) -> Result<Self, WireError> {
        d.output()
    }
    fn show(&self, f: &mut dyn fmt::Write) -> fmt::Result {
        write!(f, "&mut [{} bytes]", self.len())
    }
}

/// A result type a declared service may return: a [`Plain`] value, or a `Result` of one
/// with an [`Errno`].
pub trait Ret: Sized + fmt::Debug {
    /// The value that travels.
    type Value: Plain;
    /// Whether it is a `Result`.
    const FALLIBLE: bool;
    /// The value, or the failure (host side).
    fn into_wire(self) -> Result<Self::Value, Errno>;
    /// The result from the answer (GPU side); `None` when a service that cannot fail
    /// failed (the transport's `ENOSYS` or `EINVAL`, a handler's panic).
    fn from_wire(v: Result<Self::Value, Errno>) -> Option<Self>;
}

impl<T: Plain> Ret for T {
    type Value = T;
    const FALLIBLE: bool = false;
    fn into_wire(self) -> Result<T, Errno> {
        Ok(self)
    }
    fn from_wire(v: Result<T, Errno>) -> Option<T> {
        v.ok()
    }
}

impl<T: Plain> Ret for Result<T, Errno> {
    type Value = T;
    const FALLIBLE: bool = true;
    fn into_wire(self) -> Result<T, Errno> {
        self
    }
    fn from_wire(v: Result<T, Errno>) -> Option<Self> {
        Some(v)
    }
}

/// Where a value of type `V` travels in the answer.
pub const fn value_place<V>() -> ValuePlace {
    match size_of::<V>() {
        n if n <= VALUE_INLINE => ValuePlace::Result,
        n if n <= VALUE_WORDS => ValuePlace::Words,
        _ => ValuePlace::Bulk,
    }
}

/// See [`value_place`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValuePlace {
    /// In the result, zero-extended.
    Result,
    /// In the slot's `args[1..5]`.
    Words,
    /// At the start of the bulk buffer.
    Bulk,
}

/// The host's answer to a typed call, in the transport's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answered {
    /// The result (see the module's documentation).
    pub result: i64,
    /// The slot's `args[1..5]`, for a value that goes there.
    pub words: Option<[u64; 4]>,
    /// Bytes written at the start of the bulk buffer.
    pub bulk_out: usize,
}

impl Answered {
    /// The answer carrying `v` (host side); `bulk` is the lane's output room, which a
    /// large value or the output buffer of `output_len` bytes fills.
    pub fn encode<V: Plain>(v: Result<V, Errno>, bulk: &mut [u8], output_len: usize) -> Answered {
        let v = match v {
            Err(e) => {
                return Answered {
                    result: -(e.0 as i64),
                    words: None,
                    bulk_out: output_len,
                };
            }
            Ok(v) => v,
        };
        let n = size_of::<V>();
        let bytes = |v: &V| {
            // SAFETY: a `Plain` value's `n` bytes are all initialized.
            unsafe { core::slice::from_raw_parts((v as *const V).cast::<u8>(), n) }
        };
        match value_place::<V>() {
            ValuePlace::Result => {
                let mut b = [0u8; 8];
                b[..n].copy_from_slice(bytes(&v));
                Answered {
                    result: i64::from_le_bytes(b),
                    words: None,
                    bulk_out: output_len,
                }
            }
            // Not beside an output buffer: that answer is read from the slot, where the
            // GPU then looks for the value's words.
            ValuePlace::Words if n <= 8 && output_len == 0 && bits_of(bytes(&v)) < SMALL_VALUE => {
                Answered {
                    result: bits_of(bytes(&v)) as i64,
                    words: None,
                    bulk_out: output_len,
                }
            }
            ValuePlace::Words => {
                let mut w = [0u64; 4];
                // SAFETY: `n <= 32` bytes into the 32 bytes of `w`.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        bytes(&v).as_ptr(),
                        w.as_mut_ptr().cast::<u8>(),
                        n,
                    )
                };
                Answered {
                    result: 0,
                    words: Some(w),
                    bulk_out: output_len,
                }
            }
            ValuePlace::Bulk => {
                bulk[..n].copy_from_slice(bytes(&v));
                Answered {
                    result: 0,
                    words: None,
                    bulk_out: n,
                }
            }
        }
    }

    /// The value this answer carries (GPU side): from the result, the slot's `words`
    /// (`None` when the answer came without them, in the answer word alone), or `bulk`
    /// (the value's bytes copied out of the bulk buffer).
    pub fn decode<V: Plain>(
        result: i64,
        words: Option<&[u64; 4]>,
        bulk: &[u8],
    ) -> Result<V, Errno> {
        if result < 0 {
            return Err(Errno((-result) as i32));
        }
        let n = size_of::<V>();
        let mut out = core::mem::MaybeUninit::<V>::uninit();
        let src: *const u8 = match (value_place::<V>(), words) {
            (ValuePlace::Result, _) | (ValuePlace::Words, None) if n <= 8 => {
                (&raw const result).cast()
            }
            (ValuePlace::Result | ValuePlace::Words, None) => {
                return Err(Errno(crate::errno::EIO));
            }
            (ValuePlace::Words, Some(w)) => w.as_ptr().cast(),
            (ValuePlace::Bulk, _) => {
                if bulk.len() < n {
                    return Err(Errno(crate::errno::EIO));
                }
                bulk.as_ptr()
            }
            (ValuePlace::Result, Some(_)) => (&raw const result).cast(),
        };
        // SAFETY: `src` holds at least `n` bytes (8 in the result, 32 in the words,
        // checked for the bulk), and every bit pattern is a valid `V` (`Plain`).
        unsafe {
            core::ptr::copy_nonoverlapping(src, out.as_mut_ptr().cast::<u8>(), n);
            Ok(out.assume_init())
        }
    }
}

/// The arguments of a host closure ([`HostClosure`]): a tuple of up to four [`Plain`]
/// values, of at most 36 bytes together (a call's fixed part is their bytes after a
/// 4-byte type check, and must fit `args[1..6]`).
pub trait Args: Sized + fmt::Debug {
    /// Their shapes.
    const SHAPES: &'static [Shape];
    /// Adds them to a request (GPU side).
    fn put_all<const W: usize>(self, e: &mut Encoder<'_, W>);
    /// Reads them from a request (host side).
    fn take_all(d: &mut Decoder<'_>) -> Result<Self, WireError>;
}

/// A host function a kernel calls through a handle (AMDGPU.jl's `HostCallHolder`): any
/// `Fn` of up to four [`Plain`] arguments returning a [`Ret`].
pub trait HostClosure<A: Args, R: Ret>: Send + Sync + 'static {
    /// Calls it.
    fn invoke(&self, args: A) -> R;
}

macro_rules! arity {
    ($($a:ident: $t:ident),*) => {
        impl<$($t: Plain),*> Args for ($($t,)*) {
            const SHAPES: &'static [Shape] = &[$(Shape::of::<$t>()),*];
            fn put_all<const W: usize>(self, e: &mut Encoder<'_, W>) {
                let ($($a,)*) = self;
                $(e.plain(&$a);)*
                let _ = e;
            }
            fn take_all(d: &mut Decoder<'_>) -> Result<Self, WireError> {
                let _ = &d;
                Ok(($(d.plain::<$t>()?,)*))
            }
        }

        impl<F, R: Ret, $($t: Plain),*> HostClosure<($($t,)*), R> for F
        where
            F: Fn($($t),*) -> R + Send + Sync + 'static,
        {
            fn invoke(&self, ($($a,)*): ($($t,)*)) -> R {
                self($($a),*)
            }
        }
    };
}
arity!();
arity!(a: A);
arity!(a: A, b: B);
arity!(a: A, b: B, c: C);
arity!(a: A, b: B, c: C, d: D);

/// The fingerprint of a host closure taking `A` and returning `R`: what its handle
/// carries (the low 32 bits) and the host checks on every call.
pub const fn closure_fingerprint<A: Args, R: Ret>() -> u64 {
    let text = if R::FALLIBLE { "fallible" } else { "" };
    fingerprint("closure", text, 0, A::SHAPES, Shape::of::<R::Value>())
}

/// Up to 8 bytes as a little-endian `u64`.
#[inline]
fn bits_of(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(b)
}

/// A call as a declared trait's dispatcher sees it (host side).
pub struct Incoming<'a> {
    /// The lane's arguments.
    pub args: [u64; 6],
    /// The bytes it sent.
    pub input: &'a [u8],
    /// Room for the bytes that go back.
    pub out: &'a mut [u8],
    /// The launch's memory, for [`DeviceSlice`] arguments.
    pub device: Option<&'a dyn DeviceReader>,
}

/// The host half of a declared trait, generated by `service!`: serves method `method`
/// of an implementation `T`, and lists the trait's services.
pub trait Dispatch<T: ?Sized> {
    /// Every method's signature, in declaration order.
    const SERVICES: &'static [Signature];
    /// Decodes the call, runs the method and encodes its answer. With `trace`, writes
    /// the decoded arguments and the result there.
    fn dispatch(
        imp: &T,
        method: usize,
        call: Incoming<'_>,
        trace: Option<&mut dyn fmt::Write>,
    ) -> Result<Answered, WireError>;
}

/// `args[1..6]` as bytes, for [`Decoder::new`].
#[inline]
pub fn args_bytes(args: &[u64; 6]) -> [u8; FIXED_INLINE] {
    let mut b = [0u8; FIXED_INLINE];
    for (i, w) in args[1..].iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_slices_strs_and_a_large_fixed_part_send_input_bytes() {
        let word = <u64 as Arg>::SHAPE;
        assert!(!reads_input(&[]));
        assert!(!reads_input(&[word, word, word, word, word]));
        assert!(!reads_input(&[word, <&mut [u8] as Arg>::SHAPE]));
        assert!(!reads_input(&[<DeviceSlice as Arg>::SHAPE]));
        assert!(reads_input(&[<&[u8] as Arg>::SHAPE]));
        assert!(reads_input(&[word, <&str as Arg>::SHAPE]));
        assert!(reads_input(&[word; 6]), "48 bytes, over the slot's 40");
    }

    #[test]
    fn plain_values_and_slices_round_trip_through_the_fixed_part_and_the_bulk() {
        let mut e = Encoder::<'_, 5>::default();
        (-3i64).put(&mut e);
        "héllo".put(&mut e);
        (&[1u8, 2, 3][..]).put(&mut e);
        2.5f32.put(&mut e);
        let mut out = [0u8; 16];
        (&mut out[..]).put(&mut e);
        let shapes = [
            Shape::of::<i64>(),
            <&str as Arg>::SHAPE,
            <&[u8] as Arg>::SHAPE,
            Shape::of::<f32>(),
            <&mut [u8] as Arg>::SHAPE,
        ];
        assert_eq!(e.fixed().len(), fixed_len(&shapes));
        assert!(fixed_len(&shapes) <= FIXED_INLINE);
        let mut args = [0u64; 6];
        args[1..].copy_from_slice(&e.fixed_words());
        let mut bulk = [0u8; 64];
        let mut at = 0;
        for p in e.inputs() {
            at = round_up(at, 8);
            bulk[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        assert_eq!(at, bulk_len(e.inputs()));
        let ab = args_bytes(&args);
        let mut room = [0xffu8; 64];
        let mut d = Decoder::new(fixed_len(&shapes), &ab, &bulk[..at], &mut room, None).unwrap();
        assert_eq!(i64::take(&mut d), Ok(-3));
        assert_eq!(<&str>::take(&mut d), Ok("héllo"));
        assert_eq!(<&[u8]>::take(&mut d), Ok(&[1u8, 2, 3][..]));
        assert_eq!(f32::take(&mut d), Ok(2.5));
        let o = <&mut [u8]>::take(&mut d).unwrap();
        assert_eq!(o, &[0u8; 16][..], "the output buffer starts zeroed");
    }

    #[test]
    fn a_length_past_the_bytes_sent_is_refused() {
        let mut args = [0u64; 6];
        args[1] = 1000;
        let ab = args_bytes(&args);
        let shapes = [<&[u8] as Arg>::SHAPE];
        let mut room = [0u8; 8];
        let mut d = Decoder::new(fixed_len(&shapes), &ab, &[0u8; 16], &mut room, None).unwrap();
        assert!(<&[u8]>::take(&mut d).is_err());
        let mut room = [0u8; 8];
        let mut d = Decoder::new(8, &ab, &[], &mut room, None).unwrap();
        assert!(
            <&mut [u8]>::take(&mut d).is_err(),
            "an output over the room"
        );
    }

    #[test]
    fn values_travel_in_the_result_the_words_or_the_bulk() {
        let mut bulk = [0u8; 128];
        let a = Answered::encode(Ok(-1.5f32), &mut bulk, 0);
        assert!(a.result >= 0 && a.words.is_none());
        assert_eq!(Answered::decode::<f32>(a.result, None, &[]), Ok(-1.5));
        let a = Answered::encode(Ok(u64::MAX), &mut bulk, 0);
        assert_eq!(a.result, 0);
        let w = a.words.unwrap();
        assert_eq!(
            Answered::decode::<u64>(a.result, Some(&w), &[]),
            Ok(u64::MAX)
        );
        let a = Answered::encode(Ok(12345u64), &mut bulk, 0);
        assert_eq!(
            (a.result, a.words),
            (12345, None),
            "a small u64 fits the result"
        );
        assert_eq!(Answered::decode::<u64>(a.result, None, &[]), Ok(12345));
        let a = Answered::encode(Ok(12345u64), &mut bulk, 10);
        let w = a.words.expect("beside an output buffer, in the words");
        assert_eq!(Answered::decode::<u64>(a.result, Some(&w), &[]), Ok(12345));
        let a = Answered::encode(Ok(-1i64), &mut bulk, 0);
        assert!(a.words.is_some(), "negative bits do not fit the result");
        assert_eq!(
            Answered::decode::<i64>(a.result, a.words.as_ref(), &[]),
            Ok(-1)
        );
        let a = Answered::encode(Ok([1u32, 2, 3]), &mut bulk, 0);
        assert_eq!(
            Answered::decode::<[u32; 3]>(a.result, a.words.as_ref(), &[]),
            Ok([1, 2, 3])
        );
        let big = [7u64; 9];
        let a = Answered::encode(Ok(big), &mut bulk, 0);
        assert_eq!(a.bulk_out, 72);
        assert_eq!(Answered::decode::<[u64; 9]>(0, None, &bulk[..72]), Ok(big));
        let a = Answered::encode::<u64>(Err(Errno(2)), &mut bulk, 0);
        assert_eq!(Answered::decode::<u64>(a.result, None, &[]), Err(Errno(2)));
    }

    #[test]
    fn fingerprints_tell_signatures_layouts_and_ids_apart() {
        let s = [Shape::of::<f32>()];
        let base = fingerprint(
            "A.f",
            "fn f(&self, x: f32) -> f32",
            0,
            &s,
            Shape::of::<f32>(),
        );
        assert_ne!(
            base,
            fingerprint(
                "A.f",
                "fn f(&self, x: f64) -> f32",
                0,
                &s,
                Shape::of::<f32>()
            )
        );
        assert_ne!(
            base,
            fingerprint(
                "A.f",
                "fn f(&self, x: f32) -> f32",
                0,
                &[Shape::of::<f64>()],
                Shape::of::<f32>()
            )
        );
        assert_ne!(
            base,
            fingerprint(
                "A.f",
                "fn f(&self, x: f32) -> f32",
                9,
                &s,
                Shape::of::<f32>()
            )
        );
    }

    #[test]
    fn closures_of_other_types_have_other_fingerprints() {
        let f = closure_fingerprint::<(f32,), f32>();
        assert_ne!(f, closure_fingerprint::<(i32,), i32>());
        assert_ne!(f, closure_fingerprint::<(f32,), Result<f32, Errno>>());
        assert_ne!(f, closure_fingerprint::<(f32, f32), f32>());
        assert_eq!(f, closure_fingerprint::<(f32,), f32>());
    }

    #[test]
    fn slots_parse_back() {
        const TEXT: &str = "fn f(&self) -> u32";
        let sig = Signature {
            name: "A.f",
            text: TEXT,
            id: 7,
            fingerprint: 0x1234_5678_9abc_def0,
            reads_input: false,
        };
        let slot = ServiceSlot::<{ 3 + TEXT.len() }>::new(&sig);
        // SAFETY: the slot is repr(C) plain data; reading its bytes is what the host does.
        let bytes = unsafe {
            core::slice::from_raw_parts(
                (&raw const slot).cast::<u8>(),
                size_of::<ServiceSlot<{ 3 + TEXT.len() }>>(),
            )
        };
        assert_eq!(bytes[..SLOT_HEADER], sig.slot_header());
        assert_eq!(&bytes[SLOT_HEADER..SLOT_HEADER + 3], b"A.f");
        let r = SlotRecord::parse(bytes).unwrap();
        assert_eq!(
            r,
            SlotRecord {
                id: 7,
                name: "A.f",
                text: TEXT,
                fingerprint: sig.fingerprint
            }
        );
    }
}
