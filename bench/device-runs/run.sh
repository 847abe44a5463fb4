#!/bin/bash
# A device run, by steps: `run.sh NAME STEP...` unpacks the bundle (bundle.sh's new.txz,
# beside this script in .device) and runs each STEP in turn; results in $OUT/NAME.tgz.
#   tests        the GPU tests (bench/gpu-run.sh without its bench)
#   conformance  the conformance suite at 132x256, timed
#   net          examples/net against its CPU build; bench/net's echo server on the CPU
#                and on the GPU, measured by one CPU client, each twice in turn
#   pairs        bench/net's `pairs 512` (512 threads exchanging datagrams and TCP
#                messages in pairs) on the CPU and on the GPU, twice in turn
#   bench        limits.cu, hostcall_bench, and the bundle's baseline/hostcall_bench if
#                any, then both again in the other order (ABBA); ROUNDS=N for another
#                number of rounds
#   programs     examples/threads, unmodified, rayon-json and popular against their CPU
#                builds
#   suite-tests  the conformance suite's spawning programs as tests (`cargo gpu test` of
#                conformance/spawning) against the same tests on the CPU, two rounds:
#                the sorted verdicts must be the same
#   program-rows hostcall_bench's programs part (bench/threads and bench/net on the GPU
#                beside the CPU: spawn, join, rayon, TCP echo), into programs.json
#   stack        the registry-crate conformance programs at a 16 KiB stack, the stack
#                every module had before stacks were computed
#   startup      bench/startup on the GPU with HOSTCALL_DEBUG=1: where its wall time
#                goes, stage by stage (CUDA's start, the module, the launch memory, the
#                launch and how it ended, the drain, the frees and the context's release)
#   lanes        threads that share warps: bench/threads with every lane held back (the
#                default) and with one thread a warp (`--threads 528`), and the spawning
#                conformance programs with all their threads on one warp's lanes
#   net-summary  bench/net's echo server on the GPU with HOSTCALL_DEBUG=summary, measured
#                by the CPU client: the calls of a round trip and the host's time in each
#   startup-ab   bench/startup's `hi` and `threads` against the bundle's
#                baseline/startup.gpu if any (an earlier commit's), 15 rounds in turn,
#                each row's times sorted
#   math         bench/math: every float function over 65,536 arguments on the GPU, on
#                the CPU and by CUDA's own functions (bench/math/cuda.cu), compared in
#                ulps with the CPU's (math-ulps.jsonl, math-ulps-cuda.jsonl), and evaluations per
#                second of sin, exp, ln, powf (f64 and f32) on both (math-rate-*.jsonl;
#                CUDA's own are in the bench step's limits.json)
#   fifo-pairs   bench/pipes' `fifos 4096 . 2048` (4,096 threads opening FIFOs in pairs, all at once, each
#                open waiting for its peer's, with stat and println! calls between;
#                FIFO_THREADS=N for another number) on the CPU and on the GPU: the sorted
#                stdout and the exit code must be the same (fifos-*.out; times in
#                fifos-*.err)
#   slow-reader  bench/pipes' `stream` (256 MiB of numbered lines printed by 8 threads,
#                then exit code 7; STREAM_BYTES=N for another size) read at 10 MB/s by
#                the CPU build's `pace`, which checks every byte is the stream's, in
#                order, and passes it to sha256sum: the packaged executable as it is and
#                narrowed by CARGO_GPU_RUNNER_FLAGS, against the CPU build through the
#                same reader at full speed. `cargo gpu run` needs Cargo, which this
#                machine lacks; its run is the packaged executable's (both call
#                cargo-gpu's `run::run`, one with the options given, the other with
#                those recorded), so these two runs stand for it
#   pipes        fifo-pairs, then slow-reader
# Later runs add steps here, rather than scripts of their own; bench/README.md says
# which step made each file of bench-results/.
set -u
NAME=${1:?usage: run.sh NAME STEP...}
shift
cd "$(dirname "$0")" && tar xJf new.txz && cd new
echo 4194304 > /proc/sys/kernel/pid_max 2>/dev/null
nvidia-smi -L > "$OUT/device.txt"; nproc >> "$OUT/device.txt"
Z=$OUT/$NAME; mkdir -p "$Z"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

tests() {
  export HOSTCALL_EXAMPLES=$PWD
  STACK_PROBE=0 SKIP_BENCH=1 OUT="$Z" bash ../../bench/gpu-run.sh . > "$Z/gpu-run.txt" 2>&1
  grep -E "^test result|FAILED|SKIPPED|gpu-tests exit" "$Z/gpu-tests.log" | head -20
}

