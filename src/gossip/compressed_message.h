// The message of the compressed gossip algorithms (CHOCO, DCD, ECD): a flat vector encoded tensor
// by tensor with the run's compressor, in one buffer.
//
// Layout: u32 tensor count, then one u64 payload length per tensor, then the payloads (each one
// the compressor's wire format, compress_wire.h). Tensors smaller than `min_bytes` are encoded by
// the lossless "none" compressor (float32). Decode validates the frame, and the compressor each
// payload; a malformed message is kMalformed.
//
// Randomness: rank r encodes round k with the stream (seed, r, k, tensor), so the single-process
// reference, holding one codec per rank, draws the same bits. Not thread safe.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "frugal/compressor.h"
#include "gossip/algorithm.h"
#include "gossip/neighbour_exchange.h"

namespace frugal::gossip {

class MessageCodec {
 public:
  // `compressor` null: every tensor float32.
  MessageCodec(std::shared_ptr<const Compressor> compressor, size_t min_bytes, uint64_t seed,
               int rank, int world_size);

  // Encodes `v` (layout.total values) for `round` into `out` (replaced).
  Status Encode(const FlatLayout& layout, uint64_t round, std::span<const float> v,
                std::vector<std::byte>& out);
  // Writes the decoded values of a message of rank `source` for `round` into `out`
  // (layout.total values, overwritten).
  Status Decode(const FlatLayout& layout, uint64_t round, int source,
                std::span<const std::byte> message, std::span<float> out) const;

 private:
  const Compressor& For(const TensorInfo& tensor) const;

  std::shared_ptr<const Compressor> compressor_;
  std::unique_ptr<Compressor> dense_;
  size_t min_bytes_;
  uint64_t seed_;
  int world_size_;
  CompressContext context_;
  std::vector<std::vector<std::byte>> payloads_;
};

// One round of a compressed gossip algorithm on rank i: C(v_i) is encoded, sent to the
// out-neighbours of the round and the in-neighbours' C(v_j) received (all in flight at once);
// then own() = C(v_i) as every neighbour decodes it, and mixed() = sum_j W_ij C(v_j) over the
// row of the round (i included, ascending j, in double).
class CompressedExchange {
 public:
  CompressedExchange(const AlgorithmOptions& options, int rank, int world_size);

  Status Round(Transport& t, uint64_t round, const FlatLayout& layout, std::span<const float> v,
               const char* algorithm);
  std::span<const float> own() const { return own_; }
  const std::vector<double>& mixed() const { return mixed_; }

 private:
  AlgorithmOptions options_;
  MessageCodec codec_;
  NeighbourExchange exchange_;
  std::vector<std::byte> message_;
  std::vector<float> own_;
  std::vector<float> scratch_;
  std::vector<double> mixed_;
};

}  // namespace frugal::gossip
