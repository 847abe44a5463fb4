#!/bin/bash
# Device run 5: CPU use by thread of this build's and e36613e's hostcall_bench, pinned to
# CPUs 2-5: /usr/bin/time and per-thread samples while it runs.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && tar xzf baseline.tgz && cd new
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> /dev/null && timeout 60 ./limits "$OUT/limits.json" > /dev/null 2>&1
which perf > "$OUT/tools.txt" 2>&1; ls /usr/bin/time >> "$OUT/tools.txt" 2>&1
for r in 1 2; do
  for w in new base; do
    b=./hostcall_bench; [ $w = base ] && b=baseline/hostcall_bench
    taskset -c 2-5 $b --limits "$OUT/limits.json" --out "$OUT/$w-$r.json" > "$OUT/$w-$r.txt" 2>&1 &
    pid=$!
    for s in 1 2 3; do echo "-- sample $s"; top -H -b -n 2 -d 1 -p $pid | awk '/^top -/{n++} n==2' | sed -n '7,16p'; done > "$OUT/$w-$r-threads.txt" 2>&1
    wait $pid
    grep -h '132x256: .*null' "$OUT/$w-$r.txt" | sed "s/^/$w $r /"
    grep -h "" "$OUT/$w-$r-threads.txt" | head -30
  done
done
cd "$OUT" && tar czf /tmp/g.tgz . && rm -rf "$OUT"/* && mv /tmp/g.tgz "$OUT/"
