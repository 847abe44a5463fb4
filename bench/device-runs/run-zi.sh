#!/bin/bash
# Device run 32: stderr put together line by line per GPU thread (issue 17): the
# alloc-fail mode alone, its stderr kept, then the GPU tests (with the new case; the
# first try lacked HOSTCALLS_BIN and ran none).
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
mkdir -p "$OUT/zi"
timeout 60 ./hostcalls_bin --mode alloc-fail --blocks 132 --threads 256 > /dev/null 2> "$OUT/zi/alloc-fail.err"; echo "exit $?" >> "$OUT/zi/alloc-fail.err"
echo "lines: $(grep -c 'memory allocation' "$OUT/zi/alloc-fail.err"), whole: $(grep -cE '^memory allocation of [0-9]+ bytes failed$' "$OUT/zi/alloc-fail.err"), sharing a line: $(grep -c 'memory allocation.*memory allocation' "$OUT/zi/alloc-fail.err")"; grep -v "^memory allocation" "$OUT/zi/alloc-fail.err" | grep -v "^\[" | tail -4
export HOSTCALL_EXAMPLES=$PWD HOSTCALLS_BIN=$PWD/hostcalls_bin
s=$(date +%s); timeout 400 ./gpu-tests > "$OUT/zi/gpu-tests.log" 2>&1; echo "gpu-tests exit $? in $(( $(date +%s) - s )) s" >> "$OUT/zi/gpu-tests.log"; grep -E "FAILED|SKIPPED|whole_line" -A4 "$OUT/zi/gpu-tests.log" | head -12; tail -2 "$OUT/zi/gpu-tests.log"
cd "$OUT" && tar czf zi.tgz zi && rm -rf zi
