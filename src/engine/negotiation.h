// Negotiation of the engine (internal): the message every rank sends every other rank in a
// cycle, its wire format, the cache of known tensors and the evaluation of a cycle's messages
// that every rank performs identically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

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

struct CycleMessage {
  uint64_t cycle = 0;
  bool waiting = false;       // a thread of the sender waits on a tensor the sender has reported
  uint32_t cache_size = 0;    // entries in the sender's cache when it built the message
  std::vector<uint8_t> bits;  // bit i (LSB first): the tensor with cache id i is pending
  std::vector<TensorDescriptor> descriptors;  // pending tensors not in the cache, or differing
  // Merge plan (kMgWfbp), sent by rank 0 once: groups of cache ids.
  std::optional<std::vector<std::vector<uint32_t>>> plan;

  bool Bit(uint32_t id) const { return id / 8 < bits.size() && ((bits[id / 8] >> (id % 8)) & 1); }
  void SetBit(uint32_t id);
};

// Wire format, little-endian: magic "FRNG", version u16, flags u16 (1 waiting, 4 plan), cycle
// u64, cache_size u32, bits, descriptor count u32 and descriptors (name u16+bytes, dtype
// u16+bytes, ndim u8, dims i64, priority i32), plan (u32 groups, each u32 count + u32 ids) if plan.
std::vector<std::byte> EncodeCycleMessage(const CycleMessage& message);
// Validates every length, count and id before use; kMalformed otherwise.
StatusOr<CycleMessage> DecodeCycleMessage(std::span<const std::byte> bytes);

// The notice a failed engine sends every peer (on its own tag, outside the cycles): the code and
// message of its failure, so that the peers fail with the same code and the cause.
struct AbortMessage {
  StatusCode code = StatusCode::kInternal;
  std::string reason;
};
// Wire format, little-endian: magic "FRAB", version u16, code u8, reason (u32 length + bytes, at
// most 64 KiB; longer reasons are cut).
std::vector<std::byte> EncodeAbortMessage(const AbortMessage& message);
// kMalformed for a bad magic, version, code (OK or unknown) or length.
StatusOr<AbortMessage> DecodeAbortMessage(std::span<const std::byte> bytes);

// The cache of known tensors: ids are given in the order in which the evaluation first meets a
// name, which is the same on every rank.
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
  // Reported by some ranks only: id and the reporting ranks.
  std::vector<std::pair<uint32_t, std::vector<int>>> partial;
  bool all_waiting = false;
  std::optional<std::vector<std::vector<uint32_t>>> plan;
};

// Every rank calls this with the same messages (index = rank) and the same cache, and gets the
// same outcome and the same updated cache: descriptors are added to the cache in rank order.
// kMalformed if a message's bits do not match the cache or the plan names unknown ids.
StatusOr<CycleOutcome> EvaluateCycle(TensorCache& cache, std::span<const CycleMessage> messages);

// "tensors submitted by some ranks only while every rank waits: 'a' by rank 0 (not by 1), ..."
std::string UnmatchedMessage(const TensorCache& cache,
                             const std::vector<std::pair<uint32_t, std::vector<int>>>& partial,
                             int world_size);

// "0, 2, 3"
std::string JoinRanks(const std::vector<int>& ranks);

}  // namespace frugal::engine_internal
