#!/usr/bin/env bash
# Runs both fuzz targets, `serve` and `launch`, side by side at nice 19 for SECONDS each
# (default 3600), each from a scratch corpus seeded with the checked-in one (`launch`
# also with `serve`'s: its inputs are launches too). libFuzzer stops
# at a crash: the target is then started again on what is left of its time, so one find
# does not end the run. A unit running past 30 s is a hang, saved as a `timeout-` input.
#
#   hostcall-fuzz/run-hour.sh [SECONDS] [OUT]
#
# OUT (default /tmp/hostcall-fuzz-<date>) gets, per target: <target>.log (libFuzzer's
# output), corpus-<target>/ (the inputs it found), artifacts-<target>/ (crashing
# inputs), <target>.summary, and prints each summary when both have ended:
#   <target>: <runs> runs in <s> s (<runs/s>/s), corpus <n> inputs (<found> found), <k> crashes
# Replay an artifact with `cargo fuzz run <target> <file>` in hostcall-fuzz/fuzz. Needs
# cargo-fuzz (`cargo install cargo-fuzz`).
set -euo pipefail

secs=${1:-3600}
out=${2:-/tmp/hostcall-fuzz-$(date +%Y%m%d-%H%M%S)}
fuzz_dir=$(cd "$(dirname "$0")/fuzz" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$fuzz_dir"

nice -n 19 cargo fuzz build >"$out/build.log" 2>&1 || {
  echo "run-hour: cargo fuzz build failed, see $out/build.log" >&2
  exit 1
}

# Inputs in dir $1 that crashed, hung or ran out of memory (not libFuzzer's slow units).
finds() {
  find "$1" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l
}

# Runs target $1 with seed dirs $2.. until its time is spent, appending to its log;
# then writes its one-line summary.
run() {
  local target=$1
  shift
  local corpus=$out/corpus-$target artifacts=$out/artifacts-$target
  local log=$out/$target.log started=$SECONDS left
  mkdir -p "$corpus" "$artifacts"
  while left=$((started + secs - SECONDS)) && ((left > 0)); do
    local before
    before=$(finds "$artifacts")
    if nice -n 19 cargo fuzz run "$target" "$corpus" "$@" -- \
      -max_total_time="$left" -timeout=30 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" >>"$log" 2>&1; then
      break
    fi
    # Started again only after a find: any other failure would repeat.
    (($(finds "$artifacts") > before)) || {
      echo "run-hour: $target failed without a crash input, see $log" >&2
      break
    }
  done
  # Runs summed over the target's runs (libFuzzer's final stats, printed at a crash
  # too), the corpus as its last progress line has it.
  awk -v target="$target" -v took=$((SECONDS - started)) \
    -v found="$(find "$corpus" -type f | wc -l)" \
    -v crashes="$(finds "$artifacts")" '
    /^stat::number_of_executed_units:/ { runs += $2 }
    /^#[0-9]+\t/ { for (i = 1; i <= NF; i++) if ($i == "corp:") { split($(i + 1), c, "/"); corp = c[1] } }
    END {
      printf "%s: %d runs in %d s (%.1f/s), corpus %d inputs (%d found), %d crashes\n",
        target, runs, took, runs / (took ? took : 1), corp, found, crashes
    }' "$log" >"$out/$target.summary"
}

run serve ../corpus/serve &
run launch ../corpus/launch ../corpus/serve &
wait
cat "$out/serve.summary" "$out/launch.summary"
echo "logs, found inputs and crashes in $out"
