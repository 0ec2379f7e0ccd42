#include "compress/quant_util.h"

namespace frugal {
namespace compress_internal {

void MustRegister(CompressorRegistry& registry, CompressorEntry entry) {
  Status status = registry.Register(std::move(entry));
  FRUGAL_INTERNAL_ASSERT(status.ok(), status.ToString());
}

}  // namespace compress_internal

void RegisterQuantizers(CompressorRegistry& registry) {
  using namespace compress_internal;  // NOLINT(google-build-using-namespace)
  RegisterNone(registry);
  RegisterFloat16(registry);
  RegisterMinMax8(registry);
  RegisterQsgd(registry);
  RegisterTernGrad(registry);
  RegisterOneBit(registry);
  RegisterSign(registry);
  RegisterNatural(registry);
}

}  // namespace frugal
