#!/bin/bash
# Device run 34: issue 17's stack sentences: a kernel recursing past its 16 KiB stack,
# a stack of 4 MiB asked for, and the demo at 64 KiB (the cases of the GPU test
# `a_stack_overflow_and_a_stack_too_large_are_one_sentence_each`, run by hand). Run
# twice: the first build named only LAUNCH_FAILED traps (the overflow showed as an
# illegal address) and claimed 512 KiB as the limit (512 KiB was refused too).
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
mkdir -p "$OUT/zk"
timeout 60 ./hostcalls_bin --mode stack-overflow --blocks 1 --threads 32 > "$OUT/zk/overflow.out" 2> "$OUT/zk/overflow.err"; echo "overflow exit $?" >> "$OUT/zk/overflow.err"; grep -v "^\[" "$OUT/zk/overflow.err" | tail -4
timeout 60 ./hostcalls_bin --mode stack-overflow --stack-kib 512 --blocks 1 --threads 32 > "$OUT/zk/overflow-512.out" 2> "$OUT/zk/overflow-512.err"; echo "overflow at 512 KiB exit $?" >> "$OUT/zk/overflow-512.err"; grep -v "^\[" "$OUT/zk/overflow-512.err" | tail -3; cat "$OUT/zk/overflow-512.out" | tail -2
timeout 60 ./hostcalls_bin --stack-kib 4096 --blocks 1 --threads 32 > /dev/null 2> "$OUT/zk/too-large.err"; echo "too large exit $?" >> "$OUT/zk/too-large.err"; grep -v "^\[" "$OUT/zk/too-large.err" | tail -3
timeout 60 ./hostcalls_bin --stack-kib 64 --blocks 132 --threads 256 > /dev/null 2> "$OUT/zk/demo-64.err"; echo "demo at 64 KiB exit $?" >> "$OUT/zk/demo-64.err"; grep -v "^\[" "$OUT/zk/demo-64.err" | tail -2
cd "$OUT" && tar czf zk.tgz zk && rm -rf zk
