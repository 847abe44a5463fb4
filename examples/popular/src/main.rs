//! An ordinary command-line program on the registry's most used crates, with nothing
//! written for the GPU: `cargo gpu run . --grant . -- --rounds 3 FILE...` prints what
//! `cargo run -- --rounds 3 FILE...` prints. Its output is the same on every run, so the
//! two can be compared byte for byte.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Counts the words of FILEs, in a pipeline of threads, and shows what the crates it
/// is built on do.
#[derive(Parser, Debug)]
#[command(name = "popular", version)]
struct Cli {
    /// Rounds of the thread pipeline.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Worker threads of the pipeline.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Files whose words are counted.
    files: Vec<PathBuf>,
}

#[derive(Debug, Deserialize, Serialize, PartialEq)]
struct Config {
    name: String,
    limits: Limits,
    stages: Vec<Stage>,
}

#[derive(Debug, Deserialize, Serialize, PartialEq)]
struct Limits {
    words: u32,
    ratio: f64,
}

#[derive(Debug, Deserialize, Serialize, PartialEq)]
struct Stage {
    name: String,
    enabled: bool,
}

#[derive(Debug, thiserror::Error)]
enum CountError {
    #[error("{path} has no words")]
    Empty { path: String },
    #[error("reading {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

const CONFIG: &str = r#"
name = "word counts"
stages = [{ name = "split", enabled = true }, { name = "sort", enabled = false }]

[limits]
words = 12
ratio = 0.25
"#;

fn count(path: &PathBuf) -> Result<IndexMap<String, u32>, CountError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| CountError::Read {
        path: shown.clone(),
        source,
    })?;
    let mut words = IndexMap::new();
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *words.entry(w.to_lowercase()).or_insert(0) += 1;
    }
    if words.is_empty() {
        return Err(CountError::Empty { path: shown });
    }
    Ok(words)
}

fn pipeline(rounds: usize, workers: usize) -> u64 {
    let (jobs, take) = crossbeam_channel::bounded::<u64>(16);
    let (done, results) = crossbeam_channel::unbounded::<u64>();
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            let (take, done) = (take.clone(), done.clone());
            std::thread::spawn(move || {
                for n in take {
                    done.send((1..=n).map(|k| k * k % 1_000_003).sum()).unwrap();
                }
            })
        })
        .collect();
    drop(done);
    for r in 0..rounds as u64 {
        for n in 0..64 {
            jobs.send(1_000 + r * 64 + n).unwrap();
        }
    }
    drop(jobs);
    let total = results.iter().sum();
    for t in threads {
        t.join().unwrap();
    }
    total
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    env_logger::Builder::new()
        .filter_level(log::LevelFilter::Info)
        .format_timestamp(None)
        .target(env_logger::Target::Stdout)
        .init();
    log::info!("{} files, {} rounds", cli.files.len(), cli.rounds);

    let config: Config = toml::from_str(CONFIG).context("parsing the configuration")?;
    println!(
        "config: {} ({} stages, ratio {})",
        config.name,
        config.stages.len(),
        config.limits.ratio
    );
    let back: Config = toml::from_str(&toml::to_string(&config)?)?;
    println!("config round trip: {}", back == config);

    let mut all: IndexMap<String, u32> = IndexMap::new();
    for path in &cli.files {
        match count(path) {
            Ok(words) => {
                println!("{}: {} distinct words", path.display(), words.len());
                for (w, n) in words {
                    *all.entry(w).or_insert(0) += n;
                }
            }
            Err(e) => {
                let cause = std::error::Error::source(&e).map(|s| s.to_string());
                log::warn!("{e} ({})", cause.unwrap_or_default());
            }
        }
    }
    all.sort_by(|a, n, b, m| m.cmp(n).then(a.cmp(b)));
    let top: Vec<String> = all
        .iter()
        .take(config.limits.words as usize)
        .map(|(w, n)| format!("{w}={n}"))
        .collect();
    println!("top words: {}", top.join(" "));

    let text = cli
        .files
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .collect::<Vec<_>>()
        .concat();
    println!(
        "lines (memchr): {}",
        memchr::memchr_iter(b'\n', &text).count()
    );

    println!(
        "pipeline over {} threads: {}",
        cli.workers,
        pipeline(cli.rounds, cli.workers)
    );

    let scratch = tempfile::tempdir_in(".").context("a scratch directory")?;
    for (i, dir) in ["a", "a/b", "c"].iter().enumerate() {
        std::fs::create_dir_all(scratch.path().join(dir))?;
        let mut f = std::fs::File::create(scratch.path().join(dir).join(format!("f{i}.txt")))?;
        writeln!(f, "{}", "x".repeat(i + 1))?;
    }
    let walked: Vec<String> = walkdir::WalkDir::new(scratch.path())
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| {
            let rel = e
                .path()
                .strip_prefix(scratch.path())
                .unwrap()
                .display()
                .to_string();
            format!("{rel}{}", if e.file_type().is_dir() { "/" } else { "" })
        })
        .collect();
    println!("walked: {}", walked.join(" "));
    let kept = scratch.path().to_path_buf();
    scratch.close()?;
    println!("scratch removed: {}", !kept.exists());

    let day = jiff::civil::date(2024, 2, 28);
    let later = day.checked_add(jiff::Span::new().days(2))?;
    println!("2024-02-28 + 2 days = {later} ({:?})", later.weekday());
    let span = jiff::civil::date(2025, 1, 1).since(day)?;
    println!("until 2025: {span}");

    let missing = std::fs::read("no/such/file").context("reading no/such/file");
    println!("anyhow: {:#}", missing.unwrap_err());
    Ok(())
}
