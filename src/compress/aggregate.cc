// Aggregation paths for compressed gradients. Every rank calls AggregateCompressed with the same
// compressor, tensor and options; `data` holds the rank's gradient g_r on entry and the sum (or
// average) of what the ranks transmitted on return, the same bits on every rank.
//
// kAllreduce (summable payloads): payload_r = C(g_r); the float32 bodies are all-reduced (sum)
//   with the chosen algorithm, plus one trailing float that counts ranks whose encoder failed;
//   data = D(sum of bodies).
// kAllgather (any payload): payload_r = C(g_r); Allgatherv of the payloads; every rank computes
//   data = D(payload_0) + D(payload_1) + ... in rank order.
// kSignVote: as kAllgather, then data = sign(sum) element-wise (0 where the vote is tied): the
//   majority vote of signSGD / Signum.
// kTwoPhase (re-quantizable payloads; Bagua's ByteGrad, DeepSpeed's 1-bit Adam): the tensor is
//   split into n chunks: whole rows of its matrix view when it has a shape (chunk j has shape
//   {rows_j, cols}, so per-column compressors keep their columns), else BlockPartition of the
//   elements. Phase 1, compressed reduce-scatter: rank r encodes
//   chunk j of g_r (tensor "<name>#j/n") and sends it to rank j; rank j decodes the n payloads of
//   its chunk and sums them in rank order (and divides by n for kAverage). Phase 2: rank j
//   re-encodes its partial sum (tensor "<name>#j/n@server") - with the compressor's error
//   feedback kept on the server side (slot kServerErrorFeedbackSlot) when the compressor has
//   error feedback - and the re-encoded chunks are all-gathered and decoded into place.
// kCustom: the compressor's own Aggregate() (PowerSGD, gTop-k, TernGrad's shared scale).
//
// Failure without hangs: a rank whose encoder fails still takes part in the exchange (an empty
// payload, or a nonzero failure count on the all-reduce path) and then returns its error; the
// other ranks see the empty payload or the count and fail too, naming that rank.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "compress/aggregate_util.h"
#include "frugal/compress_wire.h"
#include "frugal/compressor.h"

