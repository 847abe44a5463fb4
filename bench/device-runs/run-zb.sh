#!/bin/bash
# Device run 26: the reader prefetching each batch's lines (new) against run-za's build
# (relay_bench), rings of 256 KiB, 8 readers in turn twice; new with 12 and 16 readers.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"; lscpu >> "$OUT/device.txt"
mkdir -p "$OUT/zb"
for b in "hostcall_bench --stream-readers 8" "relay_bench --stream-readers 8" "hostcall_bench --stream-readers 8" "relay_bench --stream-readers 8" "hostcall_bench --stream-readers 12" "hostcall_bench --stream-readers 16"; do
  n=$(echo $b | tr ' ' '_')
  timeout 120 ./$b --stream-ring-kib 256 --only streams --out "$OUT/zb/$n.json" > "$OUT/zb/$n.txt" 2>&1; echo "exit $?" >> "$OUT/zb/$n.txt"; grep "stream messages\|exit" "$OUT/zb/$n.txt" | sed "s/^/$n: /" | sed 's/hostcall_bench: //; s/ stream messages\/s of/ M\/s/; s/ M\/s end to end//'
done
cd "$OUT" && tar czf zb.tgz zb && rm -rf zb
