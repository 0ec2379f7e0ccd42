// SC list encoding and Korada-Urbanke randomized rounding for polar lossy source coding: the
// research options of the polar compressor, one block at a time on the baseline ISA. Internal to
// frugal_compress.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "compress/polar_construct.h"
#include "frugal/random.h"

namespace frugal::polar {

struct ListOptions {
  // Paths kept (>= 1). With 1 and no randomized rounding the result is plain SC's (polar_sc.h).
  int list = 1;
  // Randomized rounding (list must be 1): an information bit is 1 with probability
  // 1 / (1 + exp(llr_scale * LLR)), the posterior of the test channel when llr_scale turns the
  // min-sum LLRs into its log-likelihood ratios; the uniforms come from `rng`.
  bool randomized = false;
  double llr_scale = 1.0;
  RngStream* rng = nullptr;
};

// Encodes one block of set.size() LLRs (natural order) into its codeword x (words as in
// polar_transform.h). SC list keeps the `list` paths of smallest min-sum metric (a decision
// against the sign of its LLR costs |LLR|; equal metrics keep the earlier path and the decision
// that follows the sign) and, at the end, returns the path with the largest sum over positions
// of LLR_i (1 - 2 x_i), the first one on ties.
void ListEncode(std::span<const float> llr, const InfoSet& set, const ListOptions& options,
                std::span<uint64_t> x_words);

}  // namespace frugal::polar
