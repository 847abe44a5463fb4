#!/bin/bash
# Device run 25: the ring's tail relayed through device memory, one writer per ring
# reading host memory (new), against batches alone (z_bench, run-z's build), in turn
# twice, with 8 readers and rings of 256 KiB, then with 4 and 64 KiB; the heatmap check.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/za"
timeout 60 ./heatmap --out "$OUT/za" > "$OUT/za/heatmap.txt" 2>&1; echo "heatmap exit $?" >> "$OUT/za/heatmap.txt"; tail -2 "$OUT/za/heatmap.txt"
for i in 1 2; do
  for b in "hostcall_bench --stream-readers 8 --stream-ring-kib 256" "z_bench --stream-readers 8 --stream-ring-kib 256"; do
    n=$(echo $b | tr ' ' '_')-$i
    timeout 120 ./$b --only streams --out "$OUT/za/$n.json" > "$OUT/za/$n.txt" 2>&1; echo "exit $?" >> "$OUT/za/$n.txt"; grep "stream messages\|exit" "$OUT/za/$n.txt" | sed "s/^/$n: /"
  done
done
for b in hostcall_bench z_bench; do
  timeout 120 ./$b --only streams --out "$OUT/za/$b.json" > "$OUT/za/$b.txt" 2>&1; echo "exit $?" >> "$OUT/za/$b.txt"; grep "stream messages\|exit" "$OUT/za/$b.txt" | sed "s/^/$b: /"
done
cd "$OUT" && tar czf za.tgz za && rm -rf za