conformance() {
  local s; s=$(date +%s%N)
  timeout 200 ./conformance --geometry 132x256 --report "$Z/conformance.md" > "$Z/conformance.txt" 2>&1
  echo "exit $? in $(ms "$s") ms" >> "$Z/conformance.txt"; tail -2 "$Z/conformance.txt"
  grep -v identical "$Z/conformance.md" | tail -n +3 | head -5
}

net() {
  local side bin s round port
  for side in cpu gpu; do
    bin=./net-cpu; [ $side = gpu ] && bin=./net.gpu
    s=$(date +%s%N); timeout 60 $bin > "$Z/net-$side.out" 2> "$Z/net-$side.err"; echo "exit $?" >> "$Z/net-$side.out"
    echo "net on the $side: $(ms "$s") ms"
  done
  cmp "$Z/net-cpu.out" "$Z/net-gpu.out" && cmp "$Z/net-cpu.err" "$Z/net-gpu.err" && echo "net: stdout, stderr and exit code identical"
  for round in 1 2; do
    for side in cpu gpu; do
      port=$((7000 + round * 10)); [ $side = gpu ] && port=$((port + 1))
      bin=./net-bench-cpu; [ $side = gpu ] && bin=./net-bench.gpu
      timeout 180 $bin echo 127.0.0.1:$port 2 > "$Z/echo-$side-$round.txt" 2>&1 &
      timeout 170 ./net-bench-cpu client 127.0.0.1:$port > "$Z/bench-$side-$round.json" 2>&1; echo "client exit $?" >> "$Z/echo-$side-$round.txt"
      wait
      echo "echo on the $side, round $round: $(cat "$Z/bench-$side-$round.json")"
    done
  done
}

net_summary() {
  HOSTCALL_DEBUG=summary timeout 180 ./net-bench.gpu echo 127.0.0.1:7201 2 > "$Z/echo-summary.txt" 2>&1 &
  timeout 170 ./net-bench-cpu client 127.0.0.1:7201 > "$Z/bench-summary.json" 2>&1
  wait
  cat "$Z/bench-summary.json"; grep -v "INFO  hostcall]" "$Z/echo-summary.txt" | tail -25
}

pairs() {
  local round side bin s
  for round in 1 2; do
    for side in cpu gpu; do
      bin=./net-bench-cpu; [ $side = gpu ] && bin=./net-bench.gpu
      s=$(date +%s%N); timeout 120 $bin pairs 512 > "$Z/pairs-$side-$round.out" 2> "$Z/pairs-$side-$round.err"
      echo "exit $? in $(ms "$s") ms" >> "$Z/pairs-$side-$round.out"
      echo "pairs on the $side, round $round: $(tr '\n' ' ' < "$Z/pairs-$side-$round.out")"
    done
  done
  head -1 "$Z/pairs-cpu-1.out" | cmp - <(head -1 "$Z/pairs-gpu-1.out") && echo "pairs: the same exchange on the CPU and the GPU"
  ps -eLf | grep -c '[h]ostcall-' | sed 's/^/host threads named hostcall- left after the runs: /'
}

fifo_pairs() {
  local side bin s n=${FIFO_THREADS:-4096}
  # A waiting open holds a host descriptor besides the GPU's files; the GPU's allowance
  # shrinks with the process's limit.
  ulimit -n "$(ulimit -Hn)" 2>/dev/null
  for side in cpu gpu; do
    bin=../pipes-bench-cpu; [ $side = gpu ] && bin=../pipes-bench.gpu
    rm -rf fifos && mkdir fifos && (cd fifos && seq -f 'fifo-%.0f' 0 $((n - 1)) | xargs mkfifo)
    s=$(date +%s%N); (cd fifos && timeout 300 $bin fifos "$n" . $((n / 2))) > "$Z/fifos-$side.out" 2> "$Z/fifos-$side.err"
    echo "exit $?" >> "$Z/fifos-$side.out"
    echo "fifos on the $side: $(ms "$s") ms; $(tail -1 "$Z/fifos-$side.out"); $(tail -1 "$Z/fifos-$side.err")"
  done
  rm -rf fifos
  tail -2 "$Z/fifos-gpu.out" | head -1
  cmp <(sort "$Z/fifos-cpu.out") <(sort "$Z/fifos-gpu.out") && echo "fifos: the same lines (sorted) and exit code on the CPU and the GPU"
}

