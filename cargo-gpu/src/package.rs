//! A program packaged to run where it was not built: this runner's own executable with
//! the GPU module and the run's options appended, so one file carries to a GPU machine.
//!
//! Layout, after the runner's bytes: a JSON header, the PTX, the cubins, then a 24-byte
//! trailer (the header's length and everything appended, each a little-endian `u64`,
//! then [`MAGIC`]). An ELF loader ignores bytes past its segments; `strip` does not, so
//! strip the runner before packaging, never the package.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use ptx_builder::PtxModule;

/// Ends every packaged program: "hostcall program, layout 1".
const MAGIC: &[u8; 8] = b"HCPROG01";
const TRAILER: u64 = 24;

/// A GPU module with the program's name and the options it runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// `argv[0]`.
    pub name: String,
    /// The run's options as arguments (`RunOptions::to_args`).
    pub options: Vec<String>,
    pub ptx: String,
    pub cubins: Vec<(u32, Vec<u8>)>,
    pub sha256: String,
    /// The stack each GPU thread needs (`PtxModule::stack_bytes`), if known.
    pub stack_bytes: Option<u64>,
    /// The file it was loaded from, which `env::current_exe` names where a grant holds
    /// it: the packaged executable, or the module a build left (not recorded).
    pub file: PathBuf,
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

impl Program {
    /// The module a build left, read into memory.
    pub fn from_module(m: &PtxModule, name: &str, options: Vec<String>) -> io::Result<Program> {
        let mut cubins = Vec::new();
        for (sm, path) in &m.cubins {
            cubins.push((*sm, std::fs::read(path)?));
        }
        Ok(Program {
            name: name.to_owned(),
            options,
            ptx: std::fs::read_to_string(&m.ptx)?,
            cubins,
            sha256: m.sha256.clone(),
            stack_bytes: m.stack_bytes,
            file: m.ptx.clone(),
        })
    }

