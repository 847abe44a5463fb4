#!/bin/bash
# Device run 14 (two GPUs): issue 16's streams after warp-aggregated reservations and
# the ring fix, beside the build before them (old_streams_bench); null calls on both
# GPUs at once against one; the demo on every GPU at once; the heatmap example.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
mkdir -p "$OUT/p"
timeout 60 ./heatmap --out "$OUT/p" > "$OUT/p/heatmap.txt" 2>&1; echo "heatmap exit $?" >> "$OUT/p/heatmap.txt"; tail -3 "$OUT/p/heatmap.txt"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> "$OUT/p/nvcc.log" && timeout 120 ./limits "$OUT/p/limits.json" > /dev/null 2> "$OUT/p/limits.err"; cat "$OUT/p/limits.json"
for i in 1 2; do
  timeout 200 ./hostcall_bench --only streams --only gpus --limits "$OUT/p/limits.json" --out "$OUT/p/new-$i.json" > "$OUT/p/new-$i.txt" 2>&1; echo "bench exit $?" >> "$OUT/p/new-$i.txt"; grep "hostcall_bench:" "$OUT/p/new-$i.txt"
  timeout 200 ./old_streams_bench --streams-only --limits "$OUT/p/limits.json" --out "$OUT/p/old-$i.json" > "$OUT/p/old-$i.txt" 2>&1; echo "old bench exit $?" >> "$OUT/p/old-$i.txt"; grep "hostcall_bench:" "$OUT/p/old-$i.txt"
done
for d in 1 2 1 2; do
  for b in 132 1056; do
    timeout 60 ./hostcalls_bin --devices $d --mode null --blocks $b --threads 256 2>&1 | grep -E "OK|FAILED|GPUs:" | sed "s/^/devices=$d $b: /"
  done
done | tee "$OUT/p/null-devices.txt"
# The one stdout both GPUs echo to: every line whole (a culinux line), none lost.
timeout 100 ./hostcalls_bin --devices all --blocks 1056 --threads 256 > /tmp/demo-all.out 2> "$OUT/p/demo-all.err"; echo "demo exit $?" >> "$OUT/p/demo-all.err"; grep -v "^\[" "$OUT/p/demo-all.err" | tail -8
(echo "stdout lines: $(wc -l < /tmp/demo-all.out)"; echo "lines not starting 'culinux: ': $(grep -vc '^culinux: ' /tmp/demo-all.out)"; echo "distinct lines: $(sort -u /tmp/demo-all.out | wc -l)") | tee "$OUT/p/demo-all-stdout.txt"
cd "$OUT" && tar czf p.tgz p && rm -rf p
