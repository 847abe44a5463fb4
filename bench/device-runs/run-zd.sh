#!/bin/bash
# Device run 28: the stream descriptor in device memory and the writer's 32-bit batch
# arithmetic (new) against run-zb's build (zb_bench), in turn twice, 16 readers and
# 64 x 256 KiB rings; then both with rings for every message (the GPU side alone);
# new with 8 readers; heatmap.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
mkdir -p "$OUT/zd"
timeout 60 ./heatmap --out "$OUT/zd" > "$OUT/zd/heatmap.txt" 2>&1; echo "heatmap exit $?" >> "$OUT/zd/heatmap.txt"; tail -2 "$OUT/zd/heatmap.txt"
for c in "hostcall_bench --stream-readers 16 --stream-ring-kib 256" "zb_bench --stream-readers 16 --stream-ring-kib 256" "hostcall_bench --stream-readers 16 --stream-ring-kib 256" "zb_bench --stream-readers 16 --stream-ring-kib 256" "hostcall_bench --stream-readers 16 --stream-rings 1024 --stream-ring-kib 504" "zb_bench --stream-readers 16 --stream-rings 1024 --stream-ring-kib 504" "hostcall_bench --stream-readers 8 --stream-ring-kib 256"; do
  n=$(echo $c | tr ' ' '_')
  timeout 200 ./$c --only streams --out "$OUT/zd/$n.json" > "$OUT/zd/$n.txt" 2>&1; echo "exit $?" >> "$OUT/zd/$n.txt"; grep "stream messages\|exit" "$OUT/zd/$n.txt" | sed "s/^/$n: /" | sed 's/hostcall_bench: //; s/ stream messages\/s of/ M\/s/; s/--stream-//g'
done
cd "$OUT" && tar czf zd.tgz zd && rm -rf zd
