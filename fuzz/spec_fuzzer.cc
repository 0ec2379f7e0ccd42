// libFuzzer target for the spec parser and the registry: any string yields a compressor or a
// kNotFound / kInvalidArgument status, and a compressor's canonical spec parses back to itself.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "frugal/compressor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const frugal::CompressorRegistry registry = frugal::DefaultCompressorRegistry();
  std::string spec(reinterpret_cast<const char*>(data), size);
  auto made = registry.Create(spec);
  if (!made.ok()) {
    auto code = made.status().code();
    if (code != frugal::StatusCode::kNotFound && code != frugal::StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "spec '%s': unexpected %s\n", spec.c_str(),
                   made.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  std::string canonical = (*made)->spec();
  auto again = registry.Create(canonical);
  if (!again.ok() || (*again)->spec() != canonical) {
    std::fprintf(stderr, "spec '%s': canonical '%s' does not parse back\n", spec.c_str(),
                 canonical.c_str());
    std::abort();
  }
  return 0;
}
