// Negotiation reports and the evaluation of a cycle (Horovod's coordination).
//
// In each cycle every rank sends the coordinator one CycleMessage: a bit vector over the
// TensorCache (bit i set: the tensor with cache id i is submitted here and not yet reduced, with
// exactly the cached description) plus the full TensorDescriptor of each pending tensor that is
// not in the cache or whose description differs from the cached one. Once the tensors of a model
// are cached, a report is a small bit vector.
//
// EvaluateCycle runs on the coordinator over every rank's report (index = rank):
//  1. descriptors are added to the cache in rank order (a new name gets the next id);
//  2. each rank's reported set is its bits plus its descriptors' ids; a tensor reported by every
//     rank is agreed when every rank's description (the cached one for a bit, its own otherwise)
//     is the same, and mismatched otherwise - the message groups the ranks by description;
//  3. a tensor reported by some ranks only is partial (the stall inspector and the detection of
//     unmatched names use the reporting ranks);
//  4. all_waiting is the AND of the waiting flags.
// DecodeCycleMessage checks every count and length against the bytes that are left before it
// reads, so a malformed message is an error, never an out-of-bounds read.
#include "engine/negotiation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace frugal::engine_internal {
namespace {

constexpr std::string_view kNegotiationMagic = "FRNG";
constexpr uint16_t kNegotiationVersion = 3;
constexpr uint16_t kFlagWaiting = 1;
constexpr size_t kMaxNameBytes = 4096;
constexpr size_t kMaxDims = 32;
constexpr uint32_t kMaxCacheSize = 1u << 24;

Status Bad(std::string_view what) {
  return MalformedError(fmt::format("negotiation message: {}", what));
}

}  // namespace

std::string TensorDescriptor::Describe() const {
  return fmt::format("[{}] {}, priority {}", fmt::join(shape, ", "), dtype, priority);
}

void CycleMessage::SetBit(uint32_t id) {
  if (bits.size() <= id / 8) bits.resize(id / 8 + 1, 0);
  bits[id / 8] = static_cast<uint8_t>(bits[id / 8] | (1u << (id % 8)));
}

void PutDescriptor(WireWriter& w, const TensorDescriptor& d) {
  FRUGAL_CHECK(!d.name.empty() && d.name.size() <= kMaxNameBytes, "tensor name of ", d.name.size(),
               " bytes");
  FRUGAL_CHECK_LE(d.dtype.size(), size_t{255}, "dtype name too long");
  FRUGAL_CHECK_LE(d.shape.size(), kMaxDims, "too many dimensions");
  w.Put<uint16_t>(static_cast<uint16_t>(d.name.size()));
  w.Bytes(d.name.data(), d.name.size());
  w.Put<uint16_t>(static_cast<uint16_t>(d.dtype.size()));
  w.Bytes(d.dtype.data(), d.dtype.size());
  w.Put<uint8_t>(static_cast<uint8_t>(d.shape.size()));
  for (int64_t dim : d.shape) w.Put<int64_t>(dim);
  w.Put<int32_t>(d.priority);
}

std::optional<std::string> GetDescriptor(WireReader& r, TensorDescriptor& d) {
  uint16_t name_size = 0;
  uint16_t dtype_size = 0;
  uint8_t ndim = 0;
  if (!r.Get(name_size) || name_size == 0 || name_size > kMaxNameBytes ||
      !r.String(name_size, d.name)) {
    return "bad tensor name";
  }
  if (!r.Get(dtype_size) || dtype_size > 255 || !r.String(dtype_size, d.dtype)) {
    return "bad dtype";
  }
  if (!r.Get(ndim) || ndim > kMaxDims) return "bad number of dimensions";
  d.shape.clear();
  for (uint8_t k = 0; k < ndim; ++k) {
    int64_t dim = 0;
    if (!r.Get(dim) || dim < 0) return "bad dimension";
    d.shape.push_back(dim);
  }
  if (!r.Get(d.priority)) return "truncated priority";
  return std::nullopt;
}

std::vector<std::byte> EncodeCycleMessage(const CycleMessage& m) {
  WireWriter w;
  PutHeader(w, kNegotiationMagic, kNegotiationVersion);
  w.Put<uint16_t>(m.waiting ? kFlagWaiting : 0);
  w.Put<uint64_t>(m.cycle);
  w.Put<uint32_t>(m.cache_size);
  std::vector<uint8_t> bits(m.bits);
  bits.resize((m.cache_size + 7) / 8, 0);
  w.Bytes(bits.data(), bits.size());
  w.Put<uint32_t>(static_cast<uint32_t>(m.descriptors.size()));
  for (const TensorDescriptor& d : m.descriptors) PutDescriptor(w, d);
  return w.Take();
}

