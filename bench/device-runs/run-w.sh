#!/bin/bash
# Device run 21 (two GPUs): the final hostcall_bench, whole, beside the CUDA C limits
# (the last run's typed rows had four consumers against the null rows' one).
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/w"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> "$OUT/w/nvcc.log" && timeout 120 ./limits "$OUT/w/limits.json" > /dev/null 2> "$OUT/w/limits.err"
timeout 300 ./hostcall_bench --limits "$OUT/w/limits.json" --out "$OUT/w/h100-latest.json" > "$OUT/w/bench.txt" 2>&1; echo "bench exit $?" >> "$OUT/w/bench.txt"; grep -v "^\[" "$OUT/w/bench.txt" | grep -v "^hostcall_bench: [0-9]*x[0-9]*: .*null calls/s, " | grep -v "_consumers \|payload"
cd "$OUT" && tar czf w.tgz w && rm -rf w
