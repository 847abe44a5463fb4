//! Copies between host memory and the GPU-writable port. The GPU may write a port at any
//! moment (a buggy or hostile kernel ignores the protocol), so the host never holds a
//! reference into it: bytes cross with relaxed atomic accesses, which compile to plain
//! loads and stores but make a concurrent GPU write a defined (if useless) race instead
//! of undefined behaviour.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU8, AtomicU64};

/// Replaces `into` with the `n` bytes of port memory at `src`, reading whole words:
/// up to `n` rounded up to 8, which must lie within the buffer's `cap` bytes.
///
/// # Safety
/// `src` must be 8-byte aligned, and `src..src + cap` mapped, readable memory for the
/// call's duration; `n <= cap` and `cap` a multiple of 8.
pub(crate) unsafe fn copy_in(src: *const u8, n: usize, cap: usize, into: &mut Vec<u8>) {
    debug_assert!(n <= cap && cap.is_multiple_of(8) && src.align_offset(8) == 0);
    let words = n.div_ceil(8);
    into.clear();
    into.reserve(words * 8);
    let dst = into.as_mut_ptr().cast::<u64>();
    for i in 0..words {
        // SAFETY: word `i` ends at `8 * words <= cap` (`n <= cap`, `cap` a multiple of 8)
        // and is 8-aligned: the caller's contract. `dst` has room for `words` words
        // (reserved above), written unaligned.
        unsafe {
            let w = (*src.add(i * 8).cast::<AtomicU64>()).load(Relaxed);
            dst.add(i).write_unaligned(w);
        }
    }
    // SAFETY: the first `n <= 8 * words` bytes were written above.
    unsafe { into.set_len(n) };
}

/// Copies `src` from host memory into the port memory at `dst`.
///
/// # Safety
/// `dst..dst + src.len()` must be mapped, writable memory for the call's duration.
pub(crate) unsafe fn copy_out(src: &[u8], dst: *mut u8) {
    let mut i = 0;
    if dst.align_offset(8) == 0 {
        while i + 8 <= src.len() {
            let w = u64::from_ne_bytes(src[i..i + 8].try_into().expect("8 bytes"));
            // SAFETY: in range and 8-aligned (the caller's contract and the check above).
            unsafe { &*dst.add(i).cast::<AtomicU64>() }.store(w, Relaxed);
            i += 8;
        }
    }
    while i < src.len() {
        // SAFETY: in range (the caller's contract).
        unsafe { &*dst.add(i).cast::<AtomicU8>() }.store(src[i], Relaxed);
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_round_trip_at_any_length() {
        let src: Vec<u8> = (0..100u8).collect();
        for start in [0, 1, 5, 8] {
            for len in [0, 1, 7, 8, 9, 63, 91 - start] {
                let mut port = vec![0u64; 16];
                let base = port.as_mut_ptr().cast::<u8>();
                // SAFETY: `start + len <= 100 < 128`, inside `port`.
                unsafe { copy_out(&src[..len], base.add(start)) };
                let mut back = Vec::new();
                // SAFETY: `port` is 8-aligned, 128 bytes; `start + len` rounded up fits.
                unsafe { copy_in(base, start + len, 128, &mut back) };
                assert_eq!(back[start..], src[..len], "start {start} len {len}");
            }
        }
    }
}
