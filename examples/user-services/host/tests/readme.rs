//! The README's "Your own hostcalls" shows these crates' files: each must appear there
//! verbatim, so its code is the code `cargo test` compiles (this crate's build script
//! builds the kernel for the GPU).

use std::path::Path;

#[test]
fn the_readme_shows_every_file_of_the_example_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for file in [
        "examples/user-services/decl/src/lib.rs",
        "examples/user-services/kernel/src/lib.rs",
        "examples/user-services/host/src/main.rs",
    ] {
        let code = std::fs::read_to_string(root.join(file)).unwrap();
        let block = format!("```rust\n{code}```");
        assert!(
            readme.contains(&block),
            "README.md does not show {file} as it is"
        );
    }
}
