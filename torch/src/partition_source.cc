// The split of a data set by source (see SourceSplit in data.h).
#include <algorithm>
#include <vector>

#include "frugal_torch/data.h"

namespace frugal_torch {

std::vector<std::vector<int64_t>> SourceSplit(const std::vector<uint8_t>& labels, int parts) {
  FRUGAL_CHECK_GT(parts, 0);
  std::vector<std::vector<int64_t>> pieces(256);
  for (size_t i = 0; i < labels.size(); ++i) pieces[labels[i]].push_back(static_cast<int64_t>(i));
  std::erase_if(pieces, [](const std::vector<int64_t>& p) { return p.empty(); });
  auto larger = [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    return a.size() != b.size() ? a.size() > b.size() : a.front() < b.front();
  };
  while (pieces.size() < static_cast<size_t>(parts)) {
    auto largest = std::min_element(pieces.begin(), pieces.end(), larger);
    if (largest == pieces.end() || largest->size() < 2) break;
    const auto half = largest->begin() + static_cast<std::ptrdiff_t>(largest->size() / 2);
    std::vector<int64_t> upper(half, largest->end());
    largest->erase(half, largest->end());
    pieces.push_back(std::move(upper));
  }
  std::sort(pieces.begin(), pieces.end(), larger);
  std::vector<std::vector<int64_t>> shards(static_cast<size_t>(parts));
  for (std::vector<int64_t>& piece : pieces) {
    auto smallest =
        std::min_element(shards.begin(), shards.end(),
                         [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
                           return a.size() < b.size();
                         });
    smallest->insert(smallest->end(), piece.begin(), piece.end());
  }
  for (std::vector<int64_t>& shard : shards) std::sort(shard.begin(), shard.end());
  return shards;
}

}  // namespace frugal_torch
