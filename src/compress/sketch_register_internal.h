// Registration of the sketch family (RegisterSketches in sketch_register.cc calls it). Internal
// to frugal_compress.
#pragma once

#include "frugal/compressor.h"

namespace frugal::sketch {

// sketch (sketch_compressor.cc).
void RegisterCountSketch(CompressorRegistry& registry);

}  // namespace frugal::sketch
