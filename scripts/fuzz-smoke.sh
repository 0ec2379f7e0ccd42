#!/usr/bin/env bash
# Builds the libFuzzer targets (every compressor decoder and the spec parser) with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer in their own build directory, then runs each
# target for a few seconds. Exits non-zero if a build fails or a target finds a crash.
# Usage: scripts/fuzz-smoke.sh [seconds per target, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-5}"
build="build-fuzz"
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
flags+=" -fno-omit-frame-pointer -g"

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS="$flags" \
  -DFRUGAL_BUILD_FUZZERS=ON -DFRUGAL_BUILD_TESTS=OFF -DFRUGAL_WITH_TORCH=OFF \
  -DFRUGAL_WITH_GLOO=OFF >"$build.configure.log" 2>&1 || {
  cat "$build.configure.log"
  exit 1
}
cmake --build "$build" -j2 --target fuzzers

status=0
for target in "$build"/fuzz/fuzz_*; do
  [ -x "$target" ] || continue
  name="$(basename "$target")"
  corpus="$build/corpus/$name"
  mkdir -p "$corpus"
  if "$target" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=8192 \
      -artifact_prefix="$build/$name-" -print_final_stats=1 >"$build/$name.log" 2>&1; then
    runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/$name.log" | grep -o '[0-9]*$')"
    echo "fuzz-smoke: $name ok (${runs:-?} inputs in ${seconds}s)"
  else
    echo "fuzz-smoke: $name FAILED, see $build/$name.log"
    tail -40 "$build/$name.log"
    status=1
  fi
done
exit "$status"
