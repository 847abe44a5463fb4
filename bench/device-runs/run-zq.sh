#!/bin/bash
# Device run 40, issue 17: `examples/registry` (serde + serde_json with derive, regex,
# rand seeded, sha2, itertools, hashbrown, smallvec) against its CPU build at 1, 64 and
# 528 threads; `examples/unmodified` as Buck2 packaged it (`gpu_program`) against the
# CPU; the threads benchmark with the default heap (half the free GPU memory).
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
Z=$OUT/zq; mkdir -p "$Z"
for t in 1 64 528; do
  THREADS=$t timeout 300 ./registry-cpu > "$Z/registry-cpu-$t.out" 2>&1; echo "exit $?" >> "$Z/registry-cpu-$t.out"
  s=$(date +%s%N); THREADS=$t timeout 300 ./registry.gpu > "$Z/registry-gpu-$t.out" 2>&1; echo "exit $?" >> "$Z/registry-gpu-$t.out"; echo "registry on the GPU at $t threads: $(( ($(date +%s%N) - s) / 1000000 )) ms"
  cmp "$Z/registry-cpu-$t.out" "$Z/registry-gpu-$t.out" && echo "registry at $t threads: identical"
done
cat "$Z/registry-gpu-528.out"
cd text
for side in cpu gpu; do
  bin=../unmodified-cpu; [ $side = gpu ] && bin=../unmodified-buck2.gpu
  timeout 120 $bin a.txt b.txt > "$Z/buck2-$side.out" 2> "$Z/buck2-$side.err"; echo "exit $?" >> "$Z/buck2-$side.out"
done
cmp "$Z/buck2-cpu.out" "$Z/buck2-gpu.out" && cmp "$Z/buck2-cpu.err" "$Z/buck2-gpu.err" && echo "unmodified packaged by Buck2: identical"
cd ..
s=$(date +%s%N); timeout 200 ./threads-bench.gpu > "$Z/threads-gpu.json" 2> "$Z/threads-gpu.err"; echo "threads-bench on the GPU, default heap: exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms"; cat "$Z/threads-gpu.json"; tail -n 2 "$Z/threads-gpu.err"
cd "$OUT" && tar czf zq.tgz zq && rm -rf zq
