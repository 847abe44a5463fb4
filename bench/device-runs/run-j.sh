#!/bin/bash
# Device run 8: the consumer's own account in real runs (this build, instrumented):
# packets, lanes, time inside serve_port and its share of the busy span, scans.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && tar xzf var.tgz && cd new
for r in $(seq 1 ${N:-12}); do
  HOSTCALL_CONSUMER_STATS=1 timeout 30 ../var/hostcalls_bin-stats --mode null --blocks ${B:-132} --threads 256 2>&1 | grep -E "consumer|M/s" | tr '\n' ' '; echo
done | tee "$OUT/stats.txt"
