// Micro-benchmarks of the inner loops every all-reduce and quantizer runs: the reduction kernels
// of the collectives and the sign-plane and fixed-width code packing of the quantizers, next to
// memcpy of the same bytes (the peer: on a shared machine, compare ratios, not times).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/internal.h"
#include "compress/quant_util.h"
#include "micro/inputs.h"

namespace frugal::micro {
namespace {

void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> src = GaussianFloats(n, 1), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::ClobberMemory();
  }
  SetFloatBytes(state, n);
}
BENCHMARK(BM_Memcpy)->Apply(FloatSizes);

void BM_AddInto(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> src = GaussianFloats(n, 1), dst = GaussianFloats(n, 2);
  for (auto _ : state) {
    coll::AddInto(dst.data(), src.data(), n);
    benchmark::ClobberMemory();
  }
  SetFloatBytes(state, n);
}
BENCHMARK(BM_AddInto)->Apply(FloatSizes);

void BM_ScaleInPlace(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> x = GaussianFloats(n, 1);
  for (auto _ : state) {
    coll::ScaleInPlace(x.data(), n, 1.0f);
    benchmark::ClobberMemory();
  }
  SetFloatBytes(state, n);
}
BENCHMARK(BM_ScaleInPlace)->Apply(FloatSizes);

void BM_PackSigns(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> x = GaussianFloats(n, 1);
  std::vector<std::byte> bits(compress_internal::SignBytes(n));
  for (auto _ : state) {
    compress_internal::PackSigns(x.data(), n, bits.data());
    benchmark::ClobberMemory();
  }
  SetFloatBytes(state, n);
}
BENCHMARK(BM_PackSigns)->Apply(FloatSizes);

void BM_AddSigns(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> x = GaussianFloats(n, 1), out(n);
  std::vector<std::byte> bits(compress_internal::SignBytes(n));
  compress_internal::PackSigns(x.data(), n, bits.data());
  for (auto _ : state) {
    compress_internal::AddSigns(bits.data(), n, 0.5f, -0.5f, out.data());
    benchmark::ClobberMemory();
  }
  SetFloatBytes(state, n);
}
BENCHMARK(BM_AddSigns)->Apply(FloatSizes);

// Arguments: number of codes, code width in bits.
void CodeArgs(benchmark::internal::Benchmark* b) {
  for (int width : {1, 2, 4, 8}) b->Args({1 << 20, width});
}

std::vector<uint8_t> Codes(size_t n, int width) {
  std::vector<uint8_t> codes(n);
  RngStream rng(RngKey{.seed = 3, .rank = 0, .step = 0, .tensor = 0});
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng.Below(uint64_t{1} << width));
  return codes;
}

void BM_PackCodes(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const int width = static_cast<int>(state.range(1));
  std::vector<uint8_t> codes = Codes(n, width);
  std::vector<std::byte> packed(compress_internal::CodeBytes(n, width));
  for (auto _ : state) {
    compress_internal::PackCodes(codes.data(), n, width, packed.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_PackCodes)->Apply(CodeArgs);

void BM_UnpackCodes(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const int width = static_cast<int>(state.range(1));
  std::vector<uint8_t> codes = Codes(n, width);
  std::vector<std::byte> packed(compress_internal::CodeBytes(n, width));
  compress_internal::PackCodes(codes.data(), n, width, packed.data());
  for (auto _ : state) {
    compress_internal::UnpackCodes(packed.data(), n, width, codes.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_UnpackCodes)->Apply(CodeArgs);

}  // namespace
}  // namespace frugal::micro
