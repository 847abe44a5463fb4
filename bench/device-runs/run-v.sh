#!/bin/bash
# Device run 20 (two GPUs), the final build, part two: the CUDA C limits and the whole
# hostcall_bench (calls, streams, consumers, both GPUs against one); the heatmap
# images; the demo on both GPUs at 1056x256 into one stdout; the two-GPU panic.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/v"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> "$OUT/v/nvcc.log" && timeout 120 ./limits "$OUT/v/limits.json" > /dev/null 2> "$OUT/v/limits.err"; cat "$OUT/v/limits.json"
timeout 400 ./hostcall_bench --limits "$OUT/v/limits.json" --out "$OUT/v/h100-latest.json" > "$OUT/v/bench.txt" 2>&1; echo "bench exit $?" >> "$OUT/v/bench.txt"; grep -v "^\[" "$OUT/v/bench.txt" | grep -v "^hostcall_bench: [0-9]*x[0-9]*: .*null calls/s, "
timeout 60 ./heatmap --out "$OUT/v" > "$OUT/v/heatmap.txt" 2>&1; echo "heatmap exit $?" >> "$OUT/v/heatmap.txt"; tail -3 "$OUT/v/heatmap.txt"
timeout 100 ./hostcalls_bin --devices all --blocks 1056 --threads 256 > /tmp/demo-all.out 2> "$OUT/v/demo-all.err"; echo "demo exit $?" >> "$OUT/v/demo-all.err"; grep -v "^\[" "$OUT/v/demo-all.err" | tail -6
(echo "stdout lines: $(wc -l < /tmp/demo-all.out)"; echo "lines not starting 'culinux: ': $(grep -vc '^culinux: ' /tmp/demo-all.out)") | tee "$OUT/v/demo-all-stdout.txt"
timeout 60 ./hostcalls_bin --devices 2 --mode panic --blocks 2 --threads 32 > /dev/null 2> "$OUT/v/panic-2.err"; echo "panic exit $?" >> "$OUT/v/panic-2.err"; grep -v "^\[" "$OUT/v/panic-2.err" | tail -8
# Conformance at 132x256 again, timed (the last run's 100 s limit cut it short), and
# three of its threaded programs with one consumer and with the default four.
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
s=$(date +%s%N); timeout 300 ./conformance --geometry 132x256 --report "$OUT/v/conformance.md" > "$OUT/v/conformance.txt" 2>&1; echo "exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$OUT/v/conformance.txt"; tail -2 "$OUT/v/conformance.txt"
for c in 1 4 1 4; do s=$(date +%s%N); HOSTCALL_CONSUMERS=$c timeout 200 ./conformance --geometry 132x256 thread_names heap_stress files_per_thread > /dev/null 2>&1; echo "consumers $c: exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms"; done | tee "$OUT/v/conformance-consumers.txt"
cd "$OUT" && tar czf v.tgz v && rm -rf v
