#!/bin/bash
# Device run 15 (two GPUs), part one: the GPU tests (two-GPU cases included),
# conformance at 132x256, and the lifetimes, add42 and services examples.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"
mkdir -p "$OUT/q"
export HOSTCALL_EXAMPLES=$PWD
STACK_PROBE=0 SKIP_BENCH=1 OUT="$OUT/q" bash ../../bench/gpu-run.sh . > "$OUT/q/gpu-run.txt" 2>&1; tail -3 "$OUT/q/gpu-run.txt"
timeout 100 ./conformance --geometry 132x256 --report "$OUT/q/conformance.md" > "$OUT/q/conformance.txt" 2>&1; echo "exit $?" >> "$OUT/q/conformance.txt"; tail -2 "$OUT/q/conformance.txt"
(timeout 60 ./lifetimes; echo "lifetimes exit $?"; timeout 60 ./add42 --blocks 1056 --threads 256; echo "add42 exit $?"; timeout 60 ./services | grep -v "^hello\|legacy"; echo "services exit $?") > "$OUT/q/examples.txt" 2>&1; grep -v "^\[" "$OUT/q/examples.txt" | tail -14
cd "$OUT" && tar czf q.tgz q && rm -rf q
