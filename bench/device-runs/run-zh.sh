#!/bin/bash
# Device run 31 (two GPUs), 59a65ed (the writer's one clippy rewrite since d6c989e):
# the GPU tests, the heatmap, the stream rows, conformance at 132x256.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/zh"
export HOSTCALL_EXAMPLES=$PWD
STACK_PROBE=0 SKIP_BENCH=1 OUT="$OUT/zh" bash ../../bench/gpu-run.sh . > "$OUT/zh/gpu-run.txt" 2>&1; tail -2 "$OUT/zh/gpu-run.txt"; grep -E "FAILED|SKIPPED" -A6 "$OUT/zh/gpu-tests.log" | head -20
timeout 60 ./heatmap --out /tmp > "$OUT/zh/heatmap.txt" 2>&1; echo "heatmap exit $?" >> "$OUT/zh/heatmap.txt"; tail -2 "$OUT/zh/heatmap.txt"
timeout 120 ./hostcall_bench --only streams --out "$OUT/zh/streams.json" > "$OUT/zh/streams.txt" 2>&1; echo "exit $?" >> "$OUT/zh/streams.txt"; grep "stream messages\|exit" "$OUT/zh/streams.txt"
s=$(date +%s%N); timeout 200 ./conformance --geometry 132x256 --report "$OUT/zh/conformance.md" > "$OUT/zh/conformance.txt" 2>&1; echo "exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$OUT/zh/conformance.txt"; tail -2 "$OUT/zh/conformance.txt"
cd "$OUT" && tar czf zh.tgz zh && rm -rf zh