namespace frugal {
namespace compress_internal {

Status ComputeResidual(const Compressor& compressor, std::span<const std::byte> payload,
                       std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                       std::span<float> residual) {
  FRUGAL_CHECK_EQ(residual.size(), input.size());
  FRUGAL_RETURN_IF_ERROR(compressor.DecodeOverwrite(payload, tensor, ctx, residual));
  for (size_t i = 0; i < residual.size(); ++i) residual[i] = input[i] - residual[i];
  return Status::Ok();
}

namespace {

void Scale(std::span<float> data, ReduceOp op, int n) {
  if (op != ReduceOp::kAverage || n == 1) return;
  const float divisor = static_cast<float>(n);
  for (float& x : data) x /= divisor;
}

// Decodes the concatenated payloads (sizes[r] bytes from rank r) into `data`, summed in rank order.
Status DecodeSum(const Compressor& compressor, std::span<const std::byte> all,
                 const std::vector<size_t>& sizes, const TensorInfo& tensor, CompressContext& ctx,
                 std::span<float> data) {
  size_t offset = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    if (sizes[r] == 0) {
      return MalformedError(fmt::format(
          "rank {} sent no payload for tensor '{}' (its encoder failed)", r, tensor.name));
    }
    std::span<const std::byte> payload = all.subspan(offset, sizes[r]);
    Status s = r == 0 ? compressor.DecodeOverwrite(payload, tensor, ctx, data)
                      : compressor.Decode(payload, tensor, ctx, data);
    if (!s.ok()) return s.Annotate(fmt::format("payload of rank {}", r));
    offset += sizes[r];
  }
  return Status::Ok();
}

}  // namespace

Status AllgatherDecodeSum(Transport& t, const Compressor& compressor,
                          std::span<const std::byte> payload, const TensorInfo& tensor,
                          CompressContext& ctx, ReduceOp op, Duration timeout,
                          std::span<float> data) {
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  FRUGAL_RETURN_IF_ERROR(Allgatherv(t, payload, all, sizes,
                                    CollectiveOptions{.timeout = timeout, .check_lengths = false}));
  FRUGAL_RETURN_IF_ERROR(DecodeSum(compressor, all, sizes, tensor, ctx, data));
  Scale(data, op, t.size());
  return Status::Ok();
}

StatusOr<float> AllMax(Transport& t, float value, Duration timeout) {
  std::vector<float> all(static_cast<size_t>(t.size()));
  FRUGAL_RETURN_IF_ERROR(Allgather(t, std::span<const float>(&value, 1), all,
                                   CollectiveOptions{.timeout = timeout, .check_lengths = false}));
  float m = all[0];
  for (float v : all) {
    if (std::isnan(v) || std::isnan(m)) return std::numeric_limits<float>::quiet_NaN();
    m = std::max(m, v);
  }
  return m;
}

namespace {

Status AllreducePath(Transport& t, const Compressor& c, std::span<float> data,
                     const TensorInfo& tensor, CompressContext& ctx,
                     const AggregateOptions& options, uint64_t* payload_bytes) {
  std::optional<uint64_t> body_bits = c.BodyBits(tensor);
  FRUGAL_INTERNAL_ASSERT(body_bits.has_value() && *body_bits % 32 == 0, c.spec(),
                         " is summable but its body is not a fixed number of floats");
  const size_t floats = *body_bits / 32;
  std::vector<std::byte> payload;
  Status encoded = c.Encode(data, tensor, ctx, payload);
  // The body as floats, plus one float counting the ranks whose encoder failed.
  std::vector<float> sum(floats + 1, 0.0f);
  if (encoded.ok()) {
    FRUGAL_INTERNAL_ASSERT(payload.size() == kWireHeaderBytes + 4 * floats, c.spec(),
                           " produced a payload of another size than BodyBits announced");
    if (floats > 0) std::memcpy(sum.data(), payload.data() + kWireHeaderBytes, 4 * floats);
    *payload_bytes = payload.size();
  } else {
    sum[floats] = 1.0f;
  }
  AllreduceOptions ar;
  ar.algorithm = options.algorithm;
  ar.op = ReduceOp::kSum;
  ar.timeout = options.timeout;
  ar.check_lengths = false;
  FRUGAL_RETURN_IF_ERROR(Allreduce(t, sum, ar));
  FRUGAL_RETURN_IF_ERROR(encoded);
  if (sum[floats] != 0.0f) {
    return InvalidArgumentError(
        fmt::format("the encoder failed on {} rank(s) for tensor '{}'", sum[floats], tensor.name));
  }
  if (floats > 0) std::memcpy(payload.data() + kWireHeaderBytes, sum.data(), 4 * floats);
  FRUGAL_RETURN_IF_ERROR(c.DecodeOverwrite(payload, tensor, ctx, data).Annotate("summed payload"));
  Scale(data, options.op, t.size());
  return Status::Ok();
}

Status GatherPath(Transport& t, const Compressor& c, std::span<float> data,
                  const TensorInfo& tensor, CompressContext& ctx, const AggregateOptions& options,
                  bool vote, uint64_t* payload_bytes) {
  std::vector<std::byte> payload;
  Status encoded = c.Encode(data, tensor, ctx, payload);
  if (!encoded.ok()) payload.clear();
  *payload_bytes = payload.size();
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  FRUGAL_RETURN_IF_ERROR(
      Allgatherv(t, payload, all, sizes,
                 CollectiveOptions{.timeout = options.timeout, .check_lengths = false}));
  FRUGAL_RETURN_IF_ERROR(encoded);
  FRUGAL_RETURN_IF_ERROR(DecodeSum(c, all, sizes, tensor, ctx, data));
  if (vote) {
    for (float& x : data) x = x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
  } else {
    Scale(data, options.op, t.size());
  }
  return Status::Ok();
}

// The chunks of the two-phase path: whole rows of the matrix view when the tensor has a shape
// (so that per-column compressors keep their columns), else BlockPartition of the elements.
struct Chunk {
  Block block;
  std::vector<int64_t> shape;  // {rows_j, cols}, or empty
};

std::vector<Chunk> ChunksOf(const TensorInfo& tensor, int n) {
  std::vector<Chunk> chunks(n);
  const bool matrix = tensor.shape.size() >= 2 && tensor.numel > 0;
  for (int j = 0; j < n; ++j) {
    if (matrix) {
      const size_t cols = tensor.cols();
      Block rows = BlockPartition(tensor.rows(), n, j);
      chunks[j].block = Block{rows.offset * cols, rows.count * cols};
      chunks[j].shape = {static_cast<int64_t>(rows.count), static_cast<int64_t>(cols)};
    } else {
      chunks[j].block = BlockPartition(tensor.numel, n, j);
    }
  }
  return chunks;
}

TensorInfo ChunkInfo(const TensorInfo& tensor, int j, int n, const Chunk& chunk, bool server) {
  return TensorInfo(fmt::format("{}#{}/{}{}", tensor.name, j, n, server ? "@server" : ""),
                    chunk.block.count, chunk.shape);
}

Status TwoPhasePath(Transport& t, const Compressor& c, std::span<float> data,
                    const TensorInfo& tensor, CompressContext& ctx, const AggregateOptions& options,
                    uint64_t* payload_bytes) {
  const int n = t.size();
  const int me = t.rank();
  const int tag = kCompressTagBase;
  const std::vector<Chunk> chunks = ChunksOf(tensor, n);

  // Phase 1: encode every chunk; an encoder failure sends empty payloads so that peers fail too.
  std::vector<std::vector<std::byte>> mine(n);
  Status encoded = Status::Ok();
  for (int j = 0; j < n && encoded.ok(); ++j) {
    TensorInfo info = ChunkInfo(tensor, j, n, chunks[j], false);
    encoded =
        c.Encode(data.subspan(chunks[j].block.offset, chunks[j].block.count), info, ctx, mine[j]);
  }
  if (!encoded.ok()) {
    for (auto& p : mine) p.clear();
  }
  for (const auto& p : mine) *payload_bytes += p.size();
  std::vector<std::unique_ptr<Work>> sends;
  for (int j = 0; j < n; ++j) {
    if (j != me) sends.push_back(t.ISend(j, tag, mine[j]));
  }
  std::vector<std::vector<std::byte>> theirs(n);
  Status received = Status::Ok();
  for (int k = 0; k < n && received.ok(); ++k) {
    if (k == me) continue;
    StatusOr<ProbeResult> probe = t.Probe(k, tag, options.timeout);
    if (!probe.ok()) {
      received = probe.status();
      break;
    }
    theirs[k].resize(probe->bytes);
    std::unique_ptr<Work> recv = t.IRecv(k, tag, theirs[k]);
    received = recv->Wait(options.timeout);
  }
  for (auto& s : sends) {
    Status sent = s->Wait(options.timeout);
    if (received.ok() && !sent.ok()) received = sent;
  }
  FRUGAL_RETURN_IF_ERROR(received.Annotate("two-phase reduce-scatter"));
  FRUGAL_RETURN_IF_ERROR(encoded);

  // Decode and sum this rank's chunk in rank order.
  const Block own = chunks[me].block;
  TensorInfo own_info = ChunkInfo(tensor, me, n, chunks[me], false);
  // Written by the first decode: no pass that zeroes it.
  std::unique_ptr<float[]> partial_memory = std::make_unique_for_overwrite<float[]>(own.count);
  std::span<float> partial(partial_memory.get(), own.count);
  for (int k = 0; k < n; ++k) {
    const std::vector<std::byte>& p = k == me ? mine[me] : theirs[k];
    if (p.empty()) {
      return MalformedError(fmt::format(
          "rank {} sent no payload for tensor '{}' (its encoder failed)", k, tensor.name));
    }
    Status s =
        k == 0 ? c.DecodeOverwrite(p, own_info, ctx, partial) : c.Decode(p, own_info, ctx, partial);
    if (!s.ok()) return s.Annotate(fmt::format("two-phase payload of rank {}", k));
  }
  Scale(partial, options.op, n);

  // Phase 2: re-encode the partial sum (server-side error feedback when C has error feedback).
  TensorInfo server_info = ChunkInfo(tensor, me, n, chunks[me], true);
  std::vector<std::byte> reencoded;
  Status reenc = c.inner() != nullptr ? EncodeWithFeedback(*c.inner(), partial, server_info, ctx,
                                                           kServerErrorFeedbackSlot, reencoded)
                                      : c.Encode(partial, server_info, ctx, reencoded);
  if (!reenc.ok()) reencoded.clear();
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  FRUGAL_RETURN_IF_ERROR(
      Allgatherv(t, reencoded, all, sizes,
                 CollectiveOptions{.timeout = options.timeout, .check_lengths = false})
          .Annotate("two-phase allgather"));
  FRUGAL_RETURN_IF_ERROR(reenc);
  // The chunks partition `data`: each is written once.
  size_t offset = 0;
  for (int j = 0; j < n; ++j) {
    if (sizes[j] == 0) {
      return MalformedError(fmt::format(
          "rank {} sent no re-encoded chunk for tensor '{}' (its encoder failed)", j, tensor.name));
    }
    TensorInfo info = ChunkInfo(tensor, j, n, chunks[j], true);
    Status s = c.DecodeOverwrite(std::span<const std::byte>(all).subspan(offset, sizes[j]), info,
                                 ctx, data.subspan(chunks[j].block.offset, chunks[j].block.count));
    if (!s.ok()) return s.Annotate(fmt::format("two-phase chunk of rank {}", j));
    offset += sizes[j];
  }
  return Status::Ok();
}

}  // namespace
}  // namespace compress_internal

