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
        if appended + TRAILER > len || header_len > appended {
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
        Ok(Some(Program {
            name: h["name"].as_str().ok_or_else(bad)?.to_owned(),
            options: strings(&h["options"]).ok_or_else(bad)?,
            ptx,
            cubins,
            sha256: h["sha256"].as_str().ok_or_else(bad)?.to_owned(),
            stack_bytes: h["stack_bytes"].as_u64(),
            file: exe.to_owned(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program() -> Program {
        Program {
            name: "wc".into(),
            options: vec!["--grant".into(), "/tmp:/data".into(), "--stdin".into()],
            ptx: ".version 8.0\n".into(),
            cubins: vec![(90, vec![1, 2, 3]), (100, vec![])],
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
