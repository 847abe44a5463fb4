#!/bin/bash
# Device run 27: rings large enough for every message (1024 x 504 KiB): the writers
# never wait for the host, so GPU time is the GPU side's alone; against 64 x 256 KiB.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
mkdir -p "$OUT/zc"
for b in "--stream-readers 16 --stream-rings 1024 --stream-ring-kib 504" "--stream-readers 4 --stream-rings 1024 --stream-ring-kib 504" "--stream-readers 16 --stream-ring-kib 256"; do
  n=$(echo $b | tr ' ' '_')
  timeout 200 ./hostcall_bench $b --only streams --out "$OUT/zc/$n.json" > "$OUT/zc/$n.txt" 2>&1; echo "exit $?" >> "$OUT/zc/$n.txt"; grep "stream messages\|exit" "$OUT/zc/$n.txt" | sed "s/^/$n: /" | sed 's/hostcall_bench: //; s/ stream messages\/s of/ M\/s/'
done
cd "$OUT" && tar czf zc.tgz zc && rm -rf zc
