#!/bin/bash
# Device run of issue 17's figures in hostcall_bench: `run-programs.sh`, with prog.tgz
# beside it holding hostcall_bench, threads-bench.gpu and net-bench.gpu (`cargo gpu
# build` of bench/threads and bench/net, the latter with `--listen '127.0.0.1:*'`) and
# their CPU builds (threads-bench-cpu, net-bench-cpu). hostcall_bench runs each on both
# sides (part `programs`) and writes $OUT/programs.json.
set -u
cd "$(dirname "$0")" && tar xzf prog.tgz && cd new
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
timeout 500 ./hostcall_bench --only programs --programs . --out "$OUT/programs.json" > "$OUT/programs.txt" 2>&1
echo "hostcall_bench exit $?" >> "$OUT/programs.txt"
cat "$OUT/programs.txt"
