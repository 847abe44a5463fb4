#!/bin/bash
# Device run 30 (two GPUs), d6c989e, part two: the CUDA C limits and the whole
# hostcall_bench (calls, streams at the new defaults, consumers, both GPUs against one);
# the heatmap images; the demo on both GPUs at 1056x256 into one stdout.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/zg"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> "$OUT/zg/nvcc.log" && timeout 120 ./limits "$OUT/zg/limits.json" > /dev/null 2> "$OUT/zg/limits.err"; cat "$OUT/zg/limits.json"
timeout 400 ./hostcall_bench --limits "$OUT/zg/limits.json" --out "$OUT/zg/latest.json" > "$OUT/zg/bench.txt" 2>&1; echo "bench exit $?" >> "$OUT/zg/bench.txt"; grep -v "^\[" "$OUT/zg/bench.txt" | grep -v "^hostcall_bench: [0-9]*x[0-9]*: .*null calls/s, " | grep -v "_consumers \|payload"
timeout 60 ./heatmap --out "$OUT/zg" > "$OUT/zg/heatmap.txt" 2>&1; echo "heatmap exit $?" >> "$OUT/zg/heatmap.txt"; tail -3 "$OUT/zg/heatmap.txt"
timeout 100 ./hostcalls_bin --devices all --blocks 1056 --threads 256 > /tmp/demo-all.out 2> "$OUT/zg/demo-all.err"; echo "demo exit $?" >> "$OUT/zg/demo-all.err"; grep -v "^\[" "$OUT/zg/demo-all.err" | tail -4
(echo "stdout lines: $(wc -l < /tmp/demo-all.out)"; echo "lines not starting 'culinux: ': $(grep -vc '^culinux: ' /tmp/demo-all.out)") | tee "$OUT/zg/demo-all-stdout.txt"
cd "$OUT" && tar czf zg.tgz zg && rm -rf zg
