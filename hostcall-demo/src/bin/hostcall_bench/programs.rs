//! The programs' rows: std programs on the GPU beside the same programs on the CPU.

use std::path::Path;

use serde_json::Value;

use super::*;

/// The programs' rows: each figure on the GPU, compared with the CPU's.
pub(super) fn program_rows(dir: &Path) -> Result<Vec<Value>, String> {
    let figures = hostcall_demo::programs::measure(dir)?;
    Ok(figures
        .iter()
        .map(|f| {
            eprintln!(
                "hostcall_bench: {}: {:.2} on the GPU, {:.2} on the CPU",
                f.name, f.gpu, f.cpu
            );
            result(
                f.name,
                f.gpu,
                f.unit,
                Some((&format!("cpu_{}", f.name), f.cpu)),
                &f.note,
            )
        })
        .collect())
}
