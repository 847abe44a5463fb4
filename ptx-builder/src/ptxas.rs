//! Finding and running ptxas (CUDA's PTX assembler) to make cubins.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::tools::{is_executable, run};
use crate::{BuildError, Result};

/// A ptxas, looked for in this order: `$PTXAS`, `PATH`, `$CUDA_HOME`/`$CUDA_PATH`,
/// `/usr/local/cuda`, then the PyPI wheel `nvidia-cuda-nvcc-cu12` of `python3`.
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS").map(PathBuf::from) {
        return is_executable(&p).then_some(p);
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("ptxas"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let cuda_homes = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|h| PathBuf::from(h).join("bin/ptxas"))
        .chain([PathBuf::from("/usr/local/cuda/bin/ptxas")]);
    on_path
        .into_iter()
        .chain(cuda_homes)
        .find(|p| is_executable(p))
        .or_else(from_python_wheel)
}

fn from_python_wheel() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])",
        ])
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?;
    let p = Path::new(dir.trim()).join("bin/ptxas");
    (out.status.success() && is_executable(&p)).then_some(p)
}

/// Compiles `ptx` to a cubin for `sm` next to it, unless the cubin there was made from
/// these very PTX bytes by this ptxas (a stamp beside it records both): a large module
/// takes ptxas minutes, and every cargo profile runs the build script again.
pub(crate) fn compile(ptxas: &Path, ptx: &Path, sm: u32) -> Result<PathBuf> {
    let cubin = ptx.with_extension(format!("sm_{sm}.cubin"));
    let stamp_path = ptx.with_extension(format!("sm_{sm}.cubin.stamp"));
    let bytes = std::fs::read(ptx).map_err(BuildError::io(format!("reading {}", ptx.display())))?;
    let stamp = format!("{:x} {} -O3\n", Sha256::digest(&bytes), ptxas.display());
    if cubin.exists()
        && std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str())
    {
        return Ok(cubin);
    }
    // A stale stamp must not outlive an interrupted ptxas.
    let _ = std::fs::remove_file(&stamp_path);
    compile_to(ptxas, ptx, sm, &cubin)?;
    std::fs::write(&stamp_path, stamp)
        .map_err(BuildError::io(format!("writing {}", stamp_path.display())))?;
    Ok(cubin)
}

/// Compiles `ptx` to the cubin `cubin` for `sm`, always.
pub(crate) fn compile_to(ptxas: &Path, ptx: &Path, sm: u32, cubin: &Path) -> Result<()> {
    run(Command::new(ptxas)
        .arg(format!("-arch=sm_{sm}"))
        .arg("-O3")
        .arg(ptx)
        .arg("-o")
        .arg(cubin))?;
    Ok(())
}
