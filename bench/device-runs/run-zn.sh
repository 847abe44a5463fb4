#!/bin/bash
# Device run 37, issue 17: `cargo gpu` programs, unmodified std binaries built here into
# one executable each (`cargo gpu build`): hello (args, exit code), `examples/unmodified`
# (files, env, spawned threads, scope, channels) against the same program on the CPU,
# the thread limit (--threads 4, 8 workers asked), and `examples/rayon-json` (rayon and
# serde_json) against the CPU, timed; a scoped thread sharing its parent's locals.
set -u
cd "$(dirname "$0")" && tar xzf new.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
Z=$OUT/zn; mkdir -p "$Z"
t() { local s=$(date +%s%N); "$@"; local rc=$?; echo "[$(( ($(date +%s%N) - s) / 1000000 )) ms, exit $rc]" >&2; return $rc; }
timeout 60 ./hello.gpu a b > "$Z/hello.out" 2> "$Z/hello.err"; echo "hello exit $?" | tee -a "$Z/hello.err"; cat "$Z/hello.out"; tail -3 "$Z/hello.err"
cd text
for who in cpu gpu; do
  bin=../unmodified-cpu; [ $who = gpu ] && bin=../unmodified.gpu
  WORKERS=8 SUMMARY=summary-$who.txt timeout 120 $bin a.txt b.txt missing.txt > "$Z/unmodified-$who.out" 2> "$Z/unmodified-$who.err"; echo "exit $?" >> "$Z/unmodified-$who.out"
done
cp summary-*.txt "$Z/"
for f in out err; do cmp "$Z/unmodified-cpu.$f" "$Z/unmodified-gpu.$f" && echo "unmodified std$f identical"; done
cmp summary-cpu.txt summary-gpu.txt && echo "unmodified summary file identical"
cat "$Z/unmodified-gpu.out"; tail -3 "$Z/unmodified-gpu.err"
WORKERS=8 timeout 60 ../unmodified-4.gpu a.txt > "$Z/limit.out" 2> "$Z/limit.err"; echo "limit exit $?" >> "$Z/limit.err"; tail -4 "$Z/limit.err"
cd ..
for n in 100000 1000000; do
  (t timeout 120 ./rayon-json-cpu $n) > "$Z/rayon-cpu-$n.out" 2> "$Z/rayon-cpu-$n.err"
  (t timeout 300 ./rayon-json.gpu $n) > "$Z/rayon-gpu-$n.out" 2> "$Z/rayon-gpu-$n.err"
  cmp "$Z/rayon-cpu-$n.out" "$Z/rayon-gpu-$n.out" && echo "rayon-json $n: stdout identical"
  tail -n 2 "$Z/rayon-cpu-$n.err" "$Z/rayon-gpu-$n.err"
done
cat "$Z/rayon-gpu-100000.out" | head -5
# A scoped thread reading and writing its parent's locals (frames in global memory).
timeout 60 ./stackshare.gpu > "$Z/stackshare.out" 2>&1; echo "stackshare exit $?" >> "$Z/stackshare.out"; cat "$Z/stackshare.out"
cd "$OUT" && tar czf zn.tgz zn && rm -rf zn
