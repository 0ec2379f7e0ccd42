// The compressed gossip message (see compressed_message.h).
#include "gossip/compressed_message.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "frugal/check.h"

namespace frugal::gossip {
namespace {

template <typename T>
void Put(std::vector<std::byte>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <typename T>
T Get(std::span<const std::byte> in, size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  return value;
}

}  // namespace

MessageCodec::MessageCodec(std::shared_ptr<const Compressor> compressor, size_t min_bytes,
                           uint64_t seed, int rank, int world_size)
    : compressor_(std::move(compressor)),
      dense_(DefaultCompressorRegistry().Create("none").value()),
      min_bytes_(min_bytes),
      seed_(seed),
      world_size_(world_size),
      context_(seed, rank, world_size),
      decode_contexts_(static_cast<size_t>(world_size)) {}

const Compressor& MessageCodec::For(const TensorInfo& tensor) const {
  if (compressor_ && tensor.numel * sizeof(float) >= min_bytes_) return *compressor_;
  return *dense_;
}

Status MessageCodec::Encode(const FlatLayout& layout, uint64_t round, std::span<const float> v,
                            std::vector<std::byte>& out) {
  FRUGAL_CHECK_EQ(v.size(), layout.total);
  context_.set_step(round);
  payloads_.resize(layout.tensors.size());
  for (size_t k = 0; k < layout.tensors.size(); ++k) {
    const TensorInfo& tensor = layout.tensors[k];
    FRUGAL_RETURN_IF_ERROR(For(tensor).Encode(v.subspan(layout.offsets[k], tensor.numel), tensor,
                                              context_, payloads_[k]));
  }
  out.clear();
  Put<uint32_t>(out, static_cast<uint32_t>(layout.tensors.size()));
  for (const auto& p : payloads_) Put<uint64_t>(out, p.size());
  for (const auto& p : payloads_) out.insert(out.end(), p.begin(), p.end());
  return Status::Ok();
}

Status MessageCodec::AddDecoded(const FlatLayout& layout, uint64_t round, int source,
                                std::span<const std::byte> message, float scale,
                                std::span<float> out) {
  FRUGAL_CHECK_EQ(out.size(), layout.total);
  FRUGAL_CHECK(source >= 0 && source < world_size_, "source rank ", source);
  const size_t count = layout.tensors.size();
  auto malformed = [&](const std::string& why) {
    return MalformedError(
        fmt::format("gossip message of rank {} (round {}): {}", source, round, why));
  };
  const size_t header = sizeof(uint32_t) + count * sizeof(uint64_t);
  if (message.size() < header) return malformed("shorter than its header");
  if (Get<uint32_t>(message, 0) != count) {
    return malformed(
        fmt::format("{} tensors where {} were expected", Get<uint32_t>(message, 0), count));
  }
  received_.clear();
  size_t at = header;
  for (size_t k = 0; k < count; ++k) {
    const uint64_t bytes = Get<uint64_t>(message, sizeof(uint32_t) + k * sizeof(uint64_t));
    if (bytes > message.size() - at) return malformed("a payload runs past the end");
    received_.push_back(message.subspan(at, bytes));
    at += bytes;
  }
  if (at != message.size()) return malformed("bytes after the last payload");
  std::unique_ptr<CompressContext>& context = decode_contexts_[static_cast<size_t>(source)];
  if (!context) context = std::make_unique<CompressContext>(seed_, source, world_size_);
  context->set_step(round);
  for (size_t k = 0; k < count; ++k) {
    const TensorInfo& tensor = layout.tensors[k];
    Status status = For(tensor).DecodeScaled(received_[k], tensor, *context, scale,
                                             out.subspan(layout.offsets[k], tensor.numel));
    if (!status.ok()) return status.Annotate(fmt::format("gossip message of rank {}", source));
  }
  return Status::Ok();
}

CompressedExchange::CompressedExchange(const AlgorithmOptions& options, int rank, int world_size)
    : options_(options),
      codec_(options.compressor, options.compress_min_bytes, options.seed, rank, world_size) {}

Status CompressedExchange::Round(Transport& t, uint64_t round, const FlatLayout& layout,
                                 std::span<const float> v, const char* algorithm) {
  const int me = t.rank();
  const std::string what = fmt::format("{} round {}", algorithm, round);
  layout_ = &layout;
  round_ = round;
  FRUGAL_RETURN_IF_ERROR(codec_.Encode(layout, round, v, message_));
  const Topology& g = *options_.topology;
  exchange_.Start(t, kCompressedTag, g.Out(me, round), message_, g.In(me, round), 0);
  return exchange_.Finish(t, options_.timeout, what);
}

Status CompressedExchange::AddOwn(float scale, std::span<float> out) {
  FRUGAL_CHECK(layout_ != nullptr, "AddOwn before a round");
  return codec_.AddDecoded(*layout_, round_, options_.rank, message_, scale, out);
}

Status CompressedExchange::AddMixed(float scale, std::span<float> out) {
  FRUGAL_CHECK(layout_ != nullptr, "AddMixed before a round");
  const int me = options_.rank;
  for (const MixingMatrix::Entry& entry : options_.mixing->Row(me, round_)) {
    const float weight = static_cast<float>(scale * entry.weight);
    if (entry.rank == me) {
      FRUGAL_RETURN_IF_ERROR(codec_.AddDecoded(*layout_, round_, me, message_, weight, out));
      continue;
    }
    size_t k = 0;
    while (k < exchange_.received_count() && exchange_.Source(k) != entry.rank) ++k;
    FRUGAL_INTERNAL_ASSERT(k < exchange_.received_count(), "no message of rank ", entry.rank);
    FRUGAL_RETURN_IF_ERROR(
        codec_.AddDecoded(*layout_, round_, entry.rank, exchange_.Received(k), weight, out));
  }
  return Status::Ok();
}

}  // namespace frugal::gossip
