#!/bin/bash
# Device run 16 (two GPUs), part two: the CUDA C limits and the whole hostcall_bench
# (calls, streams with one reader and four, null calls on both GPUs against one); the
# heatmap images; the demo on both GPUs at 1056x256 into one stdout; the two-GPU panic.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
mkdir -p "$OUT/r"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> "$OUT/r/nvcc.log" && timeout 120 ./limits "$OUT/r/limits.json" > /dev/null 2> "$OUT/r/limits.err"; cat "$OUT/r/limits.json"
timeout 400 ./hostcall_bench --limits "$OUT/r/limits.json" --out "$OUT/r/h100-latest.json" > "$OUT/r/bench.txt" 2>&1; echo "bench exit $?" >> "$OUT/r/bench.txt"; grep -v "^\[" "$OUT/r/bench.txt" | grep -v "^hostcall_bench: [0-9]*x[0-9]*: .*null calls/s, " 
timeout 60 ./heatmap --out "$OUT/r" > "$OUT/r/heatmap.txt" 2>&1; echo "heatmap exit $?" >> "$OUT/r/heatmap.txt"; tail -2 "$OUT/r/heatmap.txt"
timeout 100 ./hostcalls_bin --devices all --blocks 1056 --threads 256 > /tmp/demo-all.out 2> "$OUT/r/demo-all.err"; echo "demo exit $?" >> "$OUT/r/demo-all.err"; grep -v "^\[" "$OUT/r/demo-all.err" | tail -6
(echo "stdout lines: $(wc -l < /tmp/demo-all.out)"; echo "lines not starting 'culinux: ': $(grep -vc '^culinux: ' /tmp/demo-all.out)") | tee "$OUT/r/demo-all-stdout.txt"
timeout 60 ./hostcalls_bin --devices 2 --mode panic --blocks 2 --threads 32 > /dev/null 2> "$OUT/r/panic-2.err"; echo "panic exit $?" >> "$OUT/r/panic-2.err"; grep -v "^\[" "$OUT/r/panic-2.err" | tail -8
cd "$OUT" && tar czf r.tgz r && rm -rf r
