#!/bin/bash
# Device run 39, issue 17: conformance's `unsupported` program with its new expectation
# (spawning in a launch that holds no thread back is EAGAIN), and the threads benchmark
# again, the GPU side at a 64 KiB stack (at the default 16 KiB, rayon's sum over 10^8
# items overflowed it in run-zo.sh).
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
Z=$OUT/zp; mkdir -p "$Z"
timeout 60 ./conformance unsupported --report "$Z/unsupported.md" > "$Z/unsupported.txt" 2>&1; echo "exit $?" >> "$Z/unsupported.txt"; tail -2 "$Z/unsupported.txt"
for side in cpu gpu cpu gpu; do
  bin=./threads-bench-cpu; [ $side = gpu ] && bin=./threads-bench.gpu
  s=$(date +%s%N); timeout 200 $bin >> "$Z/threads-$side.json" 2>> "$Z/threads-$side.err"; echo "threads-bench on the $side: exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a "$Z/threads-$side.err"
done
cat "$Z"/threads-*.json; grep -v "^threads-bench on" "$Z"/threads-gpu.err | tail -3
cd "$OUT" && tar czf zp.tgz zp && rm -rf zp
