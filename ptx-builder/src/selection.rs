//! What a Cargo command line selects, with Cargo's meaning, for a GPU build: the
//! workspace member, the program target, the features, the profile whose settings the
//! build takes, and whether the lockfile may change and the network be used. `cargo gpu`
//! maps its flags here; a build script sets them on [`crate::PtxBuilder`].

/// The target whose `fn main` becomes the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Program {
    /// A `[[bin]]` target: the one named, else the package's `default-run` or only one.
    Bin(Option<String>),
    /// An `[[example]]` target.
    Example(String),
    /// A target's tests, in libtest's harness (its `main`), built as `cargo test` builds
    /// them: Cargo's `test` profile and the dev-dependencies.
    Test(TestTarget),
}

/// A target whose `#[test]`s `cargo test` runs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TestTarget {
    /// The library's unit tests.
    Lib,
    /// A binary's unit tests.
    Bin(String),
    /// An integration test (`tests/NAME.rs`, `[[test]]`).
    Integration(String),
}

impl TestTarget {
    /// The name Cargo gives the target.
    pub fn name<'a>(&'a self, lib: &'a str) -> &'a str {
        match self {
            TestTarget::Lib => lib,
            TestTarget::Bin(n) | TestTarget::Integration(n) => n,
        }
    }
}

impl Program {
    /// The nested `cargo rustc`'s flags that select this target.
    pub(crate) fn cargo_args(&self, bin: &str) -> Vec<String> {
        match self {
            Program::Bin(_) => vec!["--bin".into(), bin.into()],
            Program::Example(e) => vec!["--example".into(), e.clone()],
            Program::Test(TestTarget::Lib) => vec!["--lib".into()],
            Program::Test(TestTarget::Bin(b)) => vec!["--bin".into(), b.clone()],
            Program::Test(TestTarget::Integration(t)) => vec!["--test".into(), t.clone()],
        }
    }

    /// The kind Cargo reports for this target's artifact.
    pub(crate) fn artifact_kind(&self) -> &'static str {
        match self {
            Program::Bin(_) | Program::Test(TestTarget::Bin(_)) => "bin",
            Program::Example(_) => "example",
            Program::Test(TestTarget::Lib) => "lib",
            Program::Test(TestTarget::Integration(_)) => "test",
        }
    }

    /// The Cargo profile the nested builds use (`--profile`), whose settings
    /// [`crate::profile`] sets: `test` builds libtest's harness with the
    /// dev-dependencies; `release` builds a program.
    pub(crate) fn nested_profile(&self) -> &'static str {
        match self {
            Program::Test(_) => "test",
            Program::Bin(_) | Program::Example(_) => "release",
        }
    }
}

/// Cargo's package, feature, profile and manifest options, as `cargo build` takes them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CargoArgs {
    /// `-p`: the workspace member to build, `NAME` or `NAME@VERSION` (default: the
    /// package whose folder the builder was given).
    pub package: Option<String>,
    /// `--features`: space- or comma-separated, as Cargo takes them (`member/feature`
    /// too).
    pub features: Vec<String>,
    /// `--all-features`.
    pub all_features: bool,
    /// `--no-default-features`.
    pub no_default_features: bool,
    /// `--profile`: the profile whose settings the GPU build takes (default `release`;
    /// [`crate::PtxBuilder::cargo_args`] says which settings).
    pub profile: Option<String>,
    /// `--locked`: the lockfile must not change.
    pub locked: bool,
    /// `--offline`: no network.
    pub offline: bool,
    /// `--frozen`: both.
    pub frozen: bool,
    /// `--message-format`: Cargo's format names (`human`, `short`, `json`,
    /// `json-diagnostic-short`, `json-diagnostic-rendered-ansi`,
    /// `json-render-diagnostics`), as many as Cargo combines; none is `human`. With a
    /// JSON format the nested builds' messages reach stdout as Cargo prints them (but
    /// their `build-finished`: the build goes on), and the program's
    /// [`crate::PtxModule::cargo_message`] is kept for the tool to report the GPU
    /// build's artifact.
    pub message_format: Vec<String>,
}

impl CargoArgs {
    /// The profile whose settings the build of a program takes.
    pub fn profile_name(&self) -> &str {
        self.profile.as_deref().unwrap_or("release")
    }

    /// The profile whose settings the build of tests takes, as `cargo test` picks it.
    pub fn test_profile_name(&self) -> &str {
        self.profile.as_deref().unwrap_or("test")
    }

