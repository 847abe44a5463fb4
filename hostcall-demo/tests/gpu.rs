//! End-to-end runs of `hostcalls_bin`. On a machine with an NVIDIA GPU they run the demo
//! (small and full-device launches, the ping stress, panic, exit, trace, PTX JIT); on one
//! without, they check the one-sentence refusal and say the GPU cases were SKIPPED.
//!
//! `HOSTCALLS_BIN` overrides the binary, and `HOSTCALL_EXAMPLES` names the folder of the
//! example binaries (to run this test binary on another machine). A case that needs two
//! GPUs, on a machine with one, says it was SKIPPED.

use std::process::{Command, Output};

fn bin() -> String {
    std::env::var("HOSTCALLS_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_hostcalls_bin").to_owned())
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin());
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("hostcalls_bin runs")
}

/// An example binary of this package (`heatmap`).
fn example(name: &str) -> String {
    match std::env::var("HOSTCALL_EXAMPLES") {
        Ok(dir) => format!("{dir}/{name}"),
        Err(_) => match name {
            "heatmap" => env!("CARGO_BIN_EXE_heatmap").to_owned(),
            _ => panic!("no example binary {name}"),
        },
    }
}

/// What a case that needs more GPUs than the machine has returns.
const SKIPPED: &str = "SKIPPED";

/// The machine's GPUs.
fn gpus() -> usize {
    hostcall_runtime::cuda::device_count().unwrap_or(0)
}

struct Case {
    name: &'static str,
    check: fn() -> Result<(), String>,
}

