#!/usr/bin/env bash
# Builds the tier-1 test suites (label "tier1": core, transport, collectives, compress, engine,
# strategy; ranks as threads, no MPI processes, no LibTorch) with sanitizers in their own build
# directory and runs each suite in one process, the longest ones in two gtest shards (two
# processes at a time under AddressSanitizer).
# Exits non-zero if the build fails, a test fails or a sanitizer reports anything.
# Usage: scripts/sanitize.sh address   (AddressSanitizer + UndefinedBehaviorSanitizer with clang,
#                                       build-asan; the fuzz harnesses' replays run too)
#        scripts/sanitize.sh thread    (ThreadSanitizer, build-tsan)
# Extra arguments go to every suite (e.g. --gtest_filter=Engine*). SANITIZE_SUITES="a b" runs only
# those suites (names as in tier1_tests.txt, e.g. engine_test). Findings in frugal are never
# suppressed; the files under scripts/sanitizers/ may only hold third-party code.
set -euo pipefail
cd "$(dirname "$0")/.."
supp="$PWD/scripts/sanitizers"
source scripts/sanitized-build.sh

kind="${1:-}"
shift || true
case "$kind" in
  address)
    sanitize="address,undefined"
    export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp"
    ;;
  thread)
    sanitize="thread"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
    ;;
  *)
    echo "usage: scripts/sanitize.sh address|thread [test arguments]" >&2
    exit 2
    ;;
esac

# Under AddressSanitizer the fuzz harnesses' replays (tests/fuzz) run too, unless suites are named.
replays=""
[ "$kind" = address ] && [ -z "${SANITIZE_SUITES:-}" ] && replays=fuzz_replays
sanitized_build "$kind" ${SANITIZE_SUITES:-tier1_tests} $replays

# Runs shard SHARD of SHARDS (gtest sharding) of a suite (KIND gtest) or a fuzz harness's replay
# (KIND replay: 10,000 inputs); prints one line and, on a failure, the end of its log.
run_suite() {
  local suite="$1" shard="$2" shards="$3" kind="$4" name start args
  name="$(basename "$suite")"
  [ "$shards" -gt 1 ] && name="$name.shard$shard"
  start=$SECONDS
  args=(--gtest_brief=1 "${test_args[@]}")
  [ "$kind" = replay ] && args=(10000)
  if GTEST_SHARD_INDEX="$shard" GTEST_TOTAL_SHARDS="$shards" timeout 600 "$suite" "${args[@]}" \
      >"$build/$name.log" 2>&1; then
    echo "sanitize ($sanitize): $name ok ($((SECONDS - start)) s)"
  else
    echo "sanitize ($sanitize): $name FAILED ($((SECONDS - start)) s), see $build/$name.log"
    tail -60 "$build/$name.log"
    return 1
  fi
}

# Under AddressSanitizer two suites run at a time (the ranks of a suite are threads that mostly
# wait on each other); ThreadSanitizer's suites, whose timing-bound tests slow down most under
# it, run one at a time. SANITIZE_JOBS overrides.
test_args=("$@")
jobs="${SANITIZE_JOBS:-$([ "$kind" = address ] && echo 2 || echo 1)}"
# The suites that take longest under the sanitizers start first, cut into shards, so that the
# others fill the second core beside them instead of leaving one suite to run alone at the end.
heavy="collectives_test compress_test"
jobs_list=()
for name in $heavy; do
  suite="$(grep "/$name\$" "$build/tier1_tests.txt" || true)"
  [ -n "$suite" ] && jobs_list+=("$suite 0 $jobs gtest" "$suite 1 $jobs gtest")
done
while read -r suite; do
  [[ " $heavy " == *" $(basename "$suite") "* ]] || jobs_list+=("$suite 0 1 gtest")
done <"$build/tier1_tests.txt"
if [ -n "$replays" ]; then
  while read -r replay; do jobs_list+=("$replay 0 1 replay"); done <"$build/fuzz_replays.txt"
fi

status=0
running=0
for job in "${jobs_list[@]}"; do
  read -r suite shard shards kind <<<"$job"
  name="$(basename "$suite")"
  if [ -n "${SANITIZE_SUITES:-}" ] && [[ " $SANITIZE_SUITES " != *" $name "* ]]; then
    continue
  fi
  [ "$shard" -lt "$shards" ] || continue
  if [ "$running" -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_suite "$suite" "$shard" "$shards" "$kind" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
exit "$status"