StatusOr<CycleMessage> DecodeCycleMessage(std::span<const std::byte> bytes) {
  WireReader r(bytes);
  if (std::optional<std::string> error = GetHeader(r, kNegotiationMagic, kNegotiationVersion))
    return Bad(*error);
  uint16_t flags = 0;
  CycleMessage m;
  if (!r.Get(flags) || (flags & ~kFlagWaiting) != 0) return Bad("unknown flags");
  m.waiting = (flags & kFlagWaiting) != 0;
  if (!r.Get(m.cycle) || !r.Get(m.cache_size)) return Bad("truncated header");
  if (m.cache_size > kMaxCacheSize) return Bad("cache size out of range");
  if (!r.Raw((m.cache_size + 7) / 8, m.bits)) return Bad("truncated bit vector");
  if (m.cache_size % 8 != 0 && !m.bits.empty() && (m.bits.back() >> (m.cache_size % 8)) != 0) {
    return Bad("bits set beyond the cache size");
  }
  uint32_t count = 0;
  if (!r.Get(count)) return Bad("truncated descriptor count");
  // Each descriptor takes at least 9 bytes: this bounds the count by the bytes left.
  if (count > r.left() / 9) return Bad("descriptor count exceeds the message");
  std::set<std::string> names;
  for (uint32_t i = 0; i < count; ++i) {
    TensorDescriptor d;
    if (std::optional<std::string> error = GetDescriptor(r, d)) return Bad(*error);
    if (!names.insert(d.name).second) return Bad("tensor '" + d.name + "' described twice");
    m.descriptors.push_back(std::move(d));
  }
  if (r.left() != 0) return Bad("trailing bytes");
  return m;
}

std::optional<uint32_t> TensorCache::Find(const std::string& name) const {
  auto it = ids_.find(name);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

uint32_t TensorCache::Add(const TensorDescriptor& descriptor) {
  auto it = ids_.find(descriptor.name);
  if (it != ids_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(entries_.size());
  entries_.push_back(descriptor);
  ids_.emplace(descriptor.name, id);
  return id;
}

std::string JoinRanks(const std::vector<int>& ranks) {
  return fmt::format("{}", fmt::join(ranks, ", "));
}

std::string RankWord(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", JoinRanks(ranks));
}

StatusOr<CycleOutcome> EvaluateCycle(TensorCache& cache, std::span<const CycleMessage> messages) {
  const int n = static_cast<int>(messages.size());
  const uint32_t cached_before = cache.size();
  for (int r = 0; r < n; ++r) {
    if (messages[r].cache_size != cached_before) {
      return MalformedError(
          fmt::format("negotiation: rank {} reports {} cached tensors, the coordinator has {}", r,
                      messages[r].cache_size, cached_before));
    }
  }
  // 1. New descriptors enter the cache in rank order.
  for (int r = 0; r < n; ++r) {
    for (const TensorDescriptor& d : messages[r].descriptors) cache.Add(d);
  }
  // 2. Who reported what, with which description.
  std::map<uint32_t, std::vector<std::pair<int, const TensorDescriptor*>>> reports;
  for (int r = 0; r < n; ++r) {
    for (uint32_t id = 0; id < cached_before; ++id) {
      if (messages[r].Bit(id)) reports[id].emplace_back(r, &cache.at(id));
    }
    for (const TensorDescriptor& d : messages[r].descriptors) {
      const uint32_t id = *cache.Find(d.name);
      auto& list = reports[id];
      if (!list.empty() && list.back().first == r) {
        return MalformedError(fmt::format(
            "negotiation message of rank {}: tensor '{}' both cached and described", r, d.name));
      }
      list.emplace_back(r, &d);
    }
  }
  CycleOutcome outcome;
  for (auto& [id, list] : reports) {
    std::sort(list.begin(), list.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    if (static_cast<int>(list.size()) < n) {
      std::vector<int> ranks;
      for (const auto& [rank, d] : list) ranks.push_back(rank);
      outcome.partial.emplace_back(id, std::move(ranks));
      continue;
    }
    bool same = true;
    for (const auto& [rank, d] : list) same = same && (*d == *list.front().second);
    if (same) {
      outcome.agreed.push_back(id);
      continue;
    }
    // Group the ranks by description, in order of the lowest rank of each group.
    std::vector<std::pair<const TensorDescriptor*, std::vector<int>>> groups;
    for (const auto& report : list) {
      const TensorDescriptor* d = report.second;
      auto it =
          std::find_if(groups.begin(), groups.end(), [d](const auto& g) { return *g.first == *d; });
      if (it == groups.end()) {
        groups.emplace_back(d, std::vector<int>{report.first});
      } else {
        it->second.push_back(report.first);
      }
    }
    std::string text =
        fmt::format("tensor '{}' was submitted with different descriptions: ", cache.at(id).name);
    for (size_t g = 0; g < groups.size(); ++g) {
      text += fmt::format("{}{} on {}", g == 0 ? "" : " but ", groups[g].first->Describe(),
                          RankWord(groups[g].second));
    }
    outcome.mismatched.emplace_back(id, std::move(text));
  }
  outcome.all_waiting = n > 0;
  for (int r = 0; r < n; ++r) {
    outcome.all_waiting = outcome.all_waiting && messages[r].waiting;
  }
  return outcome;
}

std::string UnmatchedMessage(const TensorCache& cache,
                             const std::vector<std::pair<uint32_t, std::vector<int>>>& partial,
                             int world_size) {
  std::string text =
      "every rank is waiting, but the ranks submitted different tensors (names differ): ";
  for (size_t i = 0; i < partial.size(); ++i) {
    const auto& [id, ranks] = partial[i];
    std::vector<int> missing;
    for (int r = 0; r < world_size; ++r) {
      if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) missing.push_back(r);
    }
    text += fmt::format("{}'{}' submitted by {} but not by {}", i == 0 ? "" : "; ",
                        cache.at(id).name, RankWord(ranks), RankWord(missing));
  }
  return text;
}

}  // namespace frugal::engine_internal
