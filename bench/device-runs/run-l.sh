#!/bin/bash
# Device run 10: the build with the consumer's per-lane path inlined: GPU tests, three
# bench pairs with e36613e's (ABBA), the add42 and services examples, conformance; results packed into $OUT/l.tgz.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && tar xzf baseline.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"
STACK_PROBE=0 SKIP_BENCH=1 bash ../../bench/gpu-run.sh . > "$OUT/gpu-run.txt" 2>&1; tail -2 "$OUT/gpu-run.txt"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> /dev/null && timeout 60 ./limits "$OUT/limits.json" > /dev/null 2>&1
for i in 1 2 3; do
  if [ $((i % 2)) = 1 ]; then order="new base"; else order="base new"; fi
  for w in $order; do
    b=./hostcall_bench; [ $w = base ] && b=baseline/hostcall_bench
    timeout 60 $b --limits "$OUT/limits.json" --out "$OUT/$w-$i.json" > "$OUT/$w-$i.txt" 2>&1
    echo "$w $i $(grep -h '132x256: .*null\|1056x256: .*null' "$OUT/$w-$i.txt" | awk '{print $3}' | tr '\n' ' ')"
  done
done
(timeout 60 ./add42 --blocks 1056 --threads 256; echo "add42 exit $?"; timeout 60 ./services; echo "services exit $?") > "$OUT/examples.txt" 2>&1; tail -4 "$OUT/examples.txt"
timeout 100 ./conformance --geometry 132x256 --report "$OUT/conformance.md" > "$OUT/conformance.txt" 2>&1; echo "exit $?" >> "$OUT/conformance.txt"; tail -2 "$OUT/conformance.txt"
./serve_cost >> "$OUT/serve_cost.txt" 2>&1; cat "$OUT/serve_cost.txt"
cd "$OUT" && tar czf /tmp/l.tgz . && rm -rf "$OUT"/* && mv /tmp/l.tgz "$OUT/"
