#!/bin/bash
# Device run 42, issue 17: `examples/threads` (spawn and Builder, a rendezvous channel,
# many senders, Barrier, RwLock, OnceLock, Condvar, park/unpark, sleep, is_finished,
# scoped threads writing locals) against its CPU build.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
Z=$OUT/zs; mkdir -p "$Z"
timeout 60 ./threads-cpu > "$Z/cpu.out" 2>&1; echo "exit $?" >> "$Z/cpu.out"
s=$(date +%s%N); timeout 120 ./threads.gpu > "$Z/gpu.out" 2>&1; echo "exit $?" >> "$Z/gpu.out"; echo "GPU: $(( ($(date +%s%N) - s) / 1000000 )) ms"
cmp "$Z/cpu.out" "$Z/gpu.out" && echo "threads: identical"; cat "$Z/gpu.out"
cd "$OUT" && tar czf zs.tgz zs && rm -rf zs
