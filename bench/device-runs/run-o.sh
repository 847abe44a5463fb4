#!/bin/bash
# Device run 13: issue 16's streams on the GPU: the heatmap example and hostcall_bench's
# stream rows beside limits.cu's device-to-host bandwidth; the lifetimes example again.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
mkdir -p "$OUT/r"
timeout 60 ./heatmap --out "$OUT/r" > "$OUT/r/heatmap.txt" 2>&1; echo "heatmap exit $?" >> "$OUT/r/heatmap.txt"; cat "$OUT/r/heatmap.txt"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> "$OUT/r/nvcc.log" && timeout 120 ./limits "$OUT/r/limits.json" > /dev/null 2> "$OUT/r/limits.err"; cat "$OUT/r/nvcc.log" "$OUT/r/limits.err" "$OUT/r/limits.json"
timeout 300 ./hostcall_bench --streams-only --limits "$OUT/r/limits.json" --out "$OUT/r/streams.json" > "$OUT/r/bench.txt" 2>&1; echo "bench exit $?" >> "$OUT/r/bench.txt"; cat "$OUT/r/bench.txt"
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
timeout 60 ./lifetimes > "$OUT/r/lifetimes.txt" 2>&1; echo "lifetimes exit $?" >> "$OUT/r/lifetimes.txt"; grep -v "^\[" "$OUT/r/lifetimes.txt" | tail -5
cd "$OUT" && tar czf r.tgz r && rm -rf r
