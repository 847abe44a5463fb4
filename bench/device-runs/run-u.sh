#!/bin/bash
# Device run 19 (two GPUs), the final build, part one: the GPU tests (the two-GPU
# cases and the heatmap example included), conformance at 132x256, the lifetimes,
# add42 and services examples, and the porting guide's host.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
mkdir -p "$OUT/u"
export HOSTCALL_EXAMPLES=$PWD
STACK_PROBE=0 SKIP_BENCH=1 OUT="$OUT/u" bash ../../bench/gpu-run.sh . > "$OUT/u/gpu-run.txt" 2>&1; tail -3 "$OUT/u/gpu-run.txt"; grep -E "FAILED|SKIPPED" -A6 "$OUT/u/gpu-tests.log" | head -20
timeout 100 ./conformance --geometry 132x256 --report "$OUT/u/conformance.md" > "$OUT/u/conformance.txt" 2>&1; echo "exit $?" >> "$OUT/u/conformance.txt"; tail -2 "$OUT/u/conformance.txt"
(timeout 60 ./lifetimes; echo "lifetimes exit $?"; timeout 60 ./add42 --blocks 1056 --threads 256; echo "add42 exit $?"; timeout 60 ./services | grep -v "^hello\|legacy"; echo "services exit $?"; (mkdir -p /tmp/p && cd /tmp/p && timeout 120 "$OLDPWD/porting-host" > /dev/null; echo "porting-host exit $?"; cat data/summary.txt)) > "$OUT/u/examples.txt" 2>&1; grep -v "^\[" "$OUT/u/examples.txt" | tail -14
cd "$OUT" && tar czf u.tgz u && rm -rf u
