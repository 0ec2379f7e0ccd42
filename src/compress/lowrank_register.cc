// The low-rank family's registration hook (see src/compress/register.h).
#include "compress/lowrank_register_internal.h"
#include "compress/register.h"

namespace frugal {

void RegisterLowRank(CompressorRegistry& registry) { lowrank::RegisterPowerSgd(registry); }

}  // namespace frugal