fn expect(out: &Output, code: i32, stderr_has: &[&str]) -> Result<(), String> {
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(code) {
        return Err(format!(
            "exit {:?}, expected {code}; stderr tail:\n{}",
            out.status.code(),
            tail(&err)
        ));
    }
    for s in stderr_has {
        if !err.contains(s) {
            return Err(format!("stderr lacks {s:?}; tail:\n{}", tail(&err)));
        }
    }
    Ok(())
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

const GPU_CASES: &[Case] = &[
    Case {
        name: "every_gpu_at_once_132x256",
        check: || {
            let out = run(
                &["--devices", "all", "--blocks", "132", "--threads", "256"],
                &[],
            );
            expect(&out, 0, &["OK: 33792 lines"])?;
            let err = String::from_utf8_lossy(&out.stderr);
            let ok = err.matches("OK: 33792 lines").count();
            println!("  {ok} of {} GPUs ran the demo at once", gpus());
            if ok != gpus() {
                return Err(format!("{ok} GPUs said OK, of {}", gpus()));
            }
            Ok(())
        },
    },
    Case {
        name: "a_panic_on_the_second_gpu_names_it",
        check: || {
            if gpus() < 2 {
                return Err(format!("{SKIPPED}: one GPU"));
            }
            let out = run(
                &[
                    "--devices",
                    "2",
                    "--mode",
                    "panic",
                    "--blocks",
                    "2",
                    "--threads",
                    "32",
                ],
                &[],
            );
            expect(
                &out,
                101,
                &[
                    "thread 'GPU 1 block 1 thread 3' (",
                    "GPU 1: GPU thread (GPU 1, block 1, thread 3) panicked",
                ],
            )
        },
    },
    Case {
        name: "heatmap_counts_every_cell_a_stencil_touches",
        check: || {
            let dir = std::env::temp_dir().join(format!("heatmap-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let out = Command::new(example("heatmap"))
                .arg("--out")
                .arg(&dir)
                .output()
                .map_err(|e| e.to_string())?;
            let _ = std::fs::remove_dir_all(&dir);
            let text = String::from_utf8_lossy(&out.stdout);
            if out.status.code() != Some(0)
                || !text.contains("every cell read and written as often as the stencil says")
            {
                return Err(format!(
                    "exit {:?}; stdout tail:\n{}\nstderr tail:\n{}",
                    out.status.code(),
                    tail(&text),
                    tail(&String::from_utf8_lossy(&out.stderr))
                ));
            }
            Ok(())
        },
    },
    Case {
        name: "demo_4x64",
        check: || expect(&run(&[], &[]), 0, &["OK: 256 lines", "loaded from Cubin"]),
    },
    Case {
        name: "demo_full_device_132x256",
        check: || {
            expect(
                &run(&["--blocks", "132", "--threads", "256"], &[]),
                0,
                &["OK: 33792 lines"],
            )
        },
    },
    Case {
        name: "demo_full_device_1056x256",
        check: || {
            expect(
                &run(&["--blocks", "1056", "--threads", "256"], &[]),
                0,
                &["OK: 270336 lines"],
            )
        },
    },
    Case {
        name: "mixed_posted_and_waiting_lanes_132x256",
        check: || {
            expect(
                &run(
                    &["--mode", "mixed", "--blocks", "132", "--threads", "256"],
                    &[],
                ),
                0,
                &["OK: every posted line arrived once"],
            )
        },
    },
    Case {
        name: "a_300_mib_write_keeps_every_other_line_132x256",
        check: || {
            expect(
                &run(
                    &["--mode", "big-write", "--blocks", "132", "--threads", "256"],
                    &[],
                ),
                0,
                &["OK: 300 MiB in one write"],
            )
        },
    },
    Case {
        name: "mixed_posted_and_waiting_lanes_1056x256",
        check: || {
            expect(
                &run(
                    &["--mode", "mixed", "--blocks", "1056", "--threads", "256"],
                    &[],
                ),
                0,
                &["OK: every posted line arrived once"],
            )
        },
    },
    Case {
        name: "null_calls_in_1024_thread_blocks",
        check: || {
            expect(
                &run(
                    &["--mode", "null", "--blocks", "4", "--threads", "1024"],
                    &[],
                ),
                0,
                &["OK: 262144 verified null round trips"],
            )
        },
    },
    Case {
        name: "typed_calls_in_1024_thread_blocks",
        check: || {
            expect(
                &run(
                    &["--mode", "typed", "--blocks", "4", "--threads", "1024"],
                    &[],
                ),
                0,
                &["OK: 262144 verified typed round trips"],
            )
        },
    },
    Case {
        name: "a_block_over_the_kernels_limit_is_refused_in_one_sentence",
        check: || {
            expect(
                &run(&["--blocks", "1", "--threads", "2048"], &[]),
                hostcall_runtime::EXIT_RUN_FAILED.into(),
                &["kmain takes at most 1024 threads per block"],
            )
        },
    },
    Case {
        name: "ping_stress_132x256",
        check: || {
            expect(
                &run(
                    &["--mode", "ping", "--blocks", "132", "--threads", "256"],
                    &[],
                ),
                0,
                &["OK: every thread"],
            )
        },
    },
    Case {
        name: "panic_reports_message_and_thread",
        check: || {
            let out = run(
                &["--mode", "panic", "--blocks", "2", "--threads", "32"],
                &[],
            );
            expect(
                &out,
                101,
                &[
                    "thread 'block 1 thread 3' (",
                    "deliberate panic",
                    "GPU thread (block 1, thread 3)",
                ],
            )
        },
    },
    Case {
        // Std writes this message in pieces; 33,792 threads failing at once
        // interleaved them inside the line (`memory allocation of memory allocation of
        // ... 115211521152`).
        name: "std_runtime_messages_of_many_threads_come_out_whole_line",
        check: || {
            let out = run(
                &[
                    "--mode",
                    "alloc-fail",
                    "--blocks",
                    "132",
                    "--threads",
                    "256",
                ],
                &[],
            );
            expect(&out, 134, &["aborted"])?;
            let err = String::from_utf8_lossy(&out.stderr);
            let mut whole = 0;
            for line in err.lines().filter(|l| l.contains("memory allocation")) {
                // A line cut short by the abort ending the launch is a prefix of one.
                let rest = line
                    .strip_prefix("memory allocation of ")
                    .filter(|r| !r.contains("memory allocation"))
                    .ok_or_else(|| format!("a message shares its line: {line:?}"))?;
                if let Some(n) = rest.strip_suffix(" bytes failed") {
                    n.parse::<u64>()
                        .map_err(|_| format!("a size in pieces: {line:?}"))?;
                    whole += 1;
                }
            }
            if whole < 2 {
                return Err(format!("{whole} whole messages:\n{}", tail(&err)));
            }
            Ok(())
        },
    },
    Case {
        // A stack overflow died as a bare "unspecified launch failure", and a
        // stack past the device's limit as a raw CUDA_ERROR_INVALID_VALUE.
        name: "a_stack_overflow_and_a_stack_too_large_are_one_sentence_each",
        check: || {
            let overflow = run(
                &[
                    "--mode",
                    "stack-overflow",
                    "--stack-kib",
                    "16",
                    "--blocks",
                    "1",
                    "--threads",
                    "32",
                ],
                &[],
            );
            expect(
                &overflow,
                hostcall_runtime::EXIT_RUN_FAILED.into(),
                &[
                    "kernel `kmain` ended with",
                    "overflowed its stack of 16384 bytes",
                ],
            )?;
            let too_large = run(
                &["--stack-kib", "4096", "--blocks", "1", "--threads", "32"],
                &[],
            );
            let err = String::from_utf8_lossy(&too_large.stderr);
            if too_large.status.success()
                || !err.contains("a stack of 4194304 bytes for each GPU thread is more than")
                || !err.contains("threads the GPU can hold at once")
            {
                return Err(format!(
                    "exit {:?}, stderr tail:\n{}",
                    too_large.status.code(),
                    tail(&err)
                ));
            }
            Ok(())
        },
    },
    Case {
        name: "exit_code_passes_through",
        check: || {
            expect(
                &run(&["--mode", "exit", "--blocks", "2", "--threads", "32"], &[]),
                3,
                &["exit(3)"],
            )
        },
    },
    Case {
        name: "debug_trace_shows_each_call",
        check: || {
            let out = run(
                &["--blocks", "1", "--threads", "4"],
                &[("HOSTCALL_DEBUG", "1")],
            );
            expect(
                &out,
                0,
                &[
                    "block 0 thread 0 Fs.openat openat(-100, ",
                    "write_posted#0x80000001(0x1",
                    "Fs.write write(3, ",
                    "Time.getrandom getrandom(&mut [",
                ],
            )
        },
    },
    Case {
        name: "a_spinning_kernel_ends_at_a_10s_timeout_within_11s",
        check: || killed_within("spin", "it does not call the host"),
    },
    Case {
        name: "a_kernel_calling_the_host_forever_ends_at_a_10s_timeout_within_11s",
        check: || killed_within("call-loop", "hostcalls in flight"),
    },
    Case {
        name: "ptx_jit_fallback",
        check: || {
            expect(
                &run(&["--jit", "--blocks", "1", "--threads", "32"], &[]),
                0,
                &["loaded from PtxJit", "OK: 32 lines"],
            )
        },
    },
    Case {
        name: "unmodified_programs_under_cargo_gpu_match_the_cpu",
        check: cargo_gpu_programs,
    },
];

/// The `cargo gpu` programs (`examples/unmodified`, `examples/rayon-json`), packaged by
/// `cargo gpu build` and built for the CPU, in `HOSTCALL_EXAMPLES` beside `text/`: each
/// must print, write and exit exactly as on the CPU, and asking for more threads than a
/// program may have must fail as Linux does at its limit.
fn cargo_gpu_programs() -> Result<(), String> {
    let Ok(dir) = std::env::var("HOSTCALL_EXAMPLES") else {
        return Err(format!(
            "{SKIPPED}: HOSTCALL_EXAMPLES does not name the packaged programs (see \
             bench/device-runs/run-zo.sh)"
        ));
    };
    let text = format!("{dir}/text");
    let run_in_text = |bin: String, args: &[&str], env: &[(&str, &str)]| {
        let mut c = Command::new(&bin);
        c.args(args).current_dir(&text);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().map_err(|e| format!("{bin}: {e}"))
    };
    let programs: [(&str, &[&str], &str); 3] = [
        ("unmodified", &["a.txt", "b.txt", "missing.txt"], "summary"),
        ("rayon-json", &["1000000"], ""),
        ("net", &[], ""),
    ];
    for (name, args, summary) in programs {
        let mut outs = Vec::new();
        for side in ["cpu", "gpu"] {
            let file = format!("{summary}-{side}.txt");
            let env = [("WORKERS", "8"), ("SUMMARY", file.as_str())];
            let bin = match side {
                "cpu" => format!("{dir}/{name}-cpu"),
                _ => format!("{dir}/{name}.gpu"),
            };
            let out = run_in_text(bin, args, &env)?;
            let written = std::fs::read(format!("{text}/{file}")).unwrap_or_default();
            outs.push((out.status.code(), out.stdout, out.stderr, written));
        }
        if outs[0] != outs[1] {
            return Err(format!(
                "{name}: the GPU's run differs from the CPU's: exit {:?} against {:?}, \
                 stdout\n{}\nagainst\n{}\nstderr\n{}\nagainst\n{}",
                outs[1].0,
                outs[0].0,
                tail(&String::from_utf8_lossy(&outs[1].1)),
                tail(&String::from_utf8_lossy(&outs[0].1)),
                tail(&String::from_utf8_lossy(&outs[1].2)),
                tail(&String::from_utf8_lossy(&outs[0].2)),
            ));
        }
        println!("  {name}: stdout, stderr, files and exit code as on the CPU");
    }
    net_across_the_host(&dir)?;
    let limited = run_in_text(
        format!("{dir}/unmodified-4.gpu"),
        &["a.txt"],
        &[("WORKERS", "8")],
    )?;
    expect(
        &limited,
        101,
        &[
            "spawning a counter",
            "code: 11",
            "Resource temporarily unavailable",
        ],
    )
}

/// `examples/net` on the GPU against host peers over loopback: it serves HTTP/1.1 to a
/// client in this process, then fetches from a server in this process.
fn net_across_the_host(dir: &str) -> Result<(), String> {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let gpu = format!("{dir}/net.gpu");
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let server = Command::new(&gpu)
        .args(["serve", &format!("127.0.0.1:{port}"), "2"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{gpu}: {e}"))?;
    let started = std::time::Instant::now();
    let mut answers = Vec::new();
    for path in ["/first", "/second"] {
        let mut s = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => break s,
                Err(_) if started.elapsed().as_secs() < 60 => {
                    std::thread::sleep(std::time::Duration::from_millis(50))
                }
                Err(e) => return Err(format!("the GPU's server never listened: {e}")),
            }
        };
        write!(s, "GET {path} HTTP/1.1\r\nHost: gpu\r\n\r\n").map_err(|e| e.to_string())?;
        let mut text = String::new();
        s.read_to_string(&mut text).map_err(|e| e.to_string())?;
        answers.push(text);
    }
    let out = server.wait_with_output().map_err(|e| e.to_string())?;
    let served = String::from_utf8_lossy(&out.stdout);
    if !answers[1].ends_with("\r\n\r\nrequest 2 for /second\n")
        || served != "served [\"/first\", \"/second\"]\n"
    {
        return Err(format!(
            "GPU server: answered {answers:?}, printed {served:?}"
        ));
    }
    println!("  net: the GPU served HTTP/1.1 to a host client");

    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let host_server = std::thread::spawn(move || -> std::io::Result<String> {
        let (mut s, _) = listener.accept()?;
        let mut req = Vec::new();
        while !req.ends_with(b"\r\n\r\n") {
            let mut b = [0u8; 512];
            let n = s.read(&mut b)?;
            if n == 0 {
                break;
            }
            req.extend_from_slice(&b[..n]);
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\nfrom the host\n")?;
        Ok(String::from_utf8_lossy(&req).into_owned())
    });
    let out = Command::new(&gpu)
        .args(["get", &addr.to_string(), "/data"])
        .output()
        .map_err(|e| format!("{gpu}: {e}"))?;
    let req = host_server
        .join()
        .map_err(|_| "the host server panicked".to_owned())?
        .map_err(|e| e.to_string())?;
    expect(&out, 0, &[])?;
    if String::from_utf8_lossy(&out.stdout) != "HTTP/1.1 200 OK\nfrom the host\n"
        || !req.starts_with("GET /data HTTP/1.1\r\n")
    {
        return Err(format!(
            "GPU client: printed {:?}, sent {req:?}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    println!("  net: the GPU fetched from a host server");
    Ok(())
}

/// Runs `mode` on the whole device with a 10 s timeout: the process must end within
/// 11 s of the launch, with the message naming the kernel and what was in flight.
fn killed_within(mode: &str, stderr_has: &str) -> Result<(), String> {
    let started = std::time::Instant::now();
    let out = run(
        &[
            "--mode",
            mode,
            "--blocks",
            "132",
            "--threads",
            "256",
            "--timeout-s",
            "10",
        ],
        &[],
    );
    let took = started.elapsed().as_secs_f64();
    expect(
        &out,
        hostcall_runtime::EXIT_RUN_FAILED.into(),
        &["kernel `kmain` was stopped after 10", stderr_has],
    )?;
    let err = String::from_utf8_lossy(&out.stderr);
    let launched: f64 = err
        .split("launching ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .ok_or("hostcalls_bin did not say when it launched")?;
    let after_launch = took - launched;
    println!(
        "  {mode}: the process ended {after_launch:.2} s after the launch ({took:.2} s in all)"
    );
    if after_launch > 11.0 {
        return Err(format!(
            "the process ended {after_launch:.2} s after the launch, over 11 s"
        ));
    }
    Ok(())
}

fn main() {
    let (mut passed, mut failed, mut skipped_here) = (0, 0, 0);
    let mut report = |name: &str, r: Result<(), String>| match r {
        Ok(()) => {
            println!("test {name} ... ok");
            passed += 1;
        }
        Err(why) if why.starts_with(SKIPPED) => {
            println!("test {name} ... {why}");
            skipped_here += 1;
        }
        Err(e) => {
            println!("test {name} ... FAILED\n{e}");
            failed += 1;
        }
    };
    let skipped = if hostcall_runtime::cuda::driver_present() {
        for c in GPU_CASES {
            report(c.name, (c.check)());
        }
        skipped_here
    } else {
        report("no_gpu_is_one_clear_sentence", {
            let out = run(&[], &[]);
            let err = String::from_utf8_lossy(&out.stderr);
            if out.status.code() == Some(hostcall_runtime::EXIT_NO_GPU.into())
                && err.lines().count() == 1
                && err.contains("no NVIDIA GPU is usable here")
            {
                Ok(())
            } else {
                Err(format!("exit {:?}, stderr {err:?}", out.status.code()))
            }
        });
        for c in GPU_CASES {
            println!(
                "test {} ... SKIPPED (no NVIDIA driver: libcuda.so not found)",
                c.name
            );
        }
        GPU_CASES.len()
    };
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        std::process::exit(1);
    }
}
