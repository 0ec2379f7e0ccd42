// Successive-cancellation (SC) encoding of polar lossy source coding: the codeword a block of
// source LLRs is quantized to. Internal to frugal_compress.
//
// SC runs over u in natural order with min-sum check nodes f(a, b) = sgn(a) sgn(b) min(|a|, |b|),
// variable nodes g(a, b, x) = b + (1 - 2x) a and hard decisions u = (LLR < 0) (a tie, LLR = +-0,
// decides 0); frozen positions are 0. The result is the codeword x = u F^{(x)m}, from which
// u = x F^{(x)m} again (polar_transform.h). Deterministic and invariant to scaling the LLRs by a
// power of two.
//
// The schedule (ScPlan) skips the subtrees whose output is known without descending into them
// (fast simplified SC), each shortcut giving the same bits as plain SC for every input:
//   rate 0 (all frozen): x = 0;
//   rate 1 (no frozen position): x = hard decisions of the node's LLRs when none of them is zero
//     (then no f or g below can give zero and SC reproduces them); otherwise the node is descended
//     (SC copies a zero position's decision from its partner there);
//   repetition (only the last position is information): x = the decision on the node's LLR sum,
//     added in the tree order SC uses.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "compress/polar_construct.h"
#include "compress/quant_util.h"

namespace frugal::polar {

using compress_internal::Kernels;

// The source LLR of each position: kSoft, the value itself (magnitudes below FLT_MIN become
// +-FLT_MIN by frugal's sign convention, so that -0 and +0 count as positive); kSign, +1 for
// values >= 0 (and -0), -1 below 0.
enum class LlrMode { kSoft, kSign };

// The check node of min-sum: sgn(a) sgn(b) min(|a|, |b|), the sign taken from the sign bits (so
// that a zero magnitude keeps the product of the signs) and the minimum as MINPS computes it.
inline float MinSumF(float a, float b) {
  const float fa = std::fabs(a), fb = std::fabs(b);
  const float mag = fa < fb ? fa : fb;
  const uint32_t sign = (std::bit_cast<uint32_t>(a) ^ std::bit_cast<uint32_t>(b)) & 0x80000000u;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | sign);
}
// The variable node: b + a, or b - a (a with its sign bit flipped) when the partial sum x is 1.
inline float MinSumG(float b, float a, bool x) {
  return b + std::bit_cast<float>(std::bit_cast<uint32_t>(a) ^ (x ? 0x80000000u : 0u));
}

// The SC schedule of one information set.
class ScPlan {
 public:
  enum class Kind : uint8_t { kF, kG, kCombine, kRate0, kRate1, kRep };
  struct Op {
    Kind kind;
    uint8_t log_size;  // the node's size is 2^log_size
    uint32_t offset;   // the node's first position
  };

  explicit ScPlan(const InfoSet& set);

  int m() const { return m_; }
  size_t size() const { return size_t{1} << m_; }
  const std::vector<Op>& ops() const { return ops_; }

 private:
  void Build(const std::vector<uint32_t>& prefix, uint32_t offset, int log_size);
  int m_;
  std::vector<Op> ops_;
};

// One block of the source: p[i] = g[i] (+ e[i] when e is not null) for i < count; the positions
// from count to the block size have LLR 0 (a tail padded to a power of two).
struct ScBlock {
  const float* g = nullptr;
  const float* e = nullptr;
  size_t count = 0;
};

// The LLRs of one block of `size` positions as the encoder sees them (LlrMode, the scaling of a
// block with a maximum of 2^106 or more, zeros after `count`). False if a value is not finite.
bool LoadBlockLlrs(const ScBlock& block, size_t size, LlrMode mode, float* llr);

// Encodes every block with `plan` and writes the codeword x of block b to
// x_words[b * W, (b + 1) * W), W = max(1, plan.size() / 64). kX86V3 runs groups of eight blocks
// of up to 2^15 positions at a time, one per AVX2 lane, and the others one at a time with eight
// positions per vector; kBaseline one at a time, one position at a time; all give the same bits. LLRs whose magnitude would
// overflow a sum over the block (a block maximum of 2^106 or more) are scaled by 2^-24 first.
// Returns false, with x_words unspecified, when an input value is not finite.
bool ScEncode(Kernels k, const ScPlan& plan, LlrMode mode, std::span<const ScBlock> blocks,
              std::span<uint64_t> x_words);

}  // namespace frugal::polar
