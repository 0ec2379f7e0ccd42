// Micro-benchmarks of the core building blocks behind the wire formats: fixed-width and
// Elias-gamma bit packing (BitWriter/BitReader), CRC-32 and the random streams.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "frugal/bits.h"
#include "frugal/crc.h"
#include "frugal/random.h"
#include "micro/inputs.h"

namespace frugal::micro {
namespace {

constexpr size_t kFields = 1 << 18;

// Values below 2^width.
std::vector<uint64_t> Fields(int width) {
  RngStream rng(RngKey{.seed = 5, .rank = 0, .step = 0, .tensor = 0});
  std::vector<uint64_t> v(kFields);
  for (uint64_t& x : v) x = rng.NextU64() >> (64 - width);
  return v;
}

void Widths(benchmark::internal::Benchmark* b) {
  for (int width : {1, 3, 17, 64}) b->Arg(width);
}

void BM_BitWriterWrite(benchmark::State& state) {
  const int width = static_cast<int>(state.range(0));
  std::vector<uint64_t> fields = Fields(width);
  std::vector<std::byte> out;
  for (auto _ : state) {
    out.clear();
    BitWriter writer(&out);
    for (uint64_t f : fields) writer.Write(f, width);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kFields));
}
BENCHMARK(BM_BitWriterWrite)->Apply(Widths);

void BM_BitReaderRead(benchmark::State& state) {
  const int width = static_cast<int>(state.range(0));
  std::vector<uint64_t> fields = Fields(width);
  std::vector<std::byte> packed;
  BitWriter writer(&packed);
  for (uint64_t f : fields) writer.Write(f, width);
  for (auto _ : state) {
    BitReader reader(packed);
    uint64_t sum = 0;
    for (size_t i = 0; i < kFields; ++i) sum += *reader.Read(width);
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kFields));
}
BENCHMARK(BM_BitReaderRead)->Apply(Widths);

// Gaps between the indices of a sparse vector at ratio 1/mean_gap, as the sparse coding sends.
std::vector<uint64_t> Gaps(uint64_t mean_gap) {
  RngStream rng(RngKey{.seed = 7, .rank = 0, .step = 0, .tensor = 0});
  std::vector<uint64_t> v(kFields);
  for (uint64_t& x : v) x = 1 + rng.Below(2 * mean_gap);
  return v;
}

void BM_EliasGammaWrite(benchmark::State& state) {
  std::vector<uint64_t> gaps = Gaps(static_cast<uint64_t>(state.range(0)));
  std::vector<std::byte> out;
  for (auto _ : state) {
    out.clear();
    BitWriter writer(&out);
    for (uint64_t g : gaps) writer.WriteEliasGamma(g);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kFields));
}
BENCHMARK(BM_EliasGammaWrite)->Arg(10)->Arg(1000);

void BM_EliasGammaRead(benchmark::State& state) {
  std::vector<uint64_t> gaps = Gaps(static_cast<uint64_t>(state.range(0)));
  std::vector<std::byte> packed;
  BitWriter writer(&packed);
  for (uint64_t g : gaps) writer.WriteEliasGamma(g);
  for (auto _ : state) {
    BitReader reader(packed);
    uint64_t sum = 0;
    for (size_t i = 0; i < kFields; ++i) sum += *reader.ReadEliasGamma();
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kFields));
}
BENCHMARK(BM_EliasGammaRead)->Arg(10)->Arg(1000);

void BM_Crc32(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> x = GaussianFloats(n, 1);
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(x.data()), n * sizeof(float));
  for (auto _ : state) benchmark::DoNotOptimize(Crc32(bytes));
  SetFloatBytes(state, n);
}
BENCHMARK(BM_Crc32)->Apply(FloatSizes);

void BM_RngUniform(benchmark::State& state) {
  RngStream rng(RngKey{.seed = 1, .rank = 0, .step = 0, .tensor = 0});
  for (auto _ : state) benchmark::DoNotOptimize(rng.Uniform());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_RngUniform);

void BM_RngNormal(benchmark::State& state) {
  RngStream rng(RngKey{.seed = 1, .rank = 0, .step = 0, .tensor = 0});
  for (auto _ : state) benchmark::DoNotOptimize(rng.Normal());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_RngNormal);

}  // namespace
}  // namespace frugal::micro
