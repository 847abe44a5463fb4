#!/bin/bash
# Device run 41, issue 17: a panic ends the run with 101 (fixup 0009, Lifecycle's
# panic_abort): the GPU tests (the panic cases now expect 101, the allocation failure's
# abort 134) and conformance at 132x256 (its CPU side now ends a panic with 101 too).
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
Z=$OUT/zr; mkdir -p "$Z"
export HOSTCALL_EXAMPLES=$PWD
STACK_PROBE=0 SKIP_BENCH=1 OUT="$Z" bash ../../bench/gpu-run.sh . > "$Z/gpu-run.txt" 2>&1; tail -2 "$Z/gpu-run.txt"; grep -E "FAILED|SKIPPED" -A8 "$Z/gpu-tests.log" | head -30
s=$(date +%s%N); timeout 200 ./conformance --geometry 132x256 --report "$Z/conformance.md" > "$Z/conformance.txt" 2>&1; echo "exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$Z/conformance.txt"; tail -2 "$Z/conformance.txt"; grep -v identical "$Z/conformance.md" | tail -n +3 | head -5
./hostcalls_bin --mode panic --blocks 2 --threads 32 > /dev/null 2> "$Z/panic.err"; echo "panic exit $?" >> "$Z/panic.err"; grep -v "^\[" "$Z/panic.err" | tail -4
cd "$OUT" && tar czf zr.tgz zr && rm -rf zr
