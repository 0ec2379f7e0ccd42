// SC encoding of blocks (see polar_sc.h): the schedule, the loader of a block's LLRs, the baseline
// kernel and the choice of kernel (the x86-64-v3 ones are in polar_sc_avx2.cc).
//
// A block is encoded in three steps. Load: p = g (+ e) becomes its LLRs, checking that every value
// is finite; a block whose largest magnitude is 2^106 or more is scaled by 2^-24, so that no sum
// of up to 2^20 LLRs overflows (scaling by a power of two changes no decision). Run: the
// schedule's interpreter (polar_sc_body.inc). Extract: the sign-bit masks of x become the packed
// codeword.
#include "compress/polar_sc.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "compress/polar_sc_kernels.h"

namespace frugal::polar {

// ----- The schedule -----

ScPlan::ScPlan(const InfoSet& set) : m_(set.m) {
  const size_t size = set.size();
  std::vector<uint32_t> prefix(size + 1, 0);
  for (size_t i = 0; i < size; ++i) prefix[i + 1] = prefix[i] + (set.info(i) ? 1u : 0u);
  Build(prefix, 0, m_);
}

void ScPlan::Build(const std::vector<uint32_t>& prefix, uint32_t offset, int log_size) {
  const uint32_t s = uint32_t{1} << log_size;
  const uint32_t info = prefix[offset + s] - prefix[offset];
  const auto lg = static_cast<uint8_t>(log_size);
  if (info == 0) {
    ops_.push_back({Kind::kRate0, lg, offset});
  } else if (info == s) {
    ops_.push_back({Kind::kRate1, lg, offset});
  } else if (info == 1 && prefix[offset + s] - prefix[offset + s - 1] == 1) {
    ops_.push_back({Kind::kRep, lg, offset});
  } else {
    ops_.push_back({Kind::kF, lg, offset});
    Build(prefix, offset, log_size - 1);
    ops_.push_back({Kind::kG, lg, offset});
    Build(prefix, offset + s / 2, log_size - 1);
    ops_.push_back({Kind::kCombine, lg, offset});
  }
}

namespace {

using namespace sc_internal;  // NOLINT(google-build-using-namespace): the element operations

namespace baseline {
using V = float;
#define POLAR_TARGET
#define POLAR_GENERIC_STEPS
#include "compress/polar_sc_body.inc"
#undef POLAR_GENERIC_STEPS
#undef POLAR_TARGET
}  // namespace baseline

}  // namespace

bool LoadBlockLlrs(const ScBlock& b, size_t size, LlrMode mode, float* llr) {
  float max = 0.0f;
  for (size_t i = 0; i < b.count; ++i) {
    const float p = b.e != nullptr ? b.g[i] + b.e[i] : b.g[i];
    const float a = std::fabs(p);
    if (!(a <= FLT_MAX)) return false;
    max = a > max ? a : max;
  }
  const float scale = max >= kScaleLimit ? kScaleDown : 1.0f;
  for (size_t i = 0; i < size; ++i) {
    if (i < b.count) {
      const float p = b.e != nullptr ? b.g[i] + b.e[i] : b.g[i];
      llr[i] = MapLlr(p * scale, mode);
    } else {
      llr[i] = 0.0f;
    }
  }
  return true;
}

namespace {

bool EncodeBaseline(const ScPlan& plan, LlrMode mode, std::span<const ScBlock> blocks,
                    std::span<uint64_t> x_words) {
  const size_t size = plan.size();
  const size_t words = std::max<size_t>(1, size / 64);
  std::vector<float> top(size), levels(size), x(size);
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (!LoadBlockLlrs(blocks[b], size, mode, top.data())) return false;
    baseline::RunPlan(plan, top.data(), levels.data(), x.data());
    uint64_t* out = x_words.data() + b * words;
    for (size_t w = 0; w < words; ++w) out[w] = 0;
    for (size_t i = 0; i < size; ++i) {
      out[i / 64] |= uint64_t{std::bit_cast<uint32_t>(x[i]) >> 31} << (i % 64);
    }
  }
  return true;
}

}  // namespace

bool ScEncode(Kernels k, const ScPlan& plan, LlrMode mode, std::span<const ScBlock> blocks,
              std::span<uint64_t> x_words) {
  const size_t words = std::max<size_t>(1, plan.size() / 64);
  FRUGAL_CHECK_GE(x_words.size(), blocks.size() * words, "codeword words for the blocks");
  for (const ScBlock& b : blocks) FRUGAL_CHECK_LE(b.count, plan.size(), "block of a polar code");
#if defined(FRUGAL_X86)
  if (compress_internal::UseV3(k)) {
    // Whole groups of eight blocks of up to 2^15 positions in the lanes (eight longer blocks
    // outgrow the caches); the rest block by block.
    const size_t grouped = plan.size() <= (size_t{1} << 15) ? blocks.size() - blocks.size() % 8 : 0;
    if (!EncodeLanes(plan, mode, blocks.first(grouped), x_words)) return false;
    return EncodeContiguous(plan, mode, blocks.subspan(grouped), x_words.subspan(grouped * words));
  }
#endif
  return EncodeBaseline(plan, mode, blocks, x_words);
}

}  // namespace frugal::polar
