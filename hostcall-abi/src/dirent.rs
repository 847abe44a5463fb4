//! `Getdents` records: what the host sends for each directory entry, packed back to
//! back in the bulk buffer. `.` and `..` are not sent (std skips them anyway).
//!
//! | bytes | field |
//! | --- | --- |
//! | 8 | inode number, little-endian |
//! | 1 | type, as Linux's `d_type` (`DT_REG`, `DT_DIR`, `DT_LNK`, ...) |
//! | 1 | name length `n` (1..=255, [`crate::NAME_MAX`]) |
//! | n | the name, no NUL |

/// Bytes of a record before its name.
pub const HEADER: usize = 10;

/// Linux `d_type` values.
pub mod kind {
    #![allow(missing_docs)] // the names are Linux's
    pub const DT_UNKNOWN: u8 = 0;
    pub const DT_FIFO: u8 = 1;
    pub const DT_CHR: u8 = 2;
    pub const DT_DIR: u8 = 4;
    pub const DT_BLK: u8 = 6;
    pub const DT_REG: u8 = 8;
    pub const DT_LNK: u8 = 10;
    pub const DT_SOCK: u8 = 12;
}

/// One entry, borrowed from a buffer of records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Inode number.
    pub ino: u64,
    /// `d_type`.
    pub kind: u8,
    /// File name (no NUL).
    pub name: &'a [u8],
}

impl Record<'_> {
    /// Bytes the record takes.
    pub fn len(&self) -> usize {
        HEADER + self.name.len()
    }

    /// Whether the name is empty (never, in a record the host sent).
    pub fn is_empty(&self) -> bool {
        self.name.is_empty()
    }

    /// Writes the record at the start of `out`; `None` if it does not fit or the name is
    /// empty or longer than [`crate::NAME_MAX`].
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let n = self.name.len();
        if n == 0 || n > crate::NAME_MAX || out.len() < HEADER + n {
            return None;
        }
        out[..8].copy_from_slice(&self.ino.to_le_bytes());
        out[8] = self.kind;
        out[9] = n as u8;
        out[HEADER..HEADER + n].copy_from_slice(self.name);
        Some(HEADER + n)
    }
}

/// The first record of `buf` and the bytes after it; `None` at the end or on a record
/// that does not fit.
pub fn decode(buf: &[u8]) -> Option<(Record<'_>, &[u8])> {
    let header = buf.get(..HEADER)?;
    let n = header[9] as usize;
    let name = buf.get(HEADER..HEADER + n).filter(|n| !n.is_empty())?;
    let ino = u64::from_le_bytes(header[..8].try_into().ok()?);
    Some((
        Record {
            ino,
            kind: header[8],
            name,
        },
        &buf[HEADER + n..],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_ones_are_refused() {
        let mut buf = [0u8; 64];
        let a = Record {
            ino: 7,
            kind: kind::DT_DIR,
            name: b"sub",
        };
        let b = Record {
            ino: u64::MAX,
            kind: kind::DT_REG,
            name: b"f.txt",
        };
        let n = a.encode(&mut buf).unwrap();
        let m = b.encode(&mut buf[n..]).unwrap();
        let (got_a, rest) = decode(&buf[..n + m]).unwrap();
        let (got_b, rest) = decode(rest).unwrap();
        assert_eq!((got_a, got_b, rest.len()), (a, b, 0));
        assert_eq!(decode(rest), None);
        assert_eq!(
            Record {
                ino: 1,
                kind: 0,
                name: b""
            }
            .encode(&mut buf),
            None
        );
        assert_eq!(
            Record {
                ino: 1,
                kind: 0,
                name: &[b'x'; 256]
            }
            .encode(&mut [0; 300]),
            None
        );
        assert_eq!(b.encode(&mut [0; 12]), None);
        // A length running past the buffer ends the list instead of reading beyond it.
        let mut cut = [0u8; 12];
        cut[9] = 200;
        assert_eq!(decode(&cut), None);
    }
}
