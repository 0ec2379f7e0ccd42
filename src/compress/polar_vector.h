// The element-wise kernels of the polar compressor around the codeword of a block: the
// correlation that gives its scale alpha, and the error-feedback residual. Each comes in the
// baseline and the x86-64-v3 kernel set with the same bits. Internal to frugal_compress.
//
// Bits are a block's codeword x, LSB-first (polar_transform.h's words as bytes); s_i = 1 - 2 x_i.
#pragma once

#include <cstddef>

#include "compress/quant_util.h"

namespace frugal::polar {

using compress_internal::Kernels;

// sum over i < n of s_i p_i in double, p_i = g[i] (+ e[i] when e is not null): eight
// accumulators, accumulator j summing the positions i = j mod 8 in order, added as
// ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)).
double SignedSum(Kernels k, const float* g, const float* e, const std::byte* bits, size_t n);

// e[i] = (g[i] + e[i]) - (0 + s_i alpha) for i < n: what error feedback keeps after the block
// decoded to s_i alpha (the generic path's residual, bit for bit).
void SubtractCodeword(Kernels k, const float* g, float* e, const std::byte* bits, size_t n,
                      float alpha);

}  // namespace frugal::polar
