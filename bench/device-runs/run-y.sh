#!/bin/bash
# Device run 23 (two GPUs): streams with one division per record (new) against one per
# word (prev), four readers each, and new with eight; the heatmap check.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
mkdir -p "$OUT/y"
timeout 60 ./heatmap --out /tmp > "$OUT/y/heatmap.txt" 2>&1; echo "heatmap exit $?" >> "$OUT/y/heatmap.txt"; tail -2 "$OUT/y/heatmap.txt"
for b in "hostcall_bench" "prev_bench" "hostcall_bench --stream-readers 8"; do
  n=$(echo $b | tr ' ' '_')
  timeout 100 ./$b --only streams --out "$OUT/y/$n.json" > "$OUT/y/$n.txt" 2>&1; echo "exit $?" >> "$OUT/y/$n.txt"; grep "stream messages\|exit" "$OUT/y/$n.txt" | sed "s/^/$n: /"
done
cd "$OUT" && tar czf y.tgz y && rm -rf y