slow_reader() {
  local bytes=${STREAM_BYTES:-268435456} run s codes
  s=$(date +%s%N)
  ./pipes-bench-cpu stream "$bytes" 7 2> "$Z/stream-cpu.err" | ./pipes-bench-cpu pace 0 "$bytes" 2> "$Z/pace-cpu.txt" \
    | sha256sum > "$Z/stream-cpu.sum"
  codes="${PIPESTATUS[*]}"
  echo "stream on the CPU, read at full speed: $(ms "$s") ms, exit codes $codes (stream, pace, sha256sum); $(head -1 "$Z/pace-cpu.txt")"
  [ "$codes" = "7 0 0" ] || echo "stream on the CPU: exit codes $codes, not 7 0 0"
  for run in packaged narrowed; do
    # narrowed: the folder the stream never uses taken away, the time limit shortened.
    if [ $run = narrowed ]; then export CARGO_GPU_RUNNER_FLAGS="--gpu-no-grant . --gpu-timeout 300"; fi
    s=$(date +%s%N)
    timeout 400 ./pipes-bench.gpu stream "$bytes" 7 2> "$Z/stream-$run.err" \
      | ./pipes-bench-cpu pace 10000000 "$bytes" 2> "$Z/pace-$run.txt" | sha256sum > "$Z/stream-$run.sum"
    codes="${PIPESTATUS[*]}"
    unset CARGO_GPU_RUNNER_FLAGS
    echo "exit codes $codes in $(ms "$s") ms" >> "$Z/pace-$run.txt"
    echo "stream on the GPU ($run), read at 10 MB/s: $(ms "$s") ms, exit codes $codes; $(head -1 "$Z/pace-$run.txt")"
    tail -1 "$Z/stream-$run.err"; tail -2 "$Z/pace-$run.txt" | head -1
    [ "$codes" = "7 0 0" ] && cmp -s "$Z/stream-cpu.sum" "$Z/stream-$run.sum" \
      && echo "stream ($run): exit code 7, and the CPU's $bytes bytes ($(cut -c1-16 "$Z/stream-$run.sum")...), in order" \
      || echo "stream ($run): NOT the CPU's bytes and exit code 7 (pace-$run.txt, stream-$run.err)"
  done
}

bench() {
  local round
  for round in $(seq "${ROUNDS:-2}"); do
    mkdir -p "$Z/bench-$round"
    BASELINE_FIRST=$(( round % 2 == 0 )) STACK_PROBE=0 SKIP_TESTS=1 OUT="$Z/bench-$round" bash ../../bench/gpu-run.sh . > "$Z/bench-$round/gpu-run.txt" 2>&1
    echo "round $round: $(grep -c . "$Z/bench-$round/bench.txt") lines, $(tail -1 "$Z/bench-$round/bench.txt"); $(tail -1 "$Z/bench-$round/baseline.txt" 2>/dev/null)"
  done
}

programs() {
  local p args s
  cd text
  for p in threads unmodified rayon-json popular; do
    args=""; [ $p = unmodified ] && args="a.txt b.txt missing.txt"; [ $p = rayon-json ] && args=1000000
    [ $p = popular ] && args="--rounds 3 a.txt b.txt missing.txt"
    WORKERS=8 SUMMARY=s-cpu.txt timeout 120 ../$p-cpu $args > "$Z/$p-cpu.out" 2> "$Z/$p-cpu.err"; echo "exit $?" >> "$Z/$p-cpu.out"
    s=$(date +%s%N); WORKERS=8 SUMMARY=s-gpu.txt timeout 120 ../$p.gpu $args > "$Z/$p-gpu.out" 2> "$Z/$p-gpu.err"; echo "exit $?" >> "$Z/$p-gpu.out"
    echo "$p on the GPU: $(ms "$s") ms"
    cmp "$Z/$p-cpu.out" "$Z/$p-gpu.out" && cmp "$Z/$p-cpu.err" "$Z/$p-gpu.err" && echo "$p: stdout, stderr and exit code identical"
  done
  cd ..
}

suite_tests() {
  local round side exe s
  for round in 1 2; do
    for side in cpu gpu; do
      exe=./suite-tests-cpu; [ $side = gpu ] && exe=./bin-conformance-spawning
      s=$(date +%s%N); env -u RUST_BACKTRACE timeout 200 $exe > "$Z/suite-$side-$round.out" 2> "$Z/suite-$side-$round.err"
      echo "exit $?" >> "$Z/suite-$side-$round.out"
      echo "suite tests on the $side, round $round: $(ms "$s") ms, $(grep '^test result' "$Z/suite-$side-$round.out")"
      grep '^test ' "$Z/suite-$side-$round.out" | sed 's/; finished in.*//' | sort > "$Z/suite-$side-$round.verdicts"
    done
    cmp "$Z/suite-cpu-$round.verdicts" "$Z/suite-gpu-$round.verdicts" && echo "suite tests, round $round: the same verdicts"
  done
}

