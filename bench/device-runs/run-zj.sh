#!/bin/bash
# Device run 33: conformance at 132x256 with stderr put together line by line per GPU
# thread (conformance compares stderr too).
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"
mkdir -p "$OUT/zj"
s=$(date +%s%N); timeout 250 ./conformance --geometry 132x256 --report "$OUT/zj/conformance.md" > "$OUT/zj/conformance.txt" 2>&1; echo "exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$OUT/zj/conformance.txt"; tail -2 "$OUT/zj/conformance.txt"
cd "$OUT" && tar czf zj.tgz zj && rm -rf zj
