#!/bin/bash
# Device run 4: the host's cost per lane of e36613e's and this build's server on this
# machine's CPU, then hostcall_bench of both, pinned to CPUs 2-5 and not, round-robin.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && tar xzf baseline.tgz && tar xzf oldsc.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; lscpu > "$OUT/lscpu.txt"
for i in 1 2 3; do ../serve_cost_old; ./serve_cost; done 2>&1 | tee "$OUT/serve_cost.txt"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> /dev/null && timeout 60 ./limits "$OUT/limits.json" > /dev/null 2>&1
for r in $(seq 1 ${R:-3}); do
  for w in new-pinned base-pinned new base; do
    case $w in base*) b=baseline/hostcall_bench;; *) b=./hostcall_bench;; esac
    case $w in *pinned) p="taskset -c 2-5";; *) p="";; esac
    timeout 60 $p $b --limits "$OUT/limits.json" --out "$OUT/$w-$r.json" > "$OUT/$w-$r.txt" 2>&1
    echo "$w $r $(grep -h '132x256: .*null' "$OUT/$w-$r.txt" | awk '{print $3}') $(grep -h '1056x256: .*null' "$OUT/$w-$r.txt" | awk '{print $3}')"
  done
done
cd "$OUT" && tar czf /tmp/f.tgz . && rm -rf "$OUT"/* && mv /tmp/f.tgz "$OUT/"
