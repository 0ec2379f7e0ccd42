// Negotiation of the engine (internal): the report every rank sends the coordinator in a cycle,
// its wire format, the cache of known tensors and the coordinator's evaluation of a cycle's
// reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/wire.h"
#include "frugal/status.h"

namespace frugal::engine_internal {

struct TensorDescriptor {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  int32_t priority = 0;

  // "[4, 3] float32, priority 2"
  std::string Describe() const;
  friend bool operator==(const TensorDescriptor& a, const TensorDescriptor& b) {
    return a.name == b.name && a.shape == b.shape && a.dtype == b.dtype && a.priority == b.priority;
  }
};

// Wire format of a descriptor: name u16 + bytes (1..4096), dtype u8-bounded u16 + bytes, ndim u8
// (at most 32), dims i64 (>= 0), priority i32. GetDescriptor returns an error text instead of
// reading past the end or accepting a bad field.
void PutDescriptor(WireWriter& w, const TensorDescriptor& d);
std::optional<std::string> GetDescriptor(WireReader& r, TensorDescriptor& d);

// What a rank has pending in a cycle.
struct CycleMessage {
  uint64_t cycle = 0;
  bool waiting = false;       // a thread of the sender waits on a tensor the sender has reported
  uint32_t cache_size = 0;    // entries in the sender's cache when it built the message
  std::vector<uint8_t> bits;  // bit i (LSB first): the tensor with cache id i is pending
  std::vector<TensorDescriptor> descriptors;  // pending tensors not in the cache, or differing

  bool Bit(uint32_t id) const { return id / 8 < bits.size() && ((bits[id / 8] >> (id % 8)) & 1); }
  void SetBit(uint32_t id);
};

// Wire format, little-endian: magic "FRNG", version u16, flags u16 (1 waiting), cycle u64,
// cache_size u32, bits, descriptor count u32 and descriptors.
std::vector<std::byte> EncodeCycleMessage(const CycleMessage& message);
// Validates every length, count and id before use; kMalformed otherwise.
StatusOr<CycleMessage> DecodeCycleMessage(std::span<const std::byte> bytes);

// The cache of known tensors: ids are given in the order in which the evaluation first meets a
// name; every rank's cache follows the coordinator's.
class TensorCache {
 public:
  std::optional<uint32_t> Find(const std::string& name) const;
  uint32_t Add(const TensorDescriptor& descriptor);  // the existing id if the name is known
  const TensorDescriptor& at(uint32_t id) const { return entries_.at(id); }
  uint32_t size() const { return static_cast<uint32_t>(entries_.size()); }

 private:
  std::vector<TensorDescriptor> entries_;
  std::map<std::string, uint32_t> ids_;
};

struct CycleOutcome {
  std::vector<uint32_t> agreed;  // ready on every rank with one description, ascending ids
  // Submitted by every rank but with different descriptions: id and the error message.
  std::vector<std::pair<uint32_t, std::string>> mismatched;
  // Reported by some ranks only: id and the reporting ranks (ascending).
  std::vector<std::pair<uint32_t, std::vector<int>>> partial;
  bool all_waiting = false;
  std::optional<std::vector<std::vector<uint32_t>>> plan;  // a merge plan to adopt
};

// The coordinator's evaluation of a cycle's reports (index = rank): descriptors are added to the
// cache in rank order, then each tensor is agreed, mismatched or partial (see negotiation.cc).
// kMalformed if a report's cache size differs from the cache's or it both caches and describes
// a tensor.
StatusOr<CycleOutcome> EvaluateCycle(TensorCache& cache, std::span<const CycleMessage> messages);

// "every rank is waiting, but the ranks submitted different tensors (names differ): 'a'
// submitted by rank 0 but not by ranks 1, 2; ..."
std::string UnmatchedMessage(const TensorCache& cache,
                             const std::vector<std::pair<uint32_t, std::vector<int>>>& partial,
                             int world_size);

// "0, 2, 3"
std::string JoinRanks(const std::vector<int>& ranks);
// "rank 3" or "ranks 1, 2".
std::string RankWord(const std::vector<int>& ranks);

}  // namespace frugal::engine_internal
