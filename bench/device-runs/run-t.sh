#!/bin/bash
# Device run 18 (two GPUs): the stream rows of a build whose warps store their records
# together, word-major (new), against the build before it (prev: each lane its own
# record), in turn twice; limits.cu with the 72-byte record stores; the heatmap check.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
mkdir -p "$OUT/t"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> "$OUT/t/nvcc.log" && timeout 120 ./limits "$OUT/t/limits.json" > /dev/null 2> "$OUT/t/limits.err"; cat "$OUT/t/nvcc.log" "$OUT/t/limits.json"
timeout 60 ./heatmap --out "$OUT/t" > "$OUT/t/heatmap.txt" 2>&1; echo "heatmap exit $?" >> "$OUT/t/heatmap.txt"; tail -2 "$OUT/t/heatmap.txt"
for i in 1 2; do
  for b in hostcall_bench prev_bench; do
    timeout 200 ./$b --only streams --limits "$OUT/t/limits.json" --out "$OUT/t/$b-$i.json" > "$OUT/t/$b-$i.txt" 2>&1; echo "$b exit $?" >> "$OUT/t/$b-$i.txt"; grep "hostcall_bench:.*stream\|exit" "$OUT/t/$b-$i.txt" | sed "s/^/$b $i: /"
  done
done
cd "$OUT" && tar czf t.tgz t && rm -rf t
