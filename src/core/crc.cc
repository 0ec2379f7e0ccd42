#include "frugal/crc.h"

#include <zlib.h>

namespace frugal {

uint32_t Crc32(std::span<const std::byte> data, uint32_t crc) {
  // zlib's crc32 takes a uInt length; feed large spans in pieces.
  const auto* p = reinterpret_cast<const Bytef*>(data.data());
  size_t left = data.size();
  uLong c = crc;
  while (left > 0) {
    uInt n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    c = crc32(c, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(c);
}

}  // namespace frugal