AggregationPath ResolveAggregationPath(const Compressor& compressor, AggregationPath requested) {
  if (requested != AggregationPath::kAuto) return requested;
  CompressorTraits traits = compressor.traits();
  if (traits.custom_aggregate) return AggregationPath::kCustom;
  if (traits.sign_vote) return AggregationPath::kSignVote;
  if (traits.summable) return AggregationPath::kAllreduce;
  if (traits.requantizable) return AggregationPath::kTwoPhase;
  return AggregationPath::kAllgather;
}

Status CheckAggregationPath(const Compressor& compressor, AggregationPath requested) {
  const AggregationPath path = ResolveAggregationPath(compressor, requested);
  const CompressorTraits traits = compressor.traits();
  auto unsuited = [&](std::string_view needs) {
    return InvalidArgumentError(fmt::format("aggregation path {} needs a {} compressor; {} is not",
                                            AggregationPathName(path), needs, compressor.spec()));
  };
  switch (path) {
    case AggregationPath::kAllreduce:
      if (!traits.summable) return unsuited("summable");
      break;
    case AggregationPath::kTwoPhase:
      if (!traits.requantizable) return unsuited("re-quantizable");
      break;
    case AggregationPath::kSignVote:
      if (!traits.sign_vote) return unsuited("sign (majority vote)");
      break;
    case AggregationPath::kCustom:
      if (!traits.custom_aggregate) return unsuited("custom-aggregate");
      break;
    default:
      break;
  }
  return Status::Ok();
}

