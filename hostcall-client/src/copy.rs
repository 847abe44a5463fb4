//! Copies between a lane's buffers and its bulk buffer in host memory. Every access to
//! host memory crosses PCIe, so the copies move whole 8-byte words: a byte loop would
//! cost one bus transaction per byte. Reads are volatile (strong, system scope on the
//! GPU) so that no cache line filled before the host's answer can serve them.

use hostcall_abi::BULK_PER_LANE;

const WORD: usize = 8;

/// Copies `src` (at most `BULK_PER_LANE` bytes) to the start of `bulk`.
///
/// # Safety
/// `bulk` must be valid for writes of `BULK_PER_LANE` bytes and 8-byte aligned, and no
/// other thread may access it during the call.
pub(crate) unsafe fn copy_to_bulk(bulk: *mut [u8; BULK_PER_LANE], src: &[u8]) {
    let dst = bulk.cast::<u64>();
    let (words, rest) = src.as_chunks::<WORD>();
    for (i, w) in words.iter().enumerate() {
        // SAFETY: `i * 8 + 8 <= src.len() <= BULK_PER_LANE`, inside the aligned buffer.
        unsafe { dst.add(i).write(u64::from_le_bytes(*w)) };
    }
    if !rest.is_empty() {
        let mut last = [0u8; WORD];
        last[..rest.len()].copy_from_slice(rest);
        // SAFETY: the word that holds the tail still lies within the buffer, since
        // `src.len() <= BULK_PER_LANE` and the buffer is a whole number of words.
        unsafe { dst.add(words.len()).write(u64::from_le_bytes(last)) };
    }
}

/// Fills `dst` (at most `BULK_PER_LANE` bytes) from the start of `bulk`.
///
/// # Safety
/// `bulk` must be valid for reads of `BULK_PER_LANE` bytes and 8-byte aligned, and no
/// other thread may write it during the call.
pub(crate) unsafe fn copy_from_bulk(dst: &mut [u8], bulk: *const [u8; BULK_PER_LANE]) {
    let src = bulk.cast::<u64>();
    let (words, rest) = dst.as_chunks_mut::<WORD>();
    let n = words.len();
    for (i, w) in words.iter_mut().enumerate() {
        // SAFETY: `i * 8 + 8 <= dst.len() <= BULK_PER_LANE`, inside the aligned buffer.
        *w = unsafe { src.add(i).read_volatile() }.to_le_bytes();
    }
    if !rest.is_empty() {
        // SAFETY: the word holding the tail lies within the buffer (see copy_to_bulk).
        let last = unsafe { src.add(n).read_volatile() }.to_le_bytes();
        let len = rest.len();
        rest.copy_from_slice(&last[..len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(align(8))]
    struct Bulk([u8; BULK_PER_LANE]);

    #[test]
    fn round_trips_every_length_near_word_edges() {
        for len in [0, 1, 7, 8, 9, 15, 16, 100, BULK_PER_LANE - 1, BULK_PER_LANE] {
            let src: [u8; BULK_PER_LANE] = core::array::from_fn(|i| (i * 7 + len) as u8);
            let mut bulk = Bulk([0xAA; BULK_PER_LANE]);
            let mut out = [0u8; BULK_PER_LANE];
            // SAFETY: `bulk` is a local, aligned, full-size buffer.
            unsafe {
                copy_to_bulk(&mut bulk.0, &src[..len]);
                copy_from_bulk(&mut out[..len], &bulk.0);
            }
            assert_eq!(&out[..len], &src[..len], "len {len}");
        }
    }
}
