# Sourced by scripts/sanitize.sh and scripts/fuzz-smoke.sh: configures and builds a sanitized
# build directory without LibTorch or Gloo.
#   sanitized_build address TARGET...   build-asan: clang, AddressSanitizer + UndefinedBehaviorSanitizer
#   sanitized_build fuzz TARGET...      build-fuzz: the same with the libFuzzer targets (the whole
#                                    library instrumented for coverage)
#   sanitized_build thread TARGET...    build-tsan: ThreadSanitizer
# Sets `build` to the directory. -O1 keeps the build short and the stack traces readable; -g1
# gives file:line in reports.
sanitized_build() {
  local kind="$1"
  shift
  local args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1 -DNDEBUG"
    -DCMAKE_C_FLAGS_RELEASE="-O1 -g1 -DNDEBUG" -DFRUGAL_WITH_TORCH=OFF -DFRUGAL_WITH_GLOO=OFF)
  case "$kind" in
    address)
      build=build-asan
      args+=(-DFRUGAL_SANITIZE=address,undefined -DFRUGAL_BUILD_FUZZERS=OFF
        -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
      ;;
    fuzz)
      build=build-fuzz
      args+=(-DFRUGAL_SANITIZE=address,undefined -DFRUGAL_BUILD_FUZZERS=ON
        -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
      ;;
    thread)
      build=build-tsan
      args+=(-DFRUGAL_SANITIZE=thread)
      ;;
    *)
      echo "sanitized_build: unknown kind '$kind'" >&2
      return 2
      ;;
  esac
  mkdir -p "$build"
  cmake -S . -B "$build" "${args[@]}" >"$build/configure.log" 2>&1 || {
    cat "$build/configure.log"
    return 1
  }
  cmake --build "$build" -j2 --target "$@"
}
