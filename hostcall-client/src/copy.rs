//! Copies between a lane's buffers and its bulk buffer in host memory. Every access to
//! host memory crosses PCIe, so the copies move whole 8-byte words: a byte loop would
//! cost one bus transaction per byte. Reads are volatile (strong, system scope on the
//! GPU) so that no cache line filled before the host's answer can serve them.

const WORD: usize = 8;

/// Copies `src` to `dst`, whole words at a time.
///
/// # Safety
/// `dst` must be 8-byte aligned and valid for writes of `src.len()` bytes rounded up to
/// a whole word, and no other thread may access them during the call.
pub(crate) unsafe fn copy_to_bulk(dst: *mut u8, src: &[u8]) {
    let dst = dst.cast::<u64>();
    let (words, rest) = src.as_chunks::<WORD>();
    if src.as_ptr().cast::<u64>().is_aligned() {
        let from = src.as_ptr().cast::<u64>();
        for i in 0..words.len() {
            // SAFETY: `i < words.len()`: inside both buffers; `from` is aligned.
            unsafe { dst.add(i).write(from.add(i).read()) };
        }
    } else {
        for (i, w) in words.iter().enumerate() {
            // SAFETY: `i < words.len()`, inside the buffer.
            unsafe { dst.add(i).write(u64::from_le_bytes(*w)) };
        }
    }
    if !rest.is_empty() {
        let mut last = [0u8; WORD];
        last[..rest.len()].copy_from_slice(rest);
        // SAFETY: the word holding the tail is inside `dst` (its length rounds up).
        unsafe { dst.add(words.len()).write(u64::from_le_bytes(last)) };
    }
}

/// Fills `dst` from `src`, whole words at a time, with volatile reads.
///
/// # Safety
/// `src` must be 8-byte aligned and valid for reads of `dst.len()` bytes rounded up to a
/// whole word, and no other thread may write them during the call.
pub(crate) unsafe fn copy_from_bulk(dst: &mut [u8], src: *const u8) {
    let src = src.cast::<u64>();
    let n = dst.len() / WORD;
    if dst.as_ptr().cast::<u64>().is_aligned() {
        let to = dst.as_mut_ptr().cast::<u64>();
        for i in 0..n {
            // SAFETY: `i < n`: inside both buffers; `to` is aligned.
            unsafe { to.add(i).write(src.add(i).read_volatile()) };
        }
    } else {
        for (i, w) in dst.as_chunks_mut::<WORD>().0.iter_mut().enumerate() {
            // SAFETY: `i < n`, inside the buffer.
            *w = unsafe { src.add(i).read_volatile() }.to_le_bytes();
        }
    }
    let rest = &mut dst[n * WORD..];
    if !rest.is_empty() {
        // SAFETY: the word holding the tail is inside `src` (its length rounds up).
        let last = unsafe { src.add(n).read_volatile() }.to_le_bytes();
        let len = rest.len();
        rest.copy_from_slice(&last[..len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: usize = 4096;

    #[repr(align(8))]
    struct Bulk([u8; N + 8]);

    #[test]
    fn round_trips_every_length_near_word_edges_aligned_or_not() {
        for offset in [0, 1, 3] {
            for len in [0, 1, 7, 8, 9, 15, 16, 100, N - 1, N] {
                let src: [u8; N + 3] = core::array::from_fn(|i| (i * 7 + len) as u8);
                let src = &src[offset..offset + len];
                let mut bulk = Bulk([0xAA; N + 8]);
                let mut out = [0u8; N + 3];
                let out = &mut out[offset..offset + len];
                // SAFETY: `bulk` is a local, aligned buffer a word longer than any copy.
                unsafe {
                    copy_to_bulk(bulk.0.as_mut_ptr(), src);
                    copy_from_bulk(out, bulk.0.as_ptr());
                }
                assert_eq!(out, src, "len {len} offset {offset}");
            }
        }
    }
}
