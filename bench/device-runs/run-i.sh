#!/bin/bash
# Device run 7: null calls at 132x256, one launch per process (the plateau belongs to a
# process), round-robin: e36613e's hostcalls_bin, this build's, and this build with the
# GPU side of Channel::exchange as e36613e had it (no send_more, no reply words).
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && tar xzf var.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"
for r in $(seq 1 ${N:-25}); do
  for w in ${W:-base new gpurevert}; do
    b=./hostcalls_bin; [ $w != new ] && b=../var/hostcalls_bin-$w
    x=$(timeout 30 ${PREFIX:-} $b --mode null --blocks ${B:-132} --threads 256 2>&1 | grep -o "([0-9.]* M/s)" | tr -d '(M/s)')
    echo "$w $r $x"
  done
done | tee "$OUT/null.txt"
