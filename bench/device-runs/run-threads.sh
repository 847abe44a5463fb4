#!/bin/bash
# Device runs of issue 17's panics that reach join: `run-threads.sh NAME`, with the
# bundle of bench/device-runs/bundle.sh. It runs examples/threads against its CPU build
# (stdout and exit code: its stderr has the OS thread ids of panic lines), the GPU tests,
# and conformance at 132x256 (with its spawning programs: spawn and join, scope,
# channels, panics that reach join, more threads than the limit). Copy it into .device
# beside new.tgz and run it there; results in $OUT/NAME.tgz.
set -u
NAME=${1:?usage: run-threads.sh NAME}
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
Z=$OUT/$NAME; mkdir -p "$Z"
for side in cpu gpu; do
  bin=./threads-cpu; [ $side = gpu ] && bin=./threads.gpu
  s=$(date +%s%N); timeout 120 $bin > "$Z/threads-$side.out" 2> "$Z/threads-$side.err"; echo "exit $?" >> "$Z/threads-$side.out"
  echo "threads on the $side: $(( ($(date +%s%N) - s) / 1000000 )) ms"
done
cmp "$Z/threads-cpu.out" "$Z/threads-gpu.out" && echo "threads: stdout and exit code identical"
tail -6 "$Z/threads-gpu.out"; grep -c panicked "$Z/threads-gpu.err"
export HOSTCALL_EXAMPLES=$PWD
STACK_PROBE=0 SKIP_BENCH=1 OUT="$Z" bash ../../bench/gpu-run.sh . > "$Z/gpu-run.txt" 2>&1; tail -2 "$Z/gpu-run.txt"; grep -E "FAILED|SKIPPED" -A8 "$Z/gpu-tests.log" | head -30
s=$(date +%s%N); timeout 300 ./conformance --geometry 132x256 --report "$Z/conformance.md" --artifacts "$Z/differs" > "$Z/conformance.txt" 2>&1; echo "exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$Z/conformance.txt"; tail -2 "$Z/conformance.txt"; grep -v identical "$Z/conformance.md" | tail -n +3 | head -8
grep -E "spawn|scope_borrow|channels_spawned|thread_limit" "$Z/conformance.txt"
cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME"
