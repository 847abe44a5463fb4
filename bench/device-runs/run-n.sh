#!/bin/bash
# Device run 12: the lifetimes example (a one-shot closure, a continuous one finished
# mid-launch from a host thread, a strict one called past its lifetime), the GPU tests,
# add42, services and conformance, after culinux gained the lifetimes kernels.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
# The CPU side of conformance at 132x256 starts 33,792 OS threads: a fresh machine's
# pid_max is too low for them (this run of the script lacked the line, and two CPU runs
# failed with EAGAIN).
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
timeout 60 ./lifetimes > "$OUT/lifetimes.txt" 2>&1; echo "lifetimes exit $?" >> "$OUT/lifetimes.txt"
grep -v "^\[" "$OUT/lifetimes.txt" | head -12; grep -c "finished serving" "$OUT/lifetimes.txt"
STACK_PROBE=0 SKIP_BENCH=1 bash ../../bench/gpu-run.sh . > "$OUT/gpu-run.txt" 2>&1; tail -2 "$OUT/gpu-run.txt"
(timeout 60 ./add42 --blocks 1056 --threads 256; echo "add42 exit $?"; timeout 60 ./services | grep -v "^hello\|legacy"; echo "services exit $?") > "$OUT/examples.txt" 2>&1; cat "$OUT/examples.txt"
timeout 100 ./conformance --geometry 132x256 --report "$OUT/conformance.md" > "$OUT/conformance.txt" 2>&1; echo "exit $?" >> "$OUT/conformance.txt"; tail -2 "$OUT/conformance.txt"
