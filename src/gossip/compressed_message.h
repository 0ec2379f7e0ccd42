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
  // Adds `scale` times the decoded values of a message of rank `source` for `round` into `out`
  // (layout.total values): out[e] += scale * C(v)[e], in float, tensor by tensor with the
  // compressor's DecodeScaled (a sparse payload touches only its entries). The frame is checked
  // before anything is added and each payload before its tensor is; on an error the tensors
  // before the malformed one are added (the callers end the run).
  Status AddDecoded(const FlatLayout& layout, uint64_t round, int source,
                    std::span<const std::byte> message, float scale, std::span<float> out);

 private:
  const Compressor& For(const TensorInfo& tensor) const;

  std::shared_ptr<const Compressor> compressor_;
  std::unique_ptr<Compressor> dense_;
  size_t min_bytes_;
  uint64_t seed_;
  int world_size_;
  CompressContext context_;
  // One decoding context per source rank, made on its first message: the compressors' decode
  // scratch (sparse bodies, shared indices, dense decodes) is kept from round to round.
  std::vector<std::unique_ptr<CompressContext>> decode_contexts_;
  std::vector<std::vector<std::byte>> payloads_;
  std::vector<std::span<const std::byte>> received_;
};

// One round of a compressed gossip algorithm on rank i: C(v_i) is encoded, sent to the
// out-neighbours of the round and the in-neighbours' C(v_j) received (all in flight at once).
// Then AddOwn adds C(v_i) as every neighbour decodes it, and AddMixed the row of the round,
// sum_j W_ij C(v_j) (i included, ascending j), each scaled, into the algorithm's float vectors:
// no dense copy of a message, so a sparse round costs its messages' length beside the encoding.
class CompressedExchange {
 public:
  CompressedExchange(const AlgorithmOptions& options, int rank, int world_size);

  // `layout` is kept by reference for AddOwn and AddMixed: it outlives the round.
  Status Round(Transport& t, uint64_t round, const FlatLayout& layout, std::span<const float> v,
               const char* algorithm);
  // out += scale * C(v_i), of the last Round.
  Status AddOwn(float scale, std::span<float> out);
  // out += sum_j (scale * W_ij) C(v_j) over the row of the last Round, in ascending j.
  Status AddMixed(float scale, std::span<float> out);

 private:
  AlgorithmOptions options_;
  MessageCodec codec_;
  NeighbourExchange exchange_;
  std::vector<std::byte> message_;
  const FlatLayout* layout_ = nullptr;
  uint64_t round_ = 0;
};

}  // namespace frugal::gossip
