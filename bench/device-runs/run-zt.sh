#!/bin/bash
# Device run 43, issue 17 review: libc-hostcall's frame pop finds its stack from the
# frame's address, and the thread areas have one accessor (`area_of`); the programs that
# exercise them against their CPU builds: examples/threads, examples/unmodified with 8
# workers, examples/rayon-json at 10^6 items.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
Z=$OUT/zt; mkdir -p "$Z"
cd text
for p in threads unmodified rayon-json; do
  args=""; [ $p = unmodified ] && args="a.txt b.txt missing.txt"; [ $p = rayon-json ] && args=1000000
  WORKERS=8 SUMMARY=s-cpu.txt timeout 120 ../$p-cpu $args > "$Z/$p-cpu.out" 2> "$Z/$p-cpu.err"; echo "exit $?" >> "$Z/$p-cpu.out"
  s=$(date +%s%N); WORKERS=8 SUMMARY=s-gpu.txt timeout 120 ../$p.gpu $args > "$Z/$p-gpu.out" 2> "$Z/$p-gpu.err"; echo "exit $?" >> "$Z/$p-gpu.out"
  echo "$p on the GPU: $(( ($(date +%s%N) - s) / 1000000 )) ms"
  cmp "$Z/$p-cpu.out" "$Z/$p-gpu.out" && cmp "$Z/$p-cpu.err" "$Z/$p-gpu.err" && echo "$p: stdout, stderr and exit code identical"
done
cmp s-cpu.txt s-gpu.txt && echo "unmodified: summary file identical"
tail -n 3 "$Z/unmodified-gpu.out"
cd "$OUT" && tar czf zt.tgz zt && rm -rf zt
