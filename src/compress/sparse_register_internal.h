// Registration of the sparsification family, file by file (RegisterSparsifiers in
// sparse_register.cc calls them). Internal to frugal_compress.
#pragma once

#include "frugal/compressor.h"

namespace frugal::sparse {

// randomk, topk, threshold, adaptive, sbc, stc (sparse_compressors.cc).
void RegisterBasicSparsifiers(CompressorRegistry& registry);
// dgc (sparse_dgc.cc).
void RegisterDgc(CompressorRegistry& registry);
// gtopk (gtopk_compressor.cc).
void RegisterGTopK(CompressorRegistry& registry);

}  // namespace frugal::sparse