    /// Flags for every cargo command of the build (`metadata`, the nested builds).
    pub(crate) fn manifest_flags(&self) -> Vec<&'static str> {
        [
            (self.locked, "--locked"),
            (self.offline, "--offline"),
            (self.frozen, "--frozen"),
        ]
        .into_iter()
        .filter_map(|(on, flag)| on.then_some(flag))
        .collect()
    }

    /// Whether messages are JSON, on stdout (`--message-format json...`).
    pub fn json_messages(&self) -> bool {
        self.message_format.iter().any(|f| f.starts_with("json"))
    }

    /// The nested builds' `--message-format`: the user's JSON formats, else JSON with the
    /// diagnostics rendered on stderr (short ones for `short`), which the builder reads
    /// its artifacts from.
    pub(crate) fn nested_message_format(&self) -> String {
        if self.json_messages() {
            self.message_format.join(",")
        } else if self.message_format.iter().any(|f| f == "short") {
            "json-render-diagnostics,json-diagnostic-short".to_owned()
        } else {
            "json-render-diagnostics".to_owned()
        }
    }

    /// `--offline` when the network may not be used (`--offline` or `--frozen`).
    pub(crate) fn network_flags(&self) -> &'static [&'static str] {
        if self.offline || self.frozen {
            &["--offline"]
        } else {
            &[]
        }
    }

    /// Flags for the nested build of the selected package (not of libc-hostcall).
    pub(crate) fn feature_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if !self.features.is_empty() {
            flags.push("--features".to_owned());
            flags.push(self.features.join(","));
        }
        if self.all_features {
            flags.push("--all-features".to_owned());
        }
        if self.no_default_features {
            flags.push("--no-default-features".to_owned());
        }
        flags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_option_becomes_cargos_own_flag() {
        let all = CargoArgs {
            package: Some("app".into()),
            features: vec!["a b".into(), "m/c".into()],
            all_features: true,
            no_default_features: true,
            profile: Some("gpu".into()),
            locked: true,
            offline: true,
            frozen: true,
            message_format: vec!["json".into(), "json-diagnostic-short".into()],
        };
        assert_eq!(all.manifest_flags(), ["--locked", "--offline", "--frozen"]);
        assert!(all.json_messages());
        assert_eq!(all.nested_message_format(), "json,json-diagnostic-short");
        let short = CargoArgs {
            message_format: vec!["short".into()],
            ..CargoArgs::default()
        };
        assert!(!short.json_messages());
        assert_eq!(
            short.nested_message_format(),
            "json-render-diagnostics,json-diagnostic-short"
        );
        assert_eq!(all.network_flags(), ["--offline"]);
        assert_eq!(
            all.feature_flags(),
            [
                "--features",
                "a b,m/c",
                "--all-features",
                "--no-default-features"
            ]
        );
        assert_eq!(all.profile_name(), "gpu");
        let none = CargoArgs::default();
        assert!(none.manifest_flags().is_empty() && none.feature_flags().is_empty());
        assert!(none.network_flags().is_empty());
        assert_eq!(none.profile_name(), "release");
        assert!(!none.json_messages());
        assert_eq!(none.nested_message_format(), "json-render-diagnostics");
    }

    #[test]
    fn a_program_is_selected_by_its_target_kind() {
        let bin = Program::Bin(None);
        assert_eq!(bin.cargo_args("app"), ["--bin", "app"]);
        assert_eq!(bin.artifact_kind(), "bin");
        assert_eq!(bin.nested_profile(), "release");
        let ex = Program::Example("demo".into());
        assert_eq!(ex.cargo_args("ignored"), ["--example", "demo"]);
        assert_eq!(ex.artifact_kind(), "example");
        let unit = Program::Test(TestTarget::Lib);
        assert_eq!(unit.cargo_args("ignored"), ["--lib"]);
        assert_eq!(
            (unit.artifact_kind(), unit.nested_profile()),
            ("lib", "test")
        );
        let it = Program::Test(TestTarget::Integration("it".into()));
        assert_eq!(it.cargo_args("ignored"), ["--test", "it"]);
        assert_eq!(it.artifact_kind(), "test");
        assert_eq!(TestTarget::Bin("b".into()).name("lib"), "b");
        assert_eq!(TestTarget::Lib.name("lib"), "lib");
    }
}
