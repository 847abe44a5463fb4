#!/bin/bash
# Device run: limits, then hostcall_bench of this build and of the previous commit, in turn.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && tar xzf baseline.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> /dev/null && timeout 60 ./limits "$OUT/limits.json" > /dev/null 2>&1
timeout 100 ./hostcall_bench --limits "$OUT/limits.json" --out "$OUT/new.json" > "$OUT/new.txt" 2>&1
timeout 100 baseline/hostcall_bench --limits "$OUT/limits.json" --out "$OUT/baseline.json" > "$OUT/baseline.txt" 2>&1
grep -h "132x256\|1056x256" "$OUT/new.txt" "$OUT/baseline.txt"
