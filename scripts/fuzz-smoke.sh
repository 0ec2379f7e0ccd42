#!/usr/bin/env bash
# Builds the libFuzzer targets (every compressor decoder, the spec parser, the engine's and the
# parameter server's messages, the checkpoint loader) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer in build-fuzz, then runs each target for a few seconds, two at a time.
# Exits non-zero if the build fails or a target finds a crash. (scripts/sanitize.sh address runs
# the same harnesses on fixed pseudo-random inputs, the replays of tests/fuzz.)
# Usage: scripts/fuzz-smoke.sh [seconds per target, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sanitized-build.sh

seconds="${1:-5}"
sanitized_build fuzz fuzzers

# Runs one target; prints one line and, on a finding, the end of its log.
run_target() {
  local target="$1" name corpus log runs
  name="$(basename "$target")"
  corpus="$build/corpus/$name"
  log="$build/$name.log"
  mkdir -p "$corpus"
  if "$target" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=8192 \
      -artifact_prefix="$build/$name-" -print_final_stats=1 >"$log" 2>&1; then
    runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
    echo "fuzz-smoke: $name ok (${runs:-?} inputs in ${seconds}s)"
  else
    echo "fuzz-smoke: $name FAILED, see $log"
    tail -40 "$log"
    return 1
  fi
}

status=0
running=0
for target in "$build"/fuzz/fuzz_*; do
  [ -x "$target" ] || continue
  if [ "$running" -eq 2 ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_target "$target" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
exit "$status"
