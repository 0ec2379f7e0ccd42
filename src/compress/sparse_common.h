// Shared parts of the sparsification, gTop-k, low-rank and sketch compressors: the boilerplate of
// the Compressor interface, the "ratio= or k=" parameter, a per-context selection scratch and the
// layout of a sparse body. Internal to frugal_compress.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compress/sparse_select.h"
#include "frugal/compress_wire.h"
#include "frugal/compressor.h"

namespace frugal::sparse {

// Name, id, traits and the canonical parameter list ("key=value,..." sorted by key).
class SparseCompressorBase : public Compressor {
 public:
  SparseCompressorBase(std::string_view name, CompressorId id, CompressorTraits traits,
                       std::string params)
      : name_(name), id_(id), traits_(traits), params_(std::move(params)) {}

  std::string_view name() const override { return name_; }
  std::string spec() const override { return params_.empty() ? name_ : name_ + ":" + params_; }
  CompressorId id() const override { return id_; }
  CompressorTraits traits() const override { return traits_; }

 protected:
  static void CheckSize(size_t size, const TensorInfo& tensor) {
    FRUGAL_CHECK_EQ(size, tensor.numel, "buffer size vs. numel of tensor '", tensor.name, "'");
  }
  // kInvalidArgument for tensors too large for 32-bit indices.
  Status CheckIndexable(const TensorInfo& tensor) const;

 private:
  std::string name_;
  CompressorId id_;
  CompressorTraits traits_;
  std::string params_;
};

// How many entries to keep: a fixed count k, or a ratio of the tensor's numel.
struct KeepCount {
  double ratio = 0.01;
  int64_t k = 0;  // > 0: fixed count (clipped to numel), and ratio is unused

  size_t For(size_t numel) const;
  // "k=1000" or "ratio=0.01".
  std::string Canonical() const;
  std::string Key() const { return k > 0 ? "k" : "ratio"; }
};

// Reads "ratio" (in (0, 1]) or "k" (>= 1); both at once is kInvalidArgument.
StatusOr<KeepCount> ParseKeepCount(CompressorParams& params, double default_ratio);

// Formats a double as it is written in canonical specs (shortest round-trip form).
std::string FormatParam(double v);

// The parts of a sparse body, in wire order: `scalars` float32 values (means, scales), the index
// section (sparse_coding.h), then optionally one float32 value per index, then optionally one
// sign bit per index.
struct SparseBody {
  std::vector<float> scalars;
  SparseVector entries;           // indices, and values when the body carries them
  std::vector<uint8_t> negative;  // signs, when the body carries them
};
struct SparseLayout {
  size_t scalars = 0;
  bool values = false;
  bool signs = false;
};

// Replaces `out` by header + body for (scalars, entries) in `layout` (signs from entries.values).
void WriteSparsePayload(const Compressor& compressor, const TensorInfo& tensor,
                        std::span<const float> scalars, const SparseVector& entries,
                        const SparseLayout& layout, std::vector<std::byte>& out);

// Opens and validates a payload written by WriteSparsePayload: header, at most max_count indices
// below numel, exact length, zero padding. kMalformed otherwise.
Status ReadSparsePayload(std::span<const std::byte> payload, const Compressor& compressor,
                         const TensorInfo& tensor, const SparseLayout& layout, size_t max_count,
                         SparseBody* out);

// Scratch of a context for selections and decoding, shared by every tensor the context handles
// (a context belongs to one thread).
struct SparseScratch : TensorState {
  TopKSelector selector;
  SparseVector picked;
  SparseBody body;
  std::vector<float> floats;
};
SparseScratch& Scratch(CompressContext& ctx);

enum class SelectMethod { kExact, kSampled };
std::string_view SelectMethodName(SelectMethod method);
// Reads "select" (exact|sampled).
StatusOr<SelectMethod> ParseSelectMethod(CompressorParams& params, SelectMethod fallback);

// The top-k (exact) or DGC's sampled top-k of x, into `out`; the sample is drawn from the
// stream of `rng_key`.
void SelectTopK(std::span<const float> x, size_t k, SelectMethod method, double sample_ratio,
                const RngKey& rng_key, TopKSelector& selector, SparseVector* out);

// The parameters of the compressors that keep a top-k (topk, stc, gtopk): "ratio=R | k=N",
// "select=exact|sampled", "sample=S".
struct TopKParams {
  KeepCount count;
  SelectMethod method = SelectMethod::kExact;
  double sample = 0.01;
  // "k=N,sample=S,select=M" (KeepCount::Canonical first).
  std::string Canonical() const;
};
StatusOr<TopKParams> ParseTopKParams(CompressorParams& params);

// The compressors that decode by adding at the indices they carry implement DecodeScaled, and
// Decode is DecodeScaled with scale 1 (1 * v == v: the same bits); their traits say
// sparse_decode.
template <typename Base>
class ScaledSparseDecoder : public Base {
 public:
  using Base::Base;
  CompressorTraits traits() const override {
    CompressorTraits traits = Base::traits();
    traits.sparse_decode = true;
    return traits;
  }
  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const final {
    return this->DecodeScaled(payload, tensor, ctx, 1.0f, output);
  }
  Status DecodeScaled(std::span<const std::byte> payload, const TensorInfo& tensor,
                      CompressContext& ctx, float scale,
                      std::span<float> output) const override = 0;
};

// Base of the compressors that keep the top-k entries of their input (topk, stc, gtopk).
class TopKSelectingCompressor : public SparseCompressorBase {
 public:
  // The spec's parameters are `params_prefix` followed by p.Canonical().
  TopKSelectingCompressor(std::string_view name, CompressorId id, CompressorTraits traits,
                          std::string_view params_prefix, const TopKParams& p);
  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override { return std::nullopt; }

 protected:
  // Checks the input, then selects its top-k into Scratch(ctx).picked and returns it.
  StatusOr<const SparseVector*> SelectInput(std::span<const float> input, const TensorInfo& tensor,
                                            CompressContext& ctx) const;
  // Selects the top-k of x into *out (the residual-aware paths select from other buffers).
  void Select(std::span<const float> x, const TensorInfo& tensor, CompressContext& ctx,
              SparseVector* out) const;
  size_t KeepFor(size_t numel) const { return p_.count.For(numel); }

 private:
  TopKParams p_;
};

// topk's payload: the index section, then one float32 value per index. Shared by topk and by
// gtopk's generic (all-gather) paths.
class TopKValuesCompressor : public ScaledSparseDecoder<TopKSelectingCompressor> {
 public:
  using ScaledSparseDecoder::ScaledSparseDecoder;
  // The index section in the fixed-width code and k values.
  std::optional<uint64_t> MaxBodyBits(const TensorInfo& tensor) const override;
  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override;
  Status DecodeScaled(std::span<const std::byte> payload, const TensorInfo& tensor,
                      CompressContext& ctx, float scale, std::span<float> output) const override;

 private:
  static constexpr SparseLayout kLayout{.scalars = 0, .values = true, .signs = false};
};

}  // namespace frugal::sparse
