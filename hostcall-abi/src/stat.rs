//! The x86_64 Linux `struct stat` that std's `fstat64`/`stat64` expect on the GPU (libc
//! is compiled there as x86_64). The host encodes it field by field, never by copying its
//! own struct, so a host of another architecture produces the same bytes.

/// Bytes in an x86_64 Linux `struct stat`.
pub const STAT_SIZE: usize = 144;

/// The fields std reads from `struct stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)] // the names are POSIX's
pub struct FileStat {
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: i64,
    pub blksize: i64,
    pub blocks: i64,
    pub atime: (i64, i64),
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

impl FileStat {
    /// The x86_64 layout: offsets as in glibc's `bits/struct_stat.h` for x86_64.
    pub fn encode(&self) -> [u8; STAT_SIZE] {
        let mut b = [0u8; STAT_SIZE];
        let mut put = |off: usize, bytes: &[u8]| b[off..off + bytes.len()].copy_from_slice(bytes);
        put(0, &self.dev.to_le_bytes());
        put(8, &self.ino.to_le_bytes());
        put(16, &self.nlink.to_le_bytes());
        put(24, &self.mode.to_le_bytes());
        put(28, &self.uid.to_le_bytes());
        put(32, &self.gid.to_le_bytes());
        put(40, &self.rdev.to_le_bytes());
        put(48, &self.size.to_le_bytes());
        put(56, &self.blksize.to_le_bytes());
        put(64, &self.blocks.to_le_bytes());
        for (off, (s, ns)) in [(72, self.atime), (88, self.mtime), (104, self.ctime)] {
            put(off, &s.to_le_bytes());
            put(off + 8, &ns.to_le_bytes());
        }
        b
    }

    /// Reads back what [`FileStat::encode`] wrote (used by tests and the emulator).
    pub fn decode(b: &[u8; STAT_SIZE]) -> FileStat {
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
        let i64_at = |o: usize| u64_at(o) as i64;
        FileStat {
            dev: u64_at(0),
            ino: u64_at(8),
            nlink: u64_at(16),
            mode: u32_at(24),
            uid: u32_at(28),
            gid: u32_at(32),
            rdev: u64_at(40),
            size: i64_at(48),
            blksize: i64_at(56),
            blocks: i64_at(64),
            atime: (i64_at(72), i64_at(80)),
            mtime: (i64_at(88), i64_at(96)),
            ctime: (i64_at(104), i64_at(112)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        let s = FileStat {
            dev: 1,
            ino: 2,
            nlink: 3,
            mode: 0o100644,
            uid: 5,
            gid: 6,
            rdev: 7,
            size: -8,
            blksize: 4096,
            blocks: 10,
            atime: (11, 12),
            mtime: (13, 14),
            ctime: (15, 16),
        };
        let b = s.encode();
        assert_eq!(&b[48..56], &(-8i64).to_le_bytes());
        assert_eq!(FileStat::decode(&b), s);
    }
}
