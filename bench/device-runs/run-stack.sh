#!/bin/bash
# Device runs of issue 17's computed stacks and its new conformance programs:
# `run-stack.sh NAME`, with the bundle of bench/device-runs/bundle.sh. It runs the
# registry-crate programs (serde_json, regex, rand, sha2, itertools, hashbrown, smallvec)
# at 16 KiB, the GPU tests, and conformance at one thread and 132x256 with each module's
# computed stack (registry crates on every thread, loopback TCP and UDP). Copy it into .device beside new.tgz and run it there; results in
# $OUT/NAME.tgz.
set -u
NAME=${1:?usage: run-stack.sh NAME}
# Each part runs where its binaries were carried: the bundle may come in two calls
# (conformance alone, then the rest), when one would pass the device's carry limit.
cd "$(dirname "$0")" && for t in *.tgz; do tar xzf "$t"; done && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
Z=$OUT/$NAME; mkdir -p "$Z"
if [ -x ./conformance ]; then
# The registry programs at 16 KiB, the stack every module had before stacks were computed.
timeout 300 ./conformance --stack-kib 16 --artifacts "$Z/at-16k" serde_records regex_compile rand_sha2 crate_collections > "$Z/at-16k.txt" 2>&1; echo "exit $?" >> "$Z/at-16k.txt"; cat "$Z/at-16k.txt"
fi
if [ -x ./gpu-tests ]; then
export HOSTCALL_EXAMPLES=$PWD
STACK_PROBE=0 SKIP_BENCH=1 OUT="$Z" bash ../../bench/gpu-run.sh . > "$Z/gpu-run.txt" 2>&1; tail -2 "$Z/gpu-run.txt"; grep -E "FAILED|SKIPPED" -A8 "$Z/gpu-tests.log" | head -30
fi
if [ -x ./conformance ]; then
s=$(date +%s%N); timeout 420 ./conformance --geometry 132x256 --report "$Z/conformance.md" --artifacts "$Z/differs" > "$Z/conformance.txt" 2>&1; echo "exit $? in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$Z/conformance.txt"; tail -2 "$Z/conformance.txt"; grep -v identical "$Z/conformance.md" | tail -n +3 | head -8
grep -E "loopback|serde_records|regex_compile|rand_sha2|crate_collections" "$Z/conformance.txt"
fi
cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME"
