//! A request's encoding: the GPU's [`Encoder`], the host's [`Decoder`], and the
//! argument types ([`Arg`]) that travel between them.

use core::fmt;
use core::marker::PhantomData;

use super::{Errno, FIXED_INLINE, MAX_INPUTS, Plain, Shape, round_up};

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
