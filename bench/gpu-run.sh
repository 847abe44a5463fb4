#!/bin/bash
# The run on a GPU machine behind bench-results/: the GPU end-to-end tests, the CUDA C
# limits (bench/limits.cu, built here with nvcc), hostcall_bench, and a probe of the
# smallest per-thread stack std's deep paths survive. Logs and JSON go to $OUT.
#   bench/gpu-run.sh DIR    (DIR holds hostcalls_bin, hostcall_bench and the gpu test binary
#                            as gpu-tests, built on the build box and copied over)
# SKIP_TESTS=1, SKIP_BENCH=1, STACK_PROBE=0 leave parts out. DIR/baseline, if present,
# holds an earlier hostcall_bench, run in the same session for a like-for-like comparison
# (after this one's; before it with BASELINE_FIRST=1, so that rounds can alternate).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:?usage: bench/gpu-run.sh DIR-WITH-hostcalls_bin-hostcall_bench-gpu-tests}
cd "$BIN"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi -L > "$OUT/device.txt" 2>&1
export HOSTCALLS_BIN=$PWD/hostcalls_bin
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  start=$(date +%s)
  timeout 400 ./gpu-tests > "$OUT/gpu-tests.log" 2>&1; echo "gpu-tests exit $? in $(( $(date +%s) - start )) s" >> "$OUT/gpu-tests.log"
  tail -25 "$OUT/gpu-tests.log"
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  nvcc -O3 -std=c++17 -arch=sm_90 "$ROOT/bench/limits.cu" -o limits 2> "$OUT/nvcc.log" && timeout 120 ./limits "$OUT/limits.json" > /dev/null 2> "$OUT/limits.err"
  cat "$OUT/limits.json"
  latest() {
    timeout 400 ./hostcall_bench --limits "$OUT/limits.json" --out "$OUT/latest.json" > "$OUT/bench.txt" 2>&1; echo "bench exit $?" >> "$OUT/bench.txt"
    cat "$OUT/bench.txt"
  }
  baseline() {
    [ -x baseline/hostcall_bench ] || return 0
    timeout 400 baseline/hostcall_bench --limits "$OUT/limits.json" --out "$OUT/baseline.json" > "$OUT/baseline.txt" 2>&1; echo "baseline bench exit $?" >> "$OUT/baseline.txt"
    cat "$OUT/baseline.txt"
  }
  if [ "${BASELINE_FIRST:-0}" = 1 ]; then baseline; latest; else latest; baseline; fi
fi
if [ "${STACK_PROBE:-1}" = 1 ]; then
  # The smallest per-thread stack std's deep paths survive (the demo, a panic's formatting).
  for kib in 2 4 8 16; do
    ./hostcalls_bin --stack-kib $kib --blocks 132 --threads 256 > /dev/null 2> "$OUT/stack.err"; n=$?
    ./hostcalls_bin --stack-kib $kib --mode panic --blocks 2 --threads 32 > /dev/null 2> "$OUT/stack-panic.err"; p=$?
    ./hostcalls_bin --stack-kib $kib --mode mixed --blocks 132 --threads 256 > /dev/null 2>> "$OUT/stack.err"; m=$?
    echo "stack $kib KiB: normal exit $n, panic exit $p (134 expected), mixed exit $m" | tee -a "$OUT/stack.txt"
  done
fi
