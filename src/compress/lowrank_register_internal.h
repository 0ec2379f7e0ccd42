// Registration of the low-rank family (RegisterLowRank in lowrank_register.cc calls it). Internal
// to frugal_compress.
#pragma once

#include "frugal/compressor.h"

namespace frugal::lowrank {

// powersgd (lowrank_powersgd.cc).
void RegisterPowerSgd(CompressorRegistry& registry);

}  // namespace frugal::lowrank
