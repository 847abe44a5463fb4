#!/bin/bash
# Device run 38, issue 17 (threads on the GPU, ABI 8): the GPU tests with the new case
# `unmodified_programs_under_cargo_gpu_match_the_cpu` (the `cargo gpu` programs packaged
# here, beside their CPU builds), conformance at 132x256, the threads benchmark on the
# CPU and on the GPU (bench/threads), and the whole hostcall_bench beside limits.cu.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
Z=$OUT/zo; mkdir -p "$Z"
export HOSTCALL_EXAMPLES=$PWD
STACK_PROBE=0 SKIP_BENCH=1 OUT="$Z" bash ../../bench/gpu-run.sh . > "$Z/gpu-run.txt" 2>&1; tail -2 "$Z/gpu-run.txt"; grep -E "FAILED|SKIPPED|cargo_gpu|as on the CPU" -A6 "$Z/gpu-tests.log" | head -30
s=$(date +%s%N); timeout 200 ./conformance --geometry 132x256 --report "$Z/conformance.md" > "$Z/conformance.txt" 2>&1; echo "exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$Z/conformance.txt"; tail -2 "$Z/conformance.txt"
for side in cpu gpu; do
  bin=./threads-bench-cpu; [ $side = gpu ] && bin=./threads-bench.gpu
  s=$(date +%s%N); timeout 200 $bin > "$Z/threads-$side.json" 2> "$Z/threads-$side.err"; echo "threads-bench on the $side: exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a "$Z/threads-$side.err"
  cat "$Z/threads-$side.json"; tail -n 3 "$Z/threads-$side.err"
done
STACK_PROBE=0 SKIP_TESTS=1 OUT="$Z" bash ../../bench/gpu-run.sh . > "$Z/bench-run.txt" 2>&1; grep -E "exit|64_byte" "$Z/bench.txt" | tail -4
cd "$OUT" && tar czf zo.tgz zo && rm -rf zo
