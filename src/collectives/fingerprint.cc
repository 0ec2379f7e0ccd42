#include "frugal/fingerprint.h"

#include <fmt/format.h>

#include <cstring>

namespace frugal {

StatusOr<std::vector<int>> RanksDifferingFromRankZero(Transport& t, uint64_t fingerprint,
                                                      const CollectiveOptions& options) {
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  FRUGAL_RETURN_IF_ERROR(Allgatherv(t, std::as_bytes(std::span<const uint64_t>(&fingerprint, 1)),
                                    all, sizes, options));
  const size_t n = static_cast<size_t>(t.size());
  if (sizes.size() != n || all.size() != sizeof(uint64_t) * n) {
    return MalformedError(
        fmt::format("fingerprints: gathered {} bytes from {} ranks, expected 8 from each",
                    all.size(), sizes.size()));
  }
  std::vector<uint64_t> prints(n);
  std::memcpy(prints.data(), all.data(), all.size());
  std::vector<int> differing;
  for (size_t r = 1; r < n; ++r) {
    if (prints[r] != prints[0]) differing.push_back(static_cast<int>(r));
  }
  return differing;
}

}  // namespace frugal
