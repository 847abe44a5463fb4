#!/bin/bash
# Device run 1: GPU tests, examples, porting guide, conformance, serve_cost, then one
# bench pair (this build, then e36613e's). Results packed into $OUT/r.tgz.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && tar xzf baseline.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
FINAL=$OUT; export OUT=$FINAL/r; mkdir -p "$OUT"
nvidia-smi -L > "$OUT/device.txt"
STACK_PROBE=0 SKIP_BENCH=1 bash ../../bench/gpu-run.sh . > "$OUT/gpu-run.txt" 2>&1
for g in "132 256" "1056 256"; do set -- $g; timeout 120 ./add42 --blocks $1 --threads $2 > "$OUT/add42-$1x$2.txt" 2>&1; echo "exit $?" >> "$OUT/add42-$1x$2.txt"; done
timeout 120 ./services > "$OUT/services.txt" 2>&1; echo "exit $?" >> "$OUT/services.txt"
HOSTCALL_DEBUG=1 timeout 120 ./services 2>&1 >/dev/null | grep -v "Counter.bump" | grep -v "write_posted" | head -40 > "$OUT/services-trace.txt"
HOSTCALL_DEBUG=summary timeout 120 ./services > /dev/null 2> "$OUT/services-summary.txt"
(mkdir -p /tmp/p && cd /tmp/p && timeout 120 "$OLDPWD/porting-host" > /dev/null 2> "$OUT/porting.txt"; echo "exit $?" >> "$OUT/porting.txt"; cat data/summary.txt >> "$OUT/porting.txt")
timeout 300 ./conformance --geometry 132x256 --report "$OUT/conformance.md" > "$OUT/conformance.txt" 2>&1; echo "exit $?" >> "$OUT/conformance.txt"
HOSTCALL_DEBUG=summary timeout 120 ./hostcalls_bin --blocks 2 --threads 32 > /dev/null 2> "$OUT/demo-summary.txt"; echo "exit $?" >> "$OUT/demo-summary.txt"
./serve_cost > "$OUT/serve_cost.txt" 2>&1; nproc >> "$OUT/serve_cost.txt"; lscpu | grep "Model name" >> "$OUT/serve_cost.txt"
nvcc -O3 -std=c++17 -arch=sm_90 ../../bench/limits.cu -o limits 2> /dev/null && timeout 60 ./limits "$OUT/limits.json" > /dev/null 2>&1
s=$(date +%s); timeout 150 ./hostcall_bench --limits "$OUT/limits.json" --out "$OUT/h100-latest.json" > "$OUT/bench.txt" 2>&1; echo "exit $? in $(( $(date +%s) - s )) s" >> "$OUT/bench.txt"
s=$(date +%s); timeout 150 baseline/hostcall_bench --limits "$OUT/limits.json" --out "$OUT/baseline.json" > "$OUT/baseline.txt" 2>&1; echo "exit $? in $(( $(date +%s) - s )) s" >> "$OUT/baseline.txt"
tail -3 "$OUT/gpu-run.txt"; cat "$OUT/add42-132x256.txt" "$OUT/services.txt" | tail -12; tail -4 "$OUT/conformance.txt"; tail -2 "$OUT/porting.txt"
grep -h "132x256\|1056x256\|exit" "$OUT/bench.txt" "$OUT/baseline.txt"
cd "$FINAL" && tar czf r.tgz r && cp r/h100-latest.json r/conformance.md . 2>/dev/null; rm -rf r
