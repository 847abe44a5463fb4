//! Finding and running ptxas (CUDA's PTX assembler) to make cubins.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;
use crate::tools::{is_executable, python_package_dir, run};

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

/// ptxas of PyPI's `nvidia-cuda-nvcc-cu12` wheel.
fn from_python_wheel() -> Option<PathBuf> {
    let p = python_package_dir("nvidia.cuda_nvcc")?.join("bin/ptxas");
    is_executable(&p).then_some(p)
}

/// What `ptxas --version` prints (part of the cubin cache key).
pub(crate) fn version(ptxas: &Path) -> Result<String> {
    let out = run(Command::new(ptxas).arg("--version"))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
