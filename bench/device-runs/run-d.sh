#!/bin/bash
# Device run 2: hostcall_bench of this build and of e36613e's, interleaved (ABBA...), N pairs.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && tar xzf baseline.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
if [ "${TESTS:-0}" = 1 ]; then
  STACK_PROBE=0 SKIP_BENCH=1 bash ../../bench/gpu-run.sh . > "$OUT/gpu-run.txt" 2>&1; tail -3 "$OUT/gpu-run.txt"
  timeout 300 ./conformance --geometry 132x256 --report "$OUT/conformance.md" > "$OUT/conformance.txt" 2>&1; echo "exit $?" >> "$OUT/conformance.txt"; tail -2 "$OUT/conformance.txt"
  HOSTCALL_DEBUG=1 timeout 60 ./hostcalls_bin --blocks 1 --threads 4 > /dev/null 2> "$OUT/demo-trace.txt"
fi
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> /dev/null && timeout 60 ./limits "$OUT/limits.json" > /dev/null 2>&1
for i in $(seq 1 ${PAIRS:-3}); do
  if [ $((i % 2)) = 1 ]; then order="new base"; else order="base new"; fi
  for w in $order; do
    b=./hostcall_bench; [ $w = base ] && b=baseline/hostcall_bench
    timeout 120 $b --limits "$OUT/limits.json" --out "$OUT/$w-$i.json" > "$OUT/$w-$i.txt" 2>&1
    echo "== $w $i exit $?"; grep -h "132x256\|1056x256\|round trip" "$OUT/$w-$i.txt"
  done
done
cd "$OUT" && tar czf /tmp/d.tgz . && rm -rf "$OUT"/* && mv /tmp/d.tgz "$OUT/"
