#!/bin/bash
# Device run 24: batches with one commit word and readers dispatching at once (new)
# against the build before them (prev_bench), beside limits.cu; new with 8 readers and
# with rings of 256 KiB; the heatmap check.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/z"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> "$OUT/z/nvcc.log" && timeout 120 ./limits "$OUT/z/limits.json" > /dev/null 2> "$OUT/z/limits.err"; grep -o '"d2h[^,]*\|"mapped[^,]*' "$OUT/z/limits.json"
timeout 60 ./heatmap --out "$OUT/z" > "$OUT/z/heatmap.txt" 2>&1; echo "heatmap exit $?" >> "$OUT/z/heatmap.txt"; tail -2 "$OUT/z/heatmap.txt"
for b in "hostcall_bench" "prev_bench" "hostcall_bench --stream-readers 8" "hostcall_bench --stream-ring-kib 256" "hostcall_bench --stream-readers 8 --stream-ring-kib 256"; do
  n=$(echo $b | tr ' ' '_')
  timeout 120 ./$b --only streams --limits "$OUT/z/limits.json" --out "$OUT/z/$n.json" > "$OUT/z/$n.txt" 2>&1; echo "exit $?" >> "$OUT/z/$n.txt"; grep "stream messages\|exit" "$OUT/z/$n.txt" | sed "s/^/$n: /"
done
cd "$OUT" && tar czf z.tgz z && rm -rf z
