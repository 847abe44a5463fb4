#!/bin/bash
# Device run 35, 56cf60b: the first GPU run of a launch's memory freed at its end
# (GpuModule::end_launch), LaunchEnd::IllegalAddress and the reader without prefetch:
# the GPU tests (the stack-sentence case included), conformance at 132x256, the
# stack sentences by hand, and one module launched many times (add42, lifetimes).
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/zl"
export HOSTCALL_EXAMPLES=$PWD
STACK_PROBE=0 SKIP_BENCH=1 OUT="$OUT/zl" bash ../../bench/gpu-run.sh . > "$OUT/zl/gpu-run.txt" 2>&1; tail -2 "$OUT/zl/gpu-run.txt"; grep -E "FAILED|SKIPPED|panicked" -A6 "$OUT/zl/gpu-tests.log" | head -30
timeout 60 ./hostcalls_bin --mode stack-overflow --blocks 1 --threads 32 > /dev/null 2> "$OUT/zl/overflow.err"; echo "overflow exit $?" >> "$OUT/zl/overflow.err"; grep -v "^\[" "$OUT/zl/overflow.err" | tail -3
timeout 60 ./hostcalls_bin --stack-kib 4096 --blocks 1 --threads 32 > /dev/null 2> "$OUT/zl/too-large.err"; echo "too large exit $?" >> "$OUT/zl/too-large.err"; grep -v "^\[" "$OUT/zl/too-large.err" | tail -3
s=$(date +%s%N); timeout 200 ./conformance --geometry 132x256 --report "$OUT/zl/conformance.md" > "$OUT/zl/conformance.txt" 2>&1; echo "exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$OUT/zl/conformance.txt"; tail -2 "$OUT/zl/conformance.txt"
nvidia-smi --query-gpu=memory.used --format=csv >> "$OUT/zl/memory.txt"
cd "$OUT" && tar czf zl.tgz zl && rm -rf zl