    /// Writes `runner` with this program appended to `out`, executable.
    pub fn write_executable(&self, runner: &Path, out: &Path) -> io::Result<()> {
        let header = serde_json::json!({
            "name": self.name,
            "options": self.options,
            "sha256": self.sha256,
            "stack_bytes": self.stack_bytes,
            "ptx": self.ptx.len(),
            "cubins": self.cubins.iter().map(|(sm, c)| [*sm as usize, c.len()]).collect::<Vec<_>>(),
        })
        .to_string();
        let mut f = File::create(out)?;
        io::copy(&mut File::open(runner)?, &mut f)?;
        f.write_all(header.as_bytes())?;
        f.write_all(self.ptx.as_bytes())?;
        for (_, c) in &self.cubins {
            f.write_all(c)?;
        }
        let appended =
            header.len() + self.ptx.len() + self.cubins.iter().map(|(_, c)| c.len()).sum::<usize>();
        f.write_all(&(header.len() as u64).to_le_bytes())?;
        f.write_all(&(appended as u64).to_le_bytes())?;
        f.write_all(MAGIC)?;
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o755))
    }

    /// The program appended to the executable `exe`, if any.
    pub fn attached_to(exe: &Path) -> io::Result<Option<Program>> {
        let mut f = File::open(exe)?;
        let len = f.metadata()?.len();
        if len < TRAILER {
            return Ok(None);
        }
        let mut trailer = [0u8; TRAILER as usize];
        f.seek(SeekFrom::End(-(TRAILER as i64)))?;
        f.read_exact(&mut trailer)?;
        if &trailer[16..] != MAGIC {
            return Ok(None);
        }
        let word = |i: usize| u64::from_le_bytes(trailer[i..i + 8].try_into().expect("8 bytes"));
        let (header_len, appended) = (word(0), word(8));
        if appended.checked_add(TRAILER).is_none_or(|end| end > len) || header_len > appended {
            return Err(invalid(format!(
                "{}: a packaged program cut short",
                exe.display()
            )));
        }
        f.seek(SeekFrom::Start(len - TRAILER - appended))?;
        let mut bytes = vec![0u8; appended as usize];
        f.read_exact(&mut bytes)?;
        let (header, mut rest) = bytes.split_at(header_len as usize);
        let h: serde_json::Value = serde_json::from_slice(header)
            .map_err(|e| invalid(format!("{}: the program's header: {e}", exe.display())))?;
        let bad = || {
            invalid(format!(
                "{}: the program's header is malformed",
                exe.display()
            ))
        };
        let mut take = |n: u64| -> io::Result<Vec<u8>> {
            if n > rest.len() as u64 {
                return Err(bad());
            }
            let (a, b) = rest.split_at(n as usize);
            rest = b;
            Ok(a.to_vec())
        };
        let ptx =
            String::from_utf8(take(h["ptx"].as_u64().ok_or_else(bad)?)?).map_err(|_| bad())?;
        let mut cubins = Vec::new();
        for c in h["cubins"].as_array().ok_or_else(bad)? {
            let (sm, n) = (
                c[0].as_u64().ok_or_else(bad)?,
                c[1].as_u64().ok_or_else(bad)?,
            );
            cubins.push((u32::try_from(sm).map_err(|_| bad())?, take(n)?));
        }
        let strings = |v: &serde_json::Value| -> Option<Vec<String>> {
            v.as_array()?
                .iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect()
        };
        if !rest.is_empty() {
            return Err(damaged(
                exe,
                &format!("{} bytes its header does not account for", rest.len()),
            ));
        }
        let program = Program {
            name: h["name"].as_str().ok_or_else(bad)?.to_owned(),
            options: strings(&h["options"]).ok_or_else(bad)?,
            ptx,
            cubins,
            sha256: h["sha256"].as_str().ok_or_else(bad)?.to_owned(),
            stack_bytes: h["stack_bytes"].as_u64(),
            file: exe.to_owned(),
        };
        match program.damage() {
            Some(why) => Err(damaged(exe, &why)),
            None => Ok(Some(program)),
        }
    }

    /// What makes this program unfit to hand to the driver, which takes a cubin by its
    /// address alone (`cuModuleLoadData` has no length: it reads as far as the ELF's own
    /// tables say) and the PTX up to a NUL, and whose reports cut the digest at 12 bytes.
    /// A file's tail is checked here, when it is read, so that a damaged one is refused
    /// before any GPU is looked for.
    fn damage(&self) -> Option<String> {
        if self.sha256.len() != 64
            || !self
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Some("its digest is not 64 hex digits".to_owned());
        }
        if self.ptx.contains('\0') {
            return Some("its PTX holds a NUL byte".to_owned());
        }
        self.cubins.iter().find_map(|(sm, c)| {
            check_cubin(c)
                .err()
                .map(|why| format!("its cubin for sm_{sm} {why}"))
        })
    }
}

/// The error for a packaged program whose tail is not what `cargo gpu build` writes.
fn damaged(exe: &Path, why: &str) -> io::Error {
    invalid(format!(
        "{} is a damaged packaged program: {why}, so it was altered or cut after \
         `cargo gpu build` wrote it",
        exe.display()
    ))
}

/// `e_machine` of a CUDA cubin.
const EM_CUDA: u64 = 190;
/// The size of an ELF64 file header, and the least of a program and a section header.
const ELF64_HEADER: usize = 64;
const ELF64_SEGMENT: u64 = 56;
const ELF64_SECTION: u64 = 64;
/// The type of a section that takes no bytes of the file (`.bss`, `.nv.shared.*`).
const SHT_NOBITS: u64 = 8;

