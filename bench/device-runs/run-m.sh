#!/bin/bash
# Device run 11: typed calls against null calls, one launch per process (a run's plateau
# belongs to its process), round-robin at 132x256 and 1056x256; then the GPU tests.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
for r in $(seq 1 ${N:-15}); do
  for b in 132 1056; do
    for m in null typed; do
      x=$(timeout 30 ./hostcalls_bin --mode $m --blocks $b --threads 256 2>&1 | grep -o "([0-9.]* M/s)" | tr -d '(M/s)')
      echo "$m $b $r $x"
    done
  done
done > "$OUT/typed-vs-null.txt"
for b in 132 1056; do for m in null typed; do
  echo "$m ${b}x256 median $(grep "^$m $b " "$OUT/typed-vs-null.txt" | awk '{print $4}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)], "range", a[1], a[NR], "n", NR}')"
done; done | tee "$OUT/typed-vs-null-summary.txt"
STACK_PROBE=0 SKIP_BENCH=1 bash ../../bench/gpu-run.sh . > "$OUT/gpu-run.txt" 2>&1; tail -2 "$OUT/gpu-run.txt"
