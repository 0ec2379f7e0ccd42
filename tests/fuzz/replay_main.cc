// A plain main for a fuzz harness (LLVMFuzzerTestOneInput, fuzz/): feeds it the empty input, then
// `count` (argv[1], default 10000) pseudo-random inputs of 1 to 512 bytes from a fixed seed, and
// with a mutation of the previous input half of the time, so that inputs that pass a header check
// are kept and varied. A harness that finds a broken contract aborts, which fails the test.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  const long count = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 10000;
  if (count <= 0) {
    std::fprintf(stderr, "usage: %s [count > 0]\n", argv[0]);
    return 2;
  }
  LLVMFuzzerTestOneInput(nullptr, 0);
  std::mt19937_64 rng(1);
  std::vector<uint8_t> input;
  for (long i = 0; i < count; ++i) {
    if (input.empty() || rng() % 2 == 0) {
      input.resize(1 + rng() % 512);
      for (uint8_t& byte : input) byte = static_cast<uint8_t>(rng());
    } else {
      input[rng() % input.size()] = static_cast<uint8_t>(rng());
    }
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("%ld inputs\n", count + 1);
  return 0;
}
