#!/bin/bash
# Device run 36, 56cf60b: limits.cu and the whole hostcall_bench, which launches one
# module about a hundred times, now with each launch's memory freed at its end.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/zm"
STACK_PROBE=0 SKIP_TESTS=1 OUT="$OUT/zm" bash ../../bench/gpu-run.sh . > "$OUT/zm/gpu-run.txt" 2>&1; grep -E "M/s|GB/s|exit" "$OUT/zm/bench.txt" | tail -40
cd "$OUT" && tar czf zm.tgz zm && rm -rf zm