program_rows() {
  timeout 400 ./hostcall_bench --only programs --programs . --out "$Z/programs.json" > "$Z/programs.txt" 2>&1
  echo "exit $?" >> "$Z/programs.txt"; tail -12 "$Z/programs.txt"
}

stack() {
  timeout 300 ./conformance --stack-kib 16 --artifacts "$Z/at-16k" serde_records regex_compile rand_sha2 crate_collections > "$Z/at-16k.txt" 2>&1
  echo "exit $?" >> "$Z/at-16k.txt"; tail -6 "$Z/at-16k.txt"
}

startup() {
  local arg s
  for arg in "" threads; do
    date -u +"exec at %H:%M:%S.%N" > "$Z/startup-$arg-timeline.txt"; s=$(date +%s%N)
    HOSTCALL_DEBUG=1 ./startup.gpu $arg >> "$Z/startup-$arg-timeline.txt" 2>&1
    echo "wall $(ms "$s") ms" >> "$Z/startup-$arg-timeline.txt"
    grep -v "INFO  hostcall]" "$Z/startup-$arg-timeline.txt"
  done
}

lanes() {
  local n bin s
  for n in all 528; do
    bin=./threads-bench.gpu; [ $n != all ] && bin=./threads-bench-$n.gpu
    s=$(date +%s%N); timeout 240 $bin > "$Z/threads-bench-$n.json" 2> "$Z/threads-bench-$n.err"
    echo "exit $? in $(ms "$s") ms" >> "$Z/threads-bench-$n.err"
    echo "threads $n: $(tr '\n' ' ' < "$Z/threads-bench-$n.json") $(tail -1 "$Z/threads-bench-$n.err")"
  done
  timeout 200 ./conformance --thread-lanes 32 --report "$Z/conformance-32-lanes.md" spawn_join scope_borrow \
    channels_spawned spawn_panic rayon_parallel spawn_beside_pool tcp_loopback udp_loopback thread_limit > "$Z/conformance-32-lanes.txt" 2>&1
  echo "exit $?" >> "$Z/conformance-32-lanes.txt"; tail -10 "$Z/conformance-32-lanes.txt"
}

math() {
  local here=$PWD
  nvcc -O2 -arch=sm_90 ../../bench/math/cuda.cu -o cuda-math > "$Z/math.txt" 2>&1
  (cd "$Z" && "$here/math-bench.gpu" values math-gpu.bin 4096 && "$here/math-bench-cpu" values math-cpu.bin \
    && "$here/math-bench-cpu" compare math-gpu.bin math-cpu.bin > math-ulps.jsonl \
    && "$here/cuda-math" math-cuda.bin \
    && "$here/math-bench-cpu" compare math-cuda.bin math-cpu.bin > math-ulps-cuda.jsonl) >> "$Z/math.txt" 2>&1
  ./math-bench.gpu rate 16384 65536 > "$Z/math-rate-gpu.jsonl" 2>> "$Z/math.txt"
  ./math-bench-cpu rate "$(nproc)" 4194304 > "$Z/math-rate-cpu.jsonl" 2>> "$Z/math.txt"
  rm -f "$Z"/math-*.bin
  cat "$Z/math.txt" "$Z/math-ulps.jsonl" "$Z/math-ulps-cuda.jsonl" "$Z/math-rate-gpu.jsonl" "$Z/math-rate-cpu.jsonl"
}

startup_ab() {
  local round arg v s bins=startup.gpu
  [ -x baseline/startup.gpu ] && bins="baseline/startup.gpu startup.gpu"
  ./startup.gpu > /dev/null 2>&1
  for round in $(seq 15); do
    for arg in hi threads; do
      for v in $bins; do
        s=$(date +%s%N); ./$v $arg > /dev/null 2>&1; echo "$v $arg $(ms "$s")" >> "$Z/startup-ab.txt"
      done
    done
  done
  sort -k1,2 -k3n "$Z/startup-ab.txt" | awk '{k=$1" "$2; a[k]=a[k]" "$3} END {for (k in a) print k ":" a[k]}'
}

for step in "$@"; do
  echo "== $step"
  case $step in
    tests | conformance | net | pairs | bench | programs | stack | startup | lanes | math) $step ;;
    program-rows) program_rows ;;
    suite-tests) suite_tests ;;
    net-summary) net_summary ;;
    startup-ab) startup_ab ;;
    fifo-pairs) fifo_pairs ;;
    slow-reader) slow_reader ;;
    pipes) fifo_pairs; slow_reader ;;
    *) echo "run.sh: no step $step" ;;
  esac
done
cd "$OUT" && tar czf "$NAME.tgz" "$NAME" && rm -rf "$NAME"
