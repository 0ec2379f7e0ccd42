// Pieces of the aggregation paths that compressors with their own Aggregate() reuse. Internal to
// frugal_compress.
#pragma once

#include <span>
#include <vector>

#include "frugal/compressor.h"

namespace frugal::compress_internal {

// residual = input - Decode(payload).
Status ComputeResidual(const Compressor& compressor, std::span<const std::byte> payload,
                       std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                       std::span<float> residual);

// All-gathers every rank's `payload` (sizes may differ), then sets data to the sum of the decoded
// payloads in rank order (divided by the world size for kAverage), the same bits on every rank.
// kMalformed names the rank whose payload did not decode.
Status AllgatherDecodeSum(Transport& t, const Compressor& compressor,
                          std::span<const std::byte> payload, const TensorInfo& tensor,
                          CompressContext& ctx, ReduceOp op, Duration timeout,
                          std::span<float> data);

// The maximum of one float over all ranks (all-gather of the values). NaN if any rank's is NaN.
StatusOr<float> AllMax(Transport& t, float value, Duration timeout);

}  // namespace frugal::compress_internal

namespace frugal::compress_internal {

// Error feedback around `inner` with the residual in (tensor, slot): p = input + e; encode p into
// `out`; e = p - Decode(out). On an encoding error the residual is left as it was.
Status EncodeWithFeedback(const Compressor& inner, std::span<const float> input,
                          const TensorInfo& tensor, CompressContext& ctx, std::string_view slot,
                          std::vector<std::byte>& out);

}  // namespace frugal::compress_internal
