// The quantizers' two kernel sets, baseline and x86-64-v3 (AVX2, FMA, BMI2, F16C), give the same
// bits: every kernel and every quantizer that has both is run with each set on the same inputs
// (many sizes, misaligned buffers, special values) and the results are compared byte for byte.
// On a CPU without x86-64-v3 there is nothing to compare and the tests say so.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "compress/quant_util.h"
#include "compress/test_util.h"
#include "frugal/random.h"

namespace frugal {
namespace {

using compress_internal::Kernels;
using compress_internal::QuantizerBase;
using testing_compress::Make;

constexpr Kernels kBoth[] = {Kernels::kBaseline, Kernels::kX86V3};

// Sizes around every block boundary of the kernels (8-lane vectors, 8-code groups, 16-number
// random blocks), and a few large ones.
std::vector<size_t> Sizes() {
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 40; ++n) sizes.push_back(n);
  for (size_t n : {63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 513, 1000, 1024, 4097, 65537}) {
    sizes.push_back(n);
  }
  return sizes;
}

// Gaussian values with special ones mixed in: signed zeros, subnormals, values beyond half
// precision's range and just below its rounding boundaries.
std::vector<float> Values(size_t n, uint64_t seed) {
  std::vector<float> v = testing_compress::Gaussian(n, seed);
  const float specials[] = {0.0f,      -0.0f,      1e-40f, -1e-42f,   70000.0f,
                            -65520.0f, 65504.0f,   1e30f,  -1e-8f,    5.96e-8f,
                            2.98e-8f,  1.0009765f, 3.0f,   -0.33333f, 1.00390625f};
  for (size_t i = 0; i < n; i += 7) v[i] = specials[(i / 7) % std::size(specials)];
  return v;
}

// `data` copied to `offset` elements into a fresh buffer, so that it starts misaligned.
template <typename T>
struct Shifted {
  Shifted(const std::vector<T>& data, size_t offset) : buffer(data.size() + offset + 8) {
    std::copy(data.begin(), data.end(), buffer.begin() + static_cast<std::ptrdiff_t>(offset));
    view = std::span<T>(buffer.data() + offset, data.size());
  }
  std::vector<T> buffer;
  std::span<T> view;
};

template <typename T>
bool SameBits(std::span<const T> a, std::span<const T> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

#define REQUIRE_X86V3()                                                                \
  do {                                                                                 \
    if (!compress_internal::HasX86V3()) {                                              \
      GTEST_SKIP() << "this CPU has no x86-64-v3 kernels: only the baseline set runs"; \
    }                                                                                  \
  } while (false)

TEST(KernelPaths, SignKernels) {
  REQUIRE_X86V3();
  for (size_t n : Sizes()) {
    for (size_t offset : {0, 1, 3, 7}) {
      const std::vector<float> x = Values(n, n + 1);
      const std::vector<float> e0 = testing_compress::Gaussian(n, n + 2, 0.5f);
      const Shifted<float> xs(x, offset);
      std::vector<std::byte> bits[2];
      double l1[2], compensated_l1[2];
      std::vector<std::byte> compensated[2];
      std::vector<float> residual[2], added[2];
      for (int k = 0; k < 2; ++k) {
        bits[k].assign(compress_internal::SignBytes(n) + 1, std::byte{0xee});
        compress_internal::PackSigns(kBoth[k], xs.view.data(), n, bits[k].data());
        std::vector<std::byte> again(bits[k].size(), std::byte{0xee});
        l1[k] = compress_internal::PackSignsL1(kBoth[k], xs.view.data(), n, again.data());
        EXPECT_EQ(again, bits[k]) << "PackSignsL1 signs, n " << n;
        Shifted<float> e(e0, offset);
        compensated[k].assign(bits[k].size(), std::byte{0xee});
        compensated_l1[k] = compress_internal::CompensatePackSignsL1(
            kBoth[k], xs.view.data(), e.view.data(), n, compensated[k].data());
        compress_internal::SubtractScaledSigns(kBoth[k], xs.view.data(), e.view.data(), n, 0.375f);
        residual[k].assign(e.view.begin(), e.view.end());
        Shifted<float> out(e0, offset);
        compress_internal::AddSigns(kBoth[k], bits[k].data(), n, 0.25f, -1.5f, out.view.data());
        added[k].assign(out.view.begin(), out.view.end());
      }
      const std::string at = "n " + std::to_string(n) + " offset " + std::to_string(offset);
      EXPECT_EQ(bits[0], bits[1]) << "PackSigns " << at;
      EXPECT_EQ(std::memcmp(&l1[0], &l1[1], sizeof(double)), 0) << "PackSignsL1 " << at;
      EXPECT_EQ(compensated[0], compensated[1]) << "CompensatePackSignsL1 " << at;
      EXPECT_EQ(std::memcmp(&compensated_l1[0], &compensated_l1[1], sizeof(double)), 0) << at;
      EXPECT_TRUE(SameBits<float>(residual[0], residual[1])) << "SubtractScaledSigns " << at;
      EXPECT_TRUE(SameBits<float>(added[0], added[1])) << "AddSigns " << at;
    }
  }
}

TEST(KernelPaths, CodePacking) {
  REQUIRE_X86V3();
  for (int width = 1; width <= 8; ++width) {
    for (size_t n : Sizes()) {
      RngStream rng(RngKey{.seed = 5, .rank = width, .step = n, .tensor = 1});
      std::vector<uint8_t> codes(n);
      for (uint8_t& c : codes) c = static_cast<uint8_t>(rng.NextU64() & ((1u << width) - 1));
      const size_t bytes = compress_internal::CodeBytes(n, width);
      std::vector<std::byte> packed[2];
      std::vector<uint8_t> unpacked[2];
      for (int k = 0; k < 2; ++k) {
        const Shifted<uint8_t> in(codes, static_cast<size_t>(k) * 3 + 1);
        packed[k].assign(bytes + 8, std::byte{0xee});
        compress_internal::PackCodes(kBoth[k], in.view.data(), n, width, packed[k].data() + 1);
        unpacked[k].assign(n + 8, 0xdd);
        compress_internal::UnpackCodes(kBoth[k], packed[k].data() + 1, n, width,
                                       unpacked[k].data() + 3);
      }
      EXPECT_EQ(packed[0], packed[1]) << "width " << width << " n " << n;
      EXPECT_EQ(unpacked[0], unpacked[1]) << "width " << width << " n " << n;
      EXPECT_TRUE(std::equal(codes.begin(), codes.end(), unpacked[0].begin() + 3));
    }
  }
}

TEST(KernelPaths, LaneRandomNumbers) {
  REQUIRE_X86V3();
  std::vector<uint32_t> out[2];
  for (int k = 0; k < 2; ++k) {
    RngStream seed(RngKey{.seed = 9, .rank = 1, .step = 2, .tensor = 3});
    compress_internal::LaneRng rng(seed);
    for (size_t count : {16, 32, 4096, 16}) {
      std::vector<uint32_t> block(count + 1);
      rng.Fill(kBoth[k], block.data() + 1, count);  // misaligned
      out[k].insert(out[k].end(), block.begin() + 1, block.end());
    }
  }
  EXPECT_EQ(out[0], out[1]);
}

// Sets the kernel set of `c` and of every compressor it wraps (error feedback).
void UseKernels(Compressor& c, Kernels kernels) {
  for (const Compressor* p = &c; p != nullptr; p = p->inner()) {
    if (const auto* q = dynamic_cast<const QuantizerBase*>(p)) {
      const_cast<QuantizerBase*>(q)->set_kernels(kernels);  // owned by the caller, not const
    }
  }
}

class QuantizerKernelPaths : public ::testing::TestWithParam<const char*> {};

// Three steps of encoding (the state of signum, efsign and error feedback carries over), each
// payload decoded from a misaligned copy by both sets into the same starting values.
TEST_P(QuantizerKernelPaths, SameBytesAndValues) {
  REQUIRE_X86V3();
  std::unique_ptr<Compressor> c[2] = {Make(GetParam()), Make(GetParam())};
  ASSERT_TRUE(c[0] && c[1]);
  UseKernels(*c[0], Kernels::kBaseline);
  UseKernels(*c[1], Kernels::kX86V3);
  for (size_t n : Sizes()) {
    std::vector<std::vector<int64_t>> shapes = {{}};
    if (n % 8 == 0 && n >= 16) shapes.push_back({static_cast<int64_t>(n / 8), 8});
    if (n % 3 == 0 && n > 0) shapes.push_back({3, static_cast<int64_t>(n / 3)});
    for (const auto& shape : shapes) {
      const TensorInfo tensor("t", n, shape);
      CompressContext ctx[2] = {CompressContext(17, 1, 4), CompressContext(17, 1, 4)};
      for (uint64_t step = 0; step < 3; ++step) {
        const std::string at = std::string(GetParam()) + " n " + std::to_string(n) + " rows " +
                               (shape.empty() ? "-" : std::to_string(shape[0])) + " step " +
                               std::to_string(step);
        const std::vector<float> x = Values(n, 100 * n + step);
        std::vector<std::byte> payload[2];
        Status encoded[2];
        for (int k = 0; k < 2; ++k) {
          ctx[k].set_step(step);
          const Shifted<float> in(x, step % 4 + static_cast<size_t>(k));
          encoded[k] = c[k]->Encode(in.view, tensor, ctx[k], payload[k]);
        }
        ASSERT_EQ(encoded[0].ToString(), encoded[1].ToString()) << at;
        if (!encoded[0].ok()) continue;
        ASSERT_EQ(payload[0], payload[1]) << at;
        const std::vector<float> start = Values(n, 7 * n + step + 3);
        std::vector<float> decoded[2];
        for (int k = 0; k < 2; ++k) {
          const Shifted<std::byte> wire(payload[0], 1 + 2 * static_cast<size_t>(k));
          Shifted<float> out(start, static_cast<size_t>(k) + 1);
          ASSERT_TRUE(c[k]->Decode(wire.view, tensor, ctx[k], out.view).ok()) << at;
          decoded[k].assign(out.view.begin(), out.view.end());
        }
        EXPECT_TRUE(SameBits<float>(decoded[0], decoded[1])) << at;
      }
    }
  }
}

// Every quantizer with x86-64-v3 kernels, with parameters that take each kernel's branches
// (qsgd's packed and wide codes, minmax8's stochastic rounding, onebit's columns, clipping).
INSTANTIATE_TEST_SUITE_P(Specs, QuantizerKernelPaths,
                         ::testing::Values("fp16", "bf16", "minmax8",
                                           "minmax8:chunk=7,rounding=stochastic", "qsgd",
                                           "qsgd:levels=1,bucket=5", "qsgd:levels=127,bucket=64",
                                           "qsgd:levels=1000,bucket=100", "terngrad",
                                           "terngrad:clip=0", "onebit", "onebit:ef=1", "sign",
                                           "signum", "efsign", "efsign:ef=0", "natural",
                                           "polar:n=6", "polar:ef=0,mode=sign,n=4,rate=0.7"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// The fused error-feedback encoder of efsign, with both sets.
TEST(KernelPaths, FusedErrorFeedbackEncoder) {
  REQUIRE_X86V3();
  std::unique_ptr<Compressor> c[2] = {Make("efsign:ef=0"), Make("efsign:ef=0")};
  UseKernels(*c[0], Kernels::kBaseline);
  UseKernels(*c[1], Kernels::kX86V3);
  for (size_t n : Sizes()) {
    const TensorInfo tensor("t", n);
    const std::vector<float> x = Values(n, n + 11);
    const std::vector<float> e = testing_compress::Gaussian(n, n + 12, 0.25f);
    std::vector<std::byte> payload[2];
    std::vector<float> residual[2];
    for (int k = 0; k < 2; ++k) {
      CompressContext ctx(3, 0, 2);
      Shifted<float> r(e, static_cast<size_t>(k) + 2);
      std::optional<Status> s = c[k]->EncodeWithResidual(x, r.view, tensor, ctx, payload[k]);
      ASSERT_TRUE(s.has_value() && s->ok()) << n;
      residual[k].assign(r.view.begin(), r.view.end());
    }
    EXPECT_EQ(payload[0], payload[1]) << n;
    EXPECT_TRUE(SameBits<float>(residual[0], residual[1])) << n;
  }
}

TEST(KernelPaths, BestSetIsTheCpusAndTheBaselineAlwaysRuns) {
  auto c = Make("fp16");
  const auto* q = dynamic_cast<const QuantizerBase*>(c.get());
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->kernels(), compress_internal::BestKernels());
  EXPECT_EQ(compress_internal::BestKernels() == Kernels::kX86V3, compress_internal::HasX86V3());
  UseKernels(*c, Kernels::kBaseline);
  EXPECT_EQ(q->kernels(), Kernels::kBaseline);
  if (!compress_internal::HasX86V3()) {
    EXPECT_THROW(UseKernels(*c, Kernels::kX86V3), CheckError);
  }
}

}  // namespace
}  // namespace frugal
