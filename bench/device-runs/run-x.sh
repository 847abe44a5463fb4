#!/bin/bash
# Device run 22 (two GPUs), 0b9e731: consumers but the first park when idle. Null calls
# by consumers and the default's idle CPU; both GPUs against one; the ping, mixed and
# sleep-then-latency modes with the default four consumers.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/x"
timeout 200 ./hostcall_bench --only consumers --only gpus --out "$OUT/x/consumers.json" > "$OUT/x/bench.txt" 2>&1; echo "bench exit $?" >> "$OUT/x/bench.txt"; grep "hostcall_bench:\|exit\|default_consumers" "$OUT/x/bench.txt"
for m in ping mixed; do timeout 60 ./hostcalls_bin --mode $m --blocks 1056 --threads 256 2>&1 | grep -E "OK|FAILED" | sed "s/^/$m: /"; done | tee "$OUT/x/modes.txt"
for d in 1 2 1 2; do timeout 60 ./hostcalls_bin --devices $d --mode null --blocks 1056 --threads 256 2>&1 | grep -E "OK|GPUs:" | grep -v "GPU [01]: OK" | sed "s/^/devices=$d: /"; done | tee -a "$OUT/x/modes.txt"
cd "$OUT" && tar czf x.tgz x && rm -rf x
