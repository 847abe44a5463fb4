#!/bin/bash
# Device run: GPU tests, the examples, the porting guide, conformance, then limits,
# hostcall_bench and the previous commit's hostcall_bench. Everything lands in $OUT/r,
# packed into $OUT/r.tgz (the device tool returns at most 8 files).
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && tar xzf baseline.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
FINAL=$OUT; export OUT=$FINAL/r; mkdir -p "$OUT"
nvidia-smi -L > "$OUT/device.txt"
STACK_PROBE=0 SKIP_BENCH=1 bash ../../bench/gpu-run.sh . > "$OUT/gpu-run.txt" 2>&1
for g in "132 256" "1056 256"; do set -- $g; timeout 120 ./add42 --blocks $1 --threads $2 > "$OUT/add42-$1x$2.txt" 2>&1; echo "exit $?" >> "$OUT/add42-$1x$2.txt"; done
timeout 120 ./services > "$OUT/services.txt" 2>&1; echo "exit $?" >> "$OUT/services.txt"
HOSTCALL_DEBUG=1 timeout 120 ./services 2>&1 >/dev/null | grep -v "Counter.bump" | grep -v "write_posted" | head -40 > "$OUT/services-trace.txt"
HOSTCALL_DEBUG=1 timeout 120 ./services 2>&1 >/dev/null | grep -m 5 "Counter.bump" >> "$OUT/services-trace.txt"
HOSTCALL_DEBUG=summary timeout 120 ./services > /dev/null 2> "$OUT/services-summary.txt"
(mkdir -p /tmp/p && cd /tmp/p && timeout 120 "$OLDPWD/porting-host" > /dev/null 2> "$OUT/porting.txt"; echo "exit $?" >> "$OUT/porting.txt"; cat data/summary.txt >> "$OUT/porting.txt")
timeout 300 ./conformance --geometry 132x256 --report "$OUT/conformance.md" > "$OUT/conformance.txt" 2>&1; echo "exit $?" >> "$OUT/conformance.txt"
SKIP_TESTS=1 STACK_PROBE=0 bash ../../bench/gpu-run.sh . > "$OUT/bench-run.txt" 2>&1
mkdir -p "$OUT/second"
timeout 200 ./hostcall_bench --limits "$OUT/limits.json" --out "$OUT/second/h100-latest.json" > "$OUT/second/bench.txt" 2>&1
timeout 200 baseline/hostcall_bench --limits "$OUT/limits.json" --out "$OUT/second/baseline.json" > "$OUT/second/baseline.txt" 2>&1
./serve_cost > "$OUT/serve_cost.txt" 2>&1; nproc >> "$OUT/serve_cost.txt"; lscpu | grep "Model name" >> "$OUT/serve_cost.txt"
cd "$FINAL" && tar czf r.tgz r && cp r/h100-latest.json r/conformance.md . 2>/dev/null; rm -rf r
