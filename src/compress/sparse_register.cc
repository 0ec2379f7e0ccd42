// The sparsification family's registration hook (see src/compress/register.h).
#include "compress/register.h"
#include "compress/sparse_register_internal.h"

namespace frugal {

void RegisterSparsifiers(CompressorRegistry& registry) {
  sparse::RegisterBasicSparsifiers(registry);
  sparse::RegisterDgc(registry);
  sparse::RegisterGTopK(registry);
}

}  // namespace frugal