Status AggregateCompressed(Transport& t, const Compressor& compressor, std::span<float> data,
                           const TensorInfo& tensor, CompressContext& ctx,
                           const AggregateOptions& options, AggregateStats* stats) {
  using namespace compress_internal;  // NOLINT(google-build-using-namespace)
  FRUGAL_CHECK_EQ(data.size(), tensor.numel, "data of tensor '", tensor.name, "'");
  FRUGAL_CHECK_EQ(ctx.world_size(), t.size(), "context and transport disagree on the world size");
  FRUGAL_CHECK_EQ(ctx.rank(), t.rank(), "context and transport disagree on the rank");
  const AggregationPath path = ResolveAggregationPath(compressor, options.path);
  const std::string what = fmt::format("{} aggregation of '{}' with {}", AggregationPathName(path),
                                       tensor.name, compressor.spec());
  FRUGAL_RETURN_IF_ERROR(CheckAggregationPath(compressor, path));
  const uint64_t sent_before = t.bytes_sent();
  if (options.check_lengths) {
    FRUGAL_RETURN_IF_ERROR(CheckSameLength(t, tensor.numel, what, options.timeout).Annotate(what));
  }
  uint64_t payload_bytes = 0;
  Status status;
  switch (path) {
    case AggregationPath::kAllreduce:
      status = AllreducePath(t, compressor, data, tensor, ctx, options, &payload_bytes);
      break;
    case AggregationPath::kAllgather:
    case AggregationPath::kSignVote:
      status = GatherPath(t, compressor, data, tensor, ctx, options,
                          path == AggregationPath::kSignVote, &payload_bytes);
      break;
    case AggregationPath::kTwoPhase:
      status = TwoPhasePath(t, compressor, data, tensor, ctx, options, &payload_bytes);
      break;
    case AggregationPath::kCustom:
      status = compressor.Aggregate(t, data, {}, tensor, ctx, options);
      break;
    case AggregationPath::kAuto:
      FRUGAL_INTERNAL_ASSERT(false, "kAuto was not resolved");
  }
  if (stats != nullptr) {
    stats->path = path;
    stats->bytes_sent = t.bytes_sent() - sent_before;
    stats->payload_bytes = payload_bytes;
    stats->dense_bytes = uint64_t{4} * tensor.numel;
  }
  return status.Annotate(what);
}

}  // namespace frugal
