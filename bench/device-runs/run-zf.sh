#!/bin/bash
# Device run 29 (two GPUs), d6c989e, part one: the GPU tests (the two-GPU cases and
# the heatmap example included), conformance at 132x256 timed, the lifetimes, add42
# and services examples, and the porting guide's host.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/zf"
export HOSTCALL_EXAMPLES=$PWD
STACK_PROBE=0 SKIP_BENCH=1 OUT="$OUT/zf" bash ../../bench/gpu-run.sh . > "$OUT/zf/gpu-run.txt" 2>&1; tail -3 "$OUT/zf/gpu-run.txt"; grep -E "FAILED|SKIPPED" -A6 "$OUT/zf/gpu-tests.log" | head -20
s=$(date +%s%N); timeout 200 ./conformance --geometry 132x256 --report "$OUT/zf/conformance.md" > "$OUT/zf/conformance.txt" 2>&1; echo "exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$OUT/zf/conformance.txt"; tail -2 "$OUT/zf/conformance.txt"
(timeout 60 ./lifetimes; echo "lifetimes exit $?"; timeout 60 ./add42 --blocks 1056 --threads 256; echo "add42 exit $?"; timeout 60 ./services | grep -v "^hello\|legacy"; echo "services exit $?"; (mkdir -p /tmp/p && cd /tmp/p && timeout 120 "$OLDPWD/porting-host" > /dev/null; echo "porting-host exit $?"; cat data/summary.txt)) > "$OUT/zf/examples.txt" 2>&1; grep -v "^\[" "$OUT/zf/examples.txt" | tail -14
cd "$OUT" && tar czf zf.tgz zf && rm -rf zf
