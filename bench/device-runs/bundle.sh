#!/bin/bash
# Builds what the device runs carry, into .device/new.txz (the device tool's `carry`
# takes `.device`): the GPU test binary and the demo, conformance and bench binaries,
# the `cargo gpu` programs packaged with their grants beside their CPU builds, and two
# text files for them to read. Run from anywhere on the build machine; then run.sh
# unpacks it on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
NEW=$ROOT/.device/new CPU=${CPU_TARGET:-/tmp/cpu-target} G=${TMPDIR:-/tmp}/cargo-gpu
rm -rf "$NEW" && mkdir -p "$NEW/text"
cargo build -q --release -p cargo-gpu && cp target/release/cargo-gpu "$G" && strip "$G"
cargo build -q --release -p hostcall-demo -p conformance -p porting-host -p user-services -p hostcall-fuzz --bins
cargo test -q --release -p hostcall-demo --test gpu --no-run 2>&1 | tail -1
for b in add42 conformance heatmap hostcall_bench hostcalls_bin lifetimes porting-host services; do cp target/release/$b "$NEW/"; done
cp "$(ls -t target/release/build/hostcall-demo/*/out/gpu-* | grep -v '\.d$' | head -1)" "$NEW/gpu-tests"
# A program on the CPU: the pinned nightly, outside the workspace.
cpu() { cargo +nightly-2026-10-15 build -q --release --target-dir "$CPU" && cp "$CPU/release/$1" "$NEW/$1-cpu"; }
(cd examples/unmodified && "$G" build . --grant . --env WORKERS --env SUMMARY -o "$NEW/unmodified.gpu" \
  && "$G" build . --grant . --env WORKERS --threads 4 -o "$NEW/unmodified-4.gpu" && cpu unmodified)
(cd examples/rayon-json && "$G" build . --env WORKERS --env SUMMARY -o "$NEW/rayon-json.gpu" && cpu rayon-json)
(cd examples/threads && "$G" build . -o "$NEW/threads.gpu" && cpu threads)
(cd examples/popular && "$G" build . --grant . -o "$NEW/popular.gpu" && cpu popular)
# The conformance suite's spawning programs as tests (`cargo gpu test`), and on the CPU.
(cd conformance/spawning && "$G" test --locked --no-run --out-dir "$NEW" --connect '127.0.0.1:*' --listen '127.0.0.1:*' \
  --connect 'localhost:*' --listen 'localhost:*' \
  && cp "$(cargo +nightly-2026-10-15 test --locked --no-run --target-dir "$CPU" 2>&1 \
    | sed -n 's/^ *Executable .*(\(.*\))$/\1/p')" "$NEW/suite-tests-cpu")
(cd examples/net && "$G" build . --listen '127.0.0.1:*' --connect '127.0.0.1:*' --connect 'localhost:*' -o "$NEW/net.gpu" && cpu net)
(cd bench/net && "$G" build . --listen '127.0.0.1:*' --connect '127.0.0.1:*' --max-sockets 1024 -o "$NEW/net-bench.gpu" && cpu net-bench)
(cd bench/threads && "$G" build . -o "$NEW/threads-bench.gpu" && cpu threads-bench \
  && "$G" build . --threads 528 -o "$NEW/threads-bench-528.gpu")
(cd bench/startup && "$G" build . -o "$NEW/startup.gpu" && cpu startup)
(cd bench/math && "$G" build . --grant . -o "$NEW/math-bench.gpu" && cpu math-bench)
(cd bench/pipes && "$G" build . --grant . --max-open-files 8192 -o "$NEW/pipes-bench.gpu" && cpu pipes-bench)
# BASELINE=PATH: an earlier build's hostcall_bench, which bench/gpu-run.sh runs beside this one's.
if [ -n "${BASELINE:-}" ]; then mkdir -p "$NEW/baseline" && cp "$BASELINE" "$NEW/baseline/" && strip "$NEW/baseline/hostcall_bench"; fi
# An earlier commit's bench/startup executable for run.sh's startup-ab (never stripped:
# a packaged executable carries its module after the ELF).
if [ -n "${BASELINE_STARTUP:-}" ]; then mkdir -p "$NEW/baseline" && cp "$BASELINE_STARTUP" "$NEW/baseline/startup.gpu"; fi
cp README.md "$NEW/text/a.txt" && cp ../shared/DESIGN.md "$NEW/text/b.txt"
strip "$NEW"/*-cpu "$NEW"/gpu-tests "$NEW"/add42 "$NEW"/conformance "$NEW"/heatmap "$NEW"/hostcall_bench \
  "$NEW"/hostcalls_bin "$NEW"/lifetimes "$NEW"/porting-host "$NEW"/services
(cd .device && rm -f new.tgz new.txz && XZ_OPT=-T0 tar cJf new.txz new && rm -rf new)
ls -la .device/new.txz
