// The sketch family's registration hook (see src/compress/register.h).
#include "compress/register.h"
#include "compress/sketch_register_internal.h"

namespace frugal {

void RegisterSketches(CompressorRegistry& registry) { sketch::RegisterCountSketch(registry); }

}  // namespace frugal