/// Whether `c` is a CUDA ELF whose program and section tables, and every segment and
/// section they name, lie within it (else why not): what the driver reads of a cubin is
/// what those tables say.
fn check_cubin(c: &[u8]) -> Result<(), &'static str> {
    const NOT_ELF: &str = "is not a CUDA ELF file";
    const CUT: &str = "is cut short";
    // A little-endian field of `n` bytes at `at`.
    let field = |at: u64, n: usize| -> Result<u64, &'static str> {
        let at = usize::try_from(at).map_err(|_| CUT)?;
        let bytes = c.get(at..at.checked_add(n).ok_or(CUT)?).ok_or(CUT)?;
        let mut word = [0u8; 8];
        word[..n].copy_from_slice(bytes);
        Ok(u64::from_le_bytes(word))
    };
    let within = |offset: u64, size: u64| {
        offset
            .checked_add(size)
            .is_some_and(|end| end <= c.len() as u64)
    };
    if c.len() < ELF64_HEADER || !c.starts_with(b"\x7fELF\x02\x01") || field(18, 2)? != EM_CUDA {
        return Err(NOT_ELF);
    }
    // Where a table's entries start, given where the file header holds the table's
    // offset, its count of entries and their size.
    let entries = |offset_at: u64, count_at: u64, size_at: u64, least: u64| {
        let (start, n, each) = (
            field(offset_at, 8)?,
            field(count_at, 2)?,
            field(size_at, 2)?,
        );
        if n == 0 {
            return Ok(Vec::new());
        }
        if each < least {
            return Err(NOT_ELF);
        }
        if !within(start, n * each) {
            return Err(CUT);
        }
        Ok((0..n).map(|i| start + i * each).collect::<Vec<u64>>())
    };
    // e_phoff, e_phnum, e_phentsize; each segment's p_offset and p_filesz.
    for p in entries(32, 56, 54, ELF64_SEGMENT)? {
        if !within(field(p + 8, 8)?, field(p + 32, 8)?) {
            return Err(CUT);
        }
    }
    // No section count with a section table: ELF's extended numbering, never ptxas's.
    if field(60, 2)? == 0 && field(40, 8)? != 0 {
        return Err(NOT_ELF);
    }
    // e_shoff, e_shnum, e_shentsize; each section's sh_type, sh_offset and sh_size.
    for s in entries(40, 60, 58, ELF64_SECTION)? {
        let (kind, offset, size) = (field(s + 4, 4)?, field(s + 24, 8)?, field(s + 32, 8)?);
        if kind != SHT_NOBITS && !within(offset, size) {
            return Err(CUT);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest cubin the reader accepts: an ELF64 header for CUDA, with no
    /// sections.
    fn cubin_fixture() -> Vec<u8> {
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[18..20].copy_from_slice(&190u16.to_le_bytes());
        elf[54..56].copy_from_slice(&56u16.to_le_bytes());
        elf[58..60].copy_from_slice(&64u16.to_le_bytes());
        elf
    }

    fn program() -> Program {
        Program {
            name: "wc".into(),
            options: vec!["--grant".into(), "/tmp:/data".into(), "--stdin".into()],
            ptx: ".version 8.0\n".into(),
            cubins: vec![(90, cubin_fixture()), (100, cubin_fixture())],
            sha256: "ab".repeat(32),
            stack_bytes: Some(43_008),
            file: "target/wc.ptx".into(),
        }
    }

    #[test]
    fn a_packaged_program_reads_back_from_its_executable() {
        let dir = tempfile::tempdir().unwrap();
        let runner = dir.path().join("runner");
        std::fs::write(&runner, b"\x7fELF and the rest of a runner").unwrap();
        assert_eq!(Program::attached_to(&runner).unwrap(), None);
        let out = dir.path().join("wc.gpu");
        program().write_executable(&runner, &out).unwrap();
        let file = out.clone();
        assert_eq!(
            Program::attached_to(&out).unwrap(),
            Some(Program { file, ..program() }),
            "read back, named after the file it is attached to"
        );
        let bytes = std::fs::read(&out).unwrap();
        assert!(bytes.starts_with(b"\x7fELF and the rest of a runner"));
    }

    /// A tampered or truncated tail is refused with a sentence when the
    /// file is read, and nothing panics.
    #[test]
    fn a_tampered_package_is_refused_when_read() {
        let dir = tempfile::tempdir().unwrap();
        let runner = dir.path().join("runner");
        std::fs::write(&runner, b"runner").unwrap();
        let refusal = |p: Program| {
            let out = dir.path().join("p");
            p.write_executable(&runner, &out).unwrap();
            Program::attached_to(&out).unwrap_err().to_string()
        };
        let cubin = |c: Vec<u8>| Program {
            cubins: vec![(90, c)],
            ..program()
        };
        let empty = refusal(cubin(Vec::new()));
        assert!(
            empty.contains("its cubin for sm_90 is not a CUDA ELF file"),
            "{empty}"
        );
        let mut cut = cubin_fixture();
        cut.truncate(40);
        let short = refusal(cubin(cut));
        assert!(
            short.contains("its cubin for sm_90 is not a CUDA ELF file"),
            "{short}"
        );
        let mut beyond = cubin_fixture();
        beyond[40..48].copy_from_slice(&1_000u64.to_le_bytes());
        beyond[60..62].copy_from_slice(&1u16.to_le_bytes());
        let sections = refusal(cubin(beyond));
        assert!(
            sections.contains("its cubin for sm_90 is cut short"),
            "{sections}"
        );
        for digest in [
            "é".repeat(32),
            "ab".into(),
            "AB".repeat(32),
            "zz".repeat(32),
        ] {
            let bad = refusal(Program {
                sha256: digest.clone(),
                ..program()
            });
            assert!(
                bad.contains("its digest is not 64 hex digits"),
                "{digest}: {bad}"
            );
        }
        let nul = refusal(Program {
            ptx: ".version 8.0\0".into(),
            ..program()
        });
        assert!(nul.contains("its PTX holds a NUL byte"), "{nul}");
        let out = dir.path().join("p");
        program().write_executable(&runner, &out).unwrap();
        let good = std::fs::read(&out).unwrap();
        let tail = good.len() - TRAILER as usize;
        for appended in [u64::MAX, u64::MAX - TRAILER + 1, u64::MAX / 2] {
            let mut bad = good.clone();
            bad[tail + 8..tail + 16].copy_from_slice(&appended.to_le_bytes());
            std::fs::write(&out, &bad).unwrap();
            let err = Program::attached_to(&out).unwrap_err().to_string();
            assert!(
                err.ends_with("a packaged program cut short"),
                "{appended}: {err}"
            );
        }
        let mut trailing = good.clone();
        let appended = u64::from_le_bytes(good[tail + 8..tail + 16].try_into().unwrap());
        trailing.splice(tail..tail, [0u8; 5]);
        trailing[tail + 5 + 8..tail + 5 + 16].copy_from_slice(&(appended + 5).to_le_bytes());
        std::fs::write(&out, &trailing).unwrap();
        let err = Program::attached_to(&out).unwrap_err().to_string();
        assert!(
            err.contains("bytes its header does not account for"),
            "{err}"
        );
    }

    #[test]
    fn a_package_cut_short_is_an_error_not_a_runner() {
        let dir = tempfile::tempdir().unwrap();
        let runner = dir.path().join("runner");
        std::fs::write(&runner, b"runner").unwrap();
        let out = dir.path().join("p");
        program().write_executable(&runner, &out).unwrap();
        let bytes = std::fs::read(&out).unwrap();
        // The runner and most of the payload gone: the trailer claims more than is left.
        std::fs::write(&out, &bytes[bytes.len() - 30..]).unwrap();
        let err = Program::attached_to(&out).unwrap_err().to_string();
        assert!(err.ends_with("a packaged program cut short"), "{err}");
    }
}
