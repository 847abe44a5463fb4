#!/bin/bash
# Device run 17 (two GPUs): null calls by consumer threads (1 to 8) at 132x256 and
# 1056x256, and the idle CPU of the default; null calls on both GPUs against one with
# the default consumers, in hostcall_bench and in hostcalls_bin, alternating.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/s"
timeout 300 ./hostcall_bench --only consumers --only gpus --out "$OUT/s/consumers.json" > "$OUT/s/bench.txt" 2>&1; echo "bench exit $?" >> "$OUT/s/bench.txt"; grep "hostcall_bench:\|exit\|cpu" "$OUT/s/bench.txt"
for round in 1 2 3; do
  for d in 1 2; do
    for b in 132 1056; do
      timeout 60 ./hostcalls_bin --devices $d --mode null --blocks $b --threads 256 2>&1 | grep -E "OK|FAILED|GPUs:" | sed "s/^/round $round devices=$d $b: /"
    done
  done
done | tee "$OUT/s/null-devices.txt" | grep -v "GPU [01]: OK"
cd "$OUT" && tar czf s.tgz s && rm -rf s
