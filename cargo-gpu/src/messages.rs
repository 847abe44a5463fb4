//! Cargo's JSON messages for a GPU build (`--message-format json`, and the other JSON
//! formats), on stdout, for the tools that read Cargo's: the nested builds' own
//! messages come as they are made (ptx-builder forwards them), then, as Cargo ends a
//! build, a `compiler-artifact` for each program built for the GPU and one
//! `build-finished`. A GPU artifact is its target's message from the nested build with
//! the module's files (`module.ptx`, cubins) as `filenames`, and as `executable` the
//! file `cargo gpu` wrote to run it (`build -o`, `test --no-run --out-dir`), else
//! `null`: as `cargo test --no-run --message-format json` names test executables.

use std::path::Path;

use ptx_builder::PtxModule;
use serde_json::{Value, json};

/// The `compiler-artifact` message of `module`, run as `executable` when one was
/// written; `None` when its build kept no message of Cargo's (a kernel library).
pub fn artifact(module: &PtxModule, executable: Option<&Path>) -> Option<Value> {
    let mut message = module.cargo_message.clone()?;
    let files = std::iter::once(&module.ptx).chain(module.cubins.iter().map(|(_, c)| c));
    message["filenames"] = files.map(|f| json!(f)).collect();
    message["executable"] = json!(executable);
    Some(message)
}

/// Cargo's last message of a build.
pub fn build_finished(success: bool) -> Value {
    json!({ "reason": "build-finished", "success": success })
}

/// Prints `message` as one line of stdout.
pub fn print(message: &Value) {
    println!("{message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_artifact_is_its_targets_message_with_the_modules_files() {
        let cargo = json!({
            "reason": "compiler-artifact",
            "package_id": "path+file:///p#app@0.1.0",
            "target": { "name": "app", "kind": ["bin"] },
            "filenames": ["/t/nvptx/release/app"],
            "executable": "/t/nvptx/release/app",
            "fresh": false,
        });
        let module = PtxModule {
            ptx: "/t/app.ptx".into(),
            cubins: vec![(90, "/t/app.sm_90.cubin".into())],
            sha256: String::new(),
            kernels: Vec::new(),
            stack_bytes: None,
            sources: Vec::new(),
            cargo_message: Some(cargo.clone()),
        };
        let written = artifact(&module, Some(Path::new("/out/app.gpu"))).unwrap();
        assert_eq!(written["reason"], "compiler-artifact");
        assert_eq!(written["package_id"], cargo["package_id"]);
        assert_eq!(written["target"], cargo["target"]);
        assert_eq!(
            written["filenames"],
            json!(["/t/app.ptx", "/t/app.sm_90.cubin"])
        );
        assert_eq!(written["executable"], "/out/app.gpu");
        assert_eq!(artifact(&module, None).unwrap()["executable"], Value::Null);
        let library = PtxModule {
            cargo_message: None,
            ..module
        };
        assert_eq!(artifact(&library, None), None);
        assert_eq!(
            build_finished(false).to_string(),
            r#"{"reason":"build-finished","success":false}"#
        );
    }
}
