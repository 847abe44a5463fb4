#!/bin/bash
# Device runs 44 to 49 of issue 17, std::net: `run-net.sh NAME` (zu to zz), each with
# the bundle of its build (bench/device-runs/bundle.sh):
#   zu  the first build: try_clone (dup) missing, socket errors as "Unknown error", and
#       6 MB/s reads (a lane loading the bulk buffer a word at a time);
#   zv  ReadToDevice; zw  writes of 4 KiB and more by DMA (DEVICE_WRITE_MIN, was
#       256 KiB); zx  37bf8c1, lanes that wait on a peer are a pool job each;
#   zy  an experiment not kept: a ReadToDevice of at most 256 bytes answered in the
#       bulk buffer; zz  4f6fc47, the review (libc's answers through calls::answer,
#       the socket count read off the fd table, the refused connection's message).
# It runs examples/net against its CPU build (loopback: HTTP server thread and client,
# UDP echo, refused, non-blocking, timeout), bench/net (the same echo server on the CPU
# and on the GPU, measured by one CPU client, each twice in turn), the GPU tests (with
# the GPU serving a host client and fetching from a host server) and conformance at
# 132x256. Copy it into .device beside new.tgz and run it there; results in
# $OUT/NAME.tgz.
set -u
NAME=${1:?usage: run-net.sh NAME}
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
Z=$OUT/$NAME; mkdir -p "$Z"
for side in cpu gpu; do
  bin=./net-cpu; [ $side = gpu ] && bin=./net.gpu
  s=$(date +%s%N); timeout 60 $bin > "$Z/net-$side.out" 2> "$Z/net-$side.err"; echo "exit $?" >> "$Z/net-$side.out"
  echo "net on the $side: $(( ($(date +%s%N) - s) / 1000000 )) ms"
done
cmp "$Z/net-cpu.out" "$Z/net-gpu.out" && cmp "$Z/net-cpu.err" "$Z/net-gpu.err" && echo "net: stdout, stderr and exit code identical"
cat "$Z/net-gpu.out"; head -5 "$Z/net-gpu.err"
for round in 1 2; do
  for side in cpu gpu; do
    port=$((7000 + round * 10)); [ $side = gpu ] && port=$((port + 1))
    if [ $side = gpu ]; then timeout 180 ./net-bench.gpu echo 127.0.0.1:$port 2 > "$Z/echo-$side-$round.txt" 2>&1 &
    else timeout 180 ./net-bench-cpu echo 127.0.0.1:$port 2 > "$Z/echo-$side-$round.txt" 2>&1 & fi
    timeout 170 ./net-bench-cpu client 127.0.0.1:$port > "$Z/bench-$side-$round.json" 2>&1; echo "client exit $?" >> "$Z/echo-$side-$round.txt"
    wait
    echo "$side $round: $(cat "$Z/bench-$side-$round.json")"
  done
done
export HOSTCALL_EXAMPLES=$PWD
STACK_PROBE=0 SKIP_BENCH=1 OUT="$Z" bash ../../bench/gpu-run.sh . > "$Z/gpu-run.txt" 2>&1; tail -2 "$Z/gpu-run.txt"; grep -E "FAILED|SKIPPED|net:" -A8 "$Z/gpu-tests.log" | head -30
s=$(date +%s%N); timeout 200 ./conformance --geometry 132x256 --report "$Z/conformance.md" > "$Z/conformance.txt" 2>&1; echo "exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$Z/conformance.txt"; tail -2 "$Z/conformance.txt"; grep -v identical "$Z/conformance.md" | tail -n +3 | head -5
cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME"
