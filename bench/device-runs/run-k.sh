#!/bin/bash
# Device run 9: rdtsc accounts of the consumer's segments per lane, e36613e's and this
# build's (both instrumented alike), alternating.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && tar xzf var.tgz && cd new
for r in $(seq 1 ${N:-10}); do
  for w in basestats stats; do
    echo "$w $(HOSTCALL_CONSUMER_STATS=1 timeout 30 ../var/hostcalls_bin-$w --mode null --blocks 132 --threads 256 2>&1 | grep -E 'consumer|M/s' | tr '\n' ' ')"
  done
done | sed -e 's/hostcalls_bin: OK: 2162688 verified null round trips in //' | tee "$OUT/k.txt"
