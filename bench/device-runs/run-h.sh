#!/bin/bash
# Device run 6: the bisection of run-e.sh, pinned to CPUs 2-5 (where the slow plateau shows every time).
# e36613e (base), 9330f4a, fd5764e, c52fef2 and this build, round-robin, R rounds.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && tar xzf baseline.tgz && tar xzf bis.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> /dev/null && timeout 60 ./limits "$OUT/limits.json" > /dev/null 2>&1
for r in $(seq 1 ${R:-3}); do
  for w in base fd5764e c52fef2 new; do
    case $w in base) b=baseline/hostcall_bench;; new) b=./hostcall_bench;; *) b=../bis/hostcall_bench-$w;; esac
    timeout 60 taskset -c 2-5 $b --limits "$OUT/limits.json" --out "$OUT/$w-$r.json" > "$OUT/$w-$r.txt" 2>&1
    echo "$w $r $(grep -h '132x256: .*null' "$OUT/$w-$r.txt" | awk '{print $3}') $(grep -h '1056x256: .*null' "$OUT/$w-$r.txt" | awk '{print $3}')"
  done
done
cd "$OUT" && tar czf /tmp/e.tgz . && rm -rf "$OUT"/* && mv /tmp/e.tgz "$OUT/"
