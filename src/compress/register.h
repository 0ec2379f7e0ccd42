// Registration hooks of the compressor families, called by DefaultCompressorRegistry().
// Internal to frugal_compress.
#pragma once

#include "frugal/compressor.h"

namespace frugal {

// Defined in src/compress/sparse_register.cc: randomk, topk, threshold, adaptive, sbc, stc, dgc,
// gtopk.
void RegisterSparsifiers(CompressorRegistry& registry);
// Defined in src/compress/lowrank_register.cc: powersgd.
void RegisterLowRank(CompressorRegistry& registry);
// Defined in src/compress/sketch_register.cc: sketch (a count sketch).
void RegisterSketches(CompressorRegistry& registry);
// Defined in src/compress/polar_compressor.cc: polar.
void RegisterCoding(CompressorRegistry& registry);

namespace compress_internal {
// Defined in src/compress/compose.cc: the composition "s1 | s2 | ..." of registry entries.
StatusOr<std::unique_ptr<Compressor>> CreateComposition(const CompressorRegistry& registry,
                                                        std::string_view spec);
}  // namespace compress_internal

}  // namespace frugal
