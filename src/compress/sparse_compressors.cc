// The sparsifiers that need no state of their own: randomk, topk, threshold, adaptive, sbc, stc.
//
// randomk (Stich et al. 2018; shared seed as in Wangni et al.): k = ratio * n indices drawn
//   uniformly without replacement by Floyd's algorithm from the shared stream of (seed, step,
//   tensor), so every rank draws the same indices and only the values travel.
//   Body: k float32 values, in increasing index order. Summable: the sum of the bodies of several
//   ranks is the body of the sum of their inputs. Decode adds value (times n/k with scale=1,
//   which makes it unbiased) at each index.
// topk (Aji and Heafield 2017; Alistarh et al. 2018): the k entries of largest magnitude, by
//   exact selection or DGC's sampled threshold (select=sampled; sample= is the sampled fraction).
//   Body: index section, then k float32 values.
// threshold (Strom 2015): every entry with |x| >= tau. With quantize=1 (Strom's scheme) an entry
//   is sent as its sign and decodes to +-tau; with quantize=0 its value is sent.
//   Body: index section, then sign bits or float32 values.
// adaptive (Dryden et al. 2016): a fixed fraction `ratio` of the positive entries and of the
//   negative entries, each side by its own threshold (the largest positives, the most negative
//   negatives); the kept positives decode to their mean mu+ and the kept negatives to their mean
//   mu-. Body: mu+, mu- (float32), index section, sign bits.
// sbc (Sattler et al. 2019, sparse binary compression): the k largest positive entries and the
//   k most negative ones are found; with mu+ and mu- the means of their magnitudes, only the side
//   with the larger mean is sent, every kept entry decoding to +mu+ (or -mu-).
//   Body: the signed value (float32), index section.
// stc (Sattler et al. 2019, sparse ternary compression): the top-k by magnitude, each sent as its
//   sign; all decode to +-mu with mu the mean magnitude of the kept entries.
//   Body: mu (float32), index section, sign bits.
// Every decoder checks the header, the index section (count within the compressor's bound,
// indices below n and increasing, zero padding), that scalars are finite and of the right sign,
// and the exact body length before it adds anything to the output.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compress/sparse_coding.h"
#include "compress/sparse_common.h"
#include "compress/sparse_register_internal.h"

namespace frugal::sparse {
namespace {

// ----- randomk -----

struct RandomKIndices : TensorState {
  bool valid = false;
  uint64_t step = 0;
  size_t k = 0;
  std::vector<uint32_t> indices;
  std::vector<uint64_t> bitmap;
};

class RandomKCompressor final : public ScaledSparseDecoder<SparseCompressorBase> {
 public:
  RandomKCompressor(KeepCount count, bool scale)
      : ScaledSparseDecoder("randomk", CompressorId::kRandomK,
                            CompressorTraits{.unbiased = scale,
                                             .summable = true,
                                             .needs_error_feedback = !scale,
                                             .shared_seed = true,
                                             .ends_with_floats = true},
                            fmt::format("{},scale={}", count.Canonical(), scale ? 1 : 0)),
        count_(count),
        scale_(scale) {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return uint64_t{32} * count_.For(tensor.numel);
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckSize(input.size(), tensor);
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    const std::vector<uint32_t>& indices = Indices(tensor, ctx);
    std::span<std::byte> body = BeginPayload(*this, tensor, 4 * indices.size(), out);
    for (size_t i = 0; i < indices.size(); ++i) {
      std::memcpy(body.data() + 4 * i, &input[indices[i]], 4);
    }
    return Status::Ok();
  }

  Status DecodeScaled(std::span<const std::byte> payload, const TensorInfo& tensor,
                      CompressContext& ctx, float scale, std::span<float> output) const override {
    CheckSize(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    const size_t k = count_.For(tensor.numel);
    if (body.size() != 4 * k) {
      return MalformedError(
          fmt::format("randomk payload: body of {} bytes for k = {}", body.size(), k));
    }
    const std::vector<uint32_t>& indices = Indices(tensor, ctx);
    const float factor =
        scale_ && k > 0 ? static_cast<float>(static_cast<double>(tensor.numel) / k) : 1.0f;
    for (size_t i = 0; i < k; ++i) {
      float v;
      std::memcpy(&v, body.data() + 4 * i, 4);
      output[indices[i]] += scale * (factor * v);
    }
    return Status::Ok();
  }

  std::optional<uint64_t> TrailingFloats(std::span<const std::byte> payload,
                                         const TensorInfo& tensor) const override {
    return count_.For(tensor.numel);
  }

 private:
  // The shared indices of this step, drawn once per (tensor, step) and kept in the context.
  const std::vector<uint32_t>& Indices(const TensorInfo& tensor, CompressContext& ctx) const {
    auto& state = ctx.State<RandomKIndices>(tensor, "randomk");
    const size_t n = tensor.numel;
    const size_t k = count_.For(n);
    if (state.valid && state.step == ctx.step() && state.k == k) return state.indices;
    // Floyd's algorithm: for j = n-k .. n-1 draw t in [0, j]; take t, or j if t is taken. Every
    // k-subset is equally likely.
    state.bitmap.assign((n + 63) / 64, 0);
    RngStream rng(ctx.Key(tensor, /*shared=*/true));
    for (size_t j = n - k; j < n; ++j) {
      size_t t = rng.Below(j + 1);
      size_t pick = (state.bitmap[t / 64] >> (t % 64)) & 1 ? j : t;
      state.bitmap[pick / 64] |= uint64_t{1} << (pick % 64);
    }
    state.indices.clear();
    state.indices.reserve(k);
    for (size_t w = 0; w < state.bitmap.size(); ++w) {
      uint64_t bits = state.bitmap[w];
      while (bits != 0) {
        state.indices.push_back(static_cast<uint32_t>(w * 64 + std::countr_zero(bits)));
        bits &= bits - 1;
      }
    }
    FRUGAL_INTERNAL_ASSERT(state.indices.size() == k, "randomk drew ", state.indices.size(), " of ",
                           k);
    state.valid = true;
    state.step = ctx.step();
    state.k = k;
    return state.indices;
  }

  KeepCount count_;
  bool scale_;
};

// ----- topk -----

// topk's payload and selection are TopKValuesCompressor's (sparse_common.h). Its body ends with
// the kept values, as many as the count in the index section's header.
class TopKCompressor final : public TopKValuesCompressor {
 public:
  explicit TopKCompressor(const TopKParams& p)
      : TopKValuesCompressor(
            "topk", CompressorId::kTopK,
            CompressorTraits{
                .needs_error_feedback = true, .variable_size = true, .ends_with_floats = true},
            "", p) {}

  std::optional<uint64_t> TrailingFloats(std::span<const std::byte> payload,
                                         const TensorInfo& tensor) const override {
    if (payload.size() < kWireHeaderBytes + kIndexSectionHeaderBytes) return std::nullopt;
    uint32_t count;
    std::memcpy(&count, payload.data() + kWireHeaderBytes + 2, 4);
    return count;
  }
};

// ----- threshold -----

class ThresholdCompressor final : public ScaledSparseDecoder<SparseCompressorBase> {
 public:
  ThresholdCompressor(double tau, bool quantize)
      : ScaledSparseDecoder(
            "threshold", CompressorId::kThreshold,
            CompressorTraits{.needs_error_feedback = true, .variable_size = true},
            fmt::format("ef=0,quantize={},tau={}", quantize ? 1 : 0, FormatParam(tau))),
        tau_(static_cast<float>(tau)),
        quantize_(quantize) {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override { return std::nullopt; }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckSize(input.size(), tensor);
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    SparseScratch& s = Scratch(ctx);
    s.selector.SelectAtLeast(input, tau_, &s.picked);
    WriteSparsePayload(*this, tensor, {}, s.picked, Layout(), out);
    return Status::Ok();
  }

  Status DecodeScaled(std::span<const std::byte> payload, const TensorInfo& tensor,
                      CompressContext& ctx, float scale, std::span<float> output) const override {
    CheckSize(output.size(), tensor);
    SparseBody& body = Scratch(ctx).body;
    FRUGAL_RETURN_IF_ERROR(
        ReadSparsePayload(payload, *this, tensor, Layout(), tensor.numel, &body));
    const SparseVector& e = body.entries;
    if (quantize_) {
      for (size_t i = 0; i < e.size(); ++i)
        output[e.indices[i]] += scale * (body.negative[i] ? -tau_ : tau_);
    } else {
      for (size_t i = 0; i < e.size(); ++i) output[e.indices[i]] += scale * e.values[i];
    }
    return Status::Ok();
  }

 private:
  SparseLayout Layout() const {
    return SparseLayout{.scalars = 0, .values = !quantize_, .signs = quantize_};
  }
  float tau_;
  bool quantize_;
};

// ----- adaptive, sbc: selection per sign -----

// The min(k, number of entries > 0) largest positive entries of x (sign = +1), or the most
// negative ones (sign = -1), into `out`. `masked` is scratch.
void SelectOneSign(std::span<const float> x, size_t k, int sign, std::vector<float>& masked,
                   TopKSelector& selector, SparseVector* out) {
  masked.resize(x.size());
  size_t available = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    bool keep = sign > 0 ? x[i] > 0.0f : x[i] < 0.0f;
    masked[i] = keep ? x[i] : 0.0f;
    available += keep;
  }
  selector.SelectExact(masked, std::min(k, available), out);
}

double MeanMagnitude(const SparseVector& v) {
  if (v.size() == 0) return 0.0;
  double sum = 0;
  for (float x : v.values) sum += std::fabs(static_cast<double>(x));
  return sum / static_cast<double>(v.size());
}

// Merges two sparse vectors with disjoint increasing indices.
void MergeDisjoint(const SparseVector& a, const SparseVector& b, SparseVector* out) {
  out->indices.resize(a.size() + b.size());
  out->values.resize(a.size() + b.size());
  size_t i = 0, j = 0, m = 0;
  while (i < a.size() || j < b.size()) {
    bool take_a = j == b.size() || (i < a.size() && a.indices[i] < b.indices[j]);
    const SparseVector& from = take_a ? a : b;
    size_t& at = take_a ? i : j;
    out->indices[m] = from.indices[at];
    out->values[m++] = from.values[at++];
  }
}

Status CheckScalar(std::string_view name, std::string_view what, float v, int sign) {
  if (!std::isfinite(v) || (sign > 0 && v < 0) || (sign < 0 && v > 0)) {
    return MalformedError(fmt::format("{} payload: {} = {} is not a finite {} value", name, what, v,
                                      sign > 0 ? "non-negative" : "non-positive"));
  }
  return Status::Ok();
}

class AdaptiveCompressor final : public ScaledSparseDecoder<SparseCompressorBase> {
 public:
  explicit AdaptiveCompressor(double ratio)
      : ScaledSparseDecoder("adaptive", CompressorId::kAdaptiveThreshold,
                            CompressorTraits{.needs_error_feedback = true, .variable_size = true},
                            fmt::format("ef=0,ratio={}", FormatParam(ratio))),
        ratio_(ratio) {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override { return std::nullopt; }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckSize(input.size(), tensor);
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    SparseScratch& s = Scratch(ctx);
    size_t positives = 0, negatives = 0;
    for (float v : input) {
      positives += v > 0.0f;
      negatives += v < 0.0f;
    }
    SparseVector pos, neg;
    SelectOneSign(input, positives == 0 ? 0 : KFromRatio(ratio_, positives), +1, s.floats,
                  s.selector, &pos);
    SelectOneSign(input, negatives == 0 ? 0 : KFromRatio(ratio_, negatives), -1, s.floats,
                  s.selector, &neg);
    MergeDisjoint(pos, neg, &s.picked);
    const float scalars[2] = {static_cast<float>(MeanMagnitude(pos)),
                              -static_cast<float>(MeanMagnitude(neg))};
    WriteSparsePayload(*this, tensor, scalars, s.picked, kLayout, out);
    return Status::Ok();
  }

  Status DecodeScaled(std::span<const std::byte> payload, const TensorInfo& tensor,
                      CompressContext& ctx, float scale, std::span<float> output) const override {
    CheckSize(output.size(), tensor);
    SparseBody& body = Scratch(ctx).body;
    FRUGAL_RETURN_IF_ERROR(ReadSparsePayload(payload, *this, tensor, kLayout, tensor.numel, &body));
    const float mu_pos = body.scalars[0], mu_neg = body.scalars[1];
    FRUGAL_RETURN_IF_ERROR(CheckScalar("adaptive", "mu+", mu_pos, +1));
    FRUGAL_RETURN_IF_ERROR(CheckScalar("adaptive", "mu-", mu_neg, -1));
    const SparseVector& e = body.entries;
    for (size_t i = 0; i < e.size(); ++i) {
      output[e.indices[i]] += scale * (body.negative[i] ? mu_neg : mu_pos);
    }
    return Status::Ok();
  }

 private:
  static constexpr SparseLayout kLayout{.scalars = 2, .values = false, .signs = true};
  double ratio_;
};

class SbcCompressor final : public ScaledSparseDecoder<SparseCompressorBase> {
 public:
  explicit SbcCompressor(KeepCount count)
      : ScaledSparseDecoder("sbc", CompressorId::kSbc,
                            CompressorTraits{.needs_error_feedback = true, .variable_size = true},
                            "ef=0," + count.Canonical()),
        count_(count) {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override { return std::nullopt; }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckSize(input.size(), tensor);
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    SparseScratch& s = Scratch(ctx);
    const size_t k = count_.For(tensor.numel);
    SparseVector pos, neg;
    SelectOneSign(input, k, +1, s.floats, s.selector, &pos);
    SelectOneSign(input, k, -1, s.floats, s.selector, &neg);
    double mu_pos = MeanMagnitude(pos), mu_neg = MeanMagnitude(neg);
    bool positive = mu_pos >= mu_neg;
    const float value[1] = {positive ? static_cast<float>(mu_pos) : -static_cast<float>(mu_neg)};
    WriteSparsePayload(*this, tensor, value, positive ? pos : neg, kLayout, out);
    return Status::Ok();
  }

  Status DecodeScaled(std::span<const std::byte> payload, const TensorInfo& tensor,
                      CompressContext& ctx, float scale, std::span<float> output) const override {
    CheckSize(output.size(), tensor);
    SparseBody& body = Scratch(ctx).body;
    FRUGAL_RETURN_IF_ERROR(
        ReadSparsePayload(payload, *this, tensor, kLayout, count_.For(tensor.numel), &body));
    const float value = body.scalars[0];
    FRUGAL_RETURN_IF_ERROR(CheckScalar("sbc", "value", value, 0));
    for (uint32_t index : body.entries.indices) output[index] += scale * value;
    return Status::Ok();
  }

 private:
  static constexpr SparseLayout kLayout{.scalars = 1, .values = false, .signs = false};
  KeepCount count_;
};

class StcCompressor final : public ScaledSparseDecoder<TopKSelectingCompressor> {
 public:
  explicit StcCompressor(const TopKParams& p)
      : ScaledSparseDecoder("stc", CompressorId::kStc,
                            CompressorTraits{.needs_error_feedback = true, .variable_size = true},
                            "ef=0,", p) {}

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    FRUGAL_ASSIGN_OR_RETURN(const SparseVector* picked, SelectInput(input, tensor, ctx));
    const float mu[1] = {static_cast<float>(MeanMagnitude(*picked))};
    WriteSparsePayload(*this, tensor, mu, *picked, kLayout, out);
    return Status::Ok();
  }

  Status DecodeScaled(std::span<const std::byte> payload, const TensorInfo& tensor,
                      CompressContext& ctx, float scale, std::span<float> output) const override {
    CheckSize(output.size(), tensor);
    SparseBody& body = Scratch(ctx).body;
    FRUGAL_RETURN_IF_ERROR(
        ReadSparsePayload(payload, *this, tensor, kLayout, KeepFor(tensor.numel), &body));
    const float mu = body.scalars[0];
    FRUGAL_RETURN_IF_ERROR(CheckScalar("stc", "mu", mu, +1));
    const SparseVector& e = body.entries;
    for (size_t i = 0; i < e.size(); ++i)
      output[e.indices[i]] += scale * (body.negative[i] ? -mu : mu);
    return Status::Ok();
  }

 private:
  static constexpr SparseLayout kLayout{.scalars = 1, .values = false, .signs = true};
};

using Made = StatusOr<std::unique_ptr<Compressor>>;

}  // namespace

void RegisterBasicSparsifiers(CompressorRegistry& registry) {
  auto must = [&](CompressorEntry entry) {
    Status s = registry.Register(std::move(entry));
    FRUGAL_INTERNAL_ASSERT(s.ok(), s.ToString());
  };
  must({.name = "randomk",
        .summary = "random-k: k random entries from a seed shared by all ranks; only values travel",
        .params = "ratio=0.01 | k=N, scale=0 (1: multiply by n/k, unbiased)",
        .factory = [](CompressorParams& p) -> Made {
          FRUGAL_ASSIGN_OR_RETURN(KeepCount count, ParseKeepCount(p, 0.01));
          FRUGAL_ASSIGN_OR_RETURN(bool scale, p.Bool("scale", false));
          return std::unique_ptr<Compressor>(std::make_unique<RandomKCompressor>(count, scale));
        }});
  must({.name = "topk",
        .summary = "top-k by magnitude, exact or by DGC's sampled threshold; compact indices",
        .params = "ratio=0.01 | k=N, select=exact|sampled, sample=0.01",
        .factory = [](CompressorParams& p) -> Made {
          FRUGAL_ASSIGN_OR_RETURN(TopKParams topk, ParseTopKParams(p));
          return std::unique_ptr<Compressor>(std::make_unique<TopKCompressor>(topk));
        }});
  must({.name = "threshold",
        .summary = "Strom's threshold: entries with |x| >= tau, sent as +-tau (quantize=1)",
        .params = "tau=0.001, quantize=1; error feedback on unless ef=0",
        .factory = [](CompressorParams& p) -> Made {
          FRUGAL_ASSIGN_OR_RETURN(double tau, p.Double("tau", 0.001, 0.0, 1e30));
          FRUGAL_ASSIGN_OR_RETURN(bool quantize, p.Bool("quantize", true));
          if (quantize && !(tau > 0)) {
            return InvalidArgumentError("threshold: quantize=1 needs tau > 0");
          }
          return std::unique_ptr<Compressor>(std::make_unique<ThresholdCompressor>(tau, quantize));
        },
        .error_feedback_by_default = true});
  must({.name = "adaptive",
        .summary = "Dryden's adaptive threshold: a fraction of the positives and of the "
                   "negatives, each side sent as its mean",
        .params = "ratio=0.01; error feedback on unless ef=0",
        .factory = [](CompressorParams& p) -> Made {
          FRUGAL_ASSIGN_OR_RETURN(double ratio, p.Double("ratio", 0.01, 1e-9, 1.0));
          return std::unique_ptr<Compressor>(std::make_unique<AdaptiveCompressor>(ratio));
        },
        .error_feedback_by_default = true});
  must({.name = "sbc",
        .summary = "sparse binary compression: top-k of the stronger sign, sent as one mean",
        .params = "ratio=0.01 | k=N; error feedback on unless ef=0",
        .factory = [](CompressorParams& p) -> Made {
          FRUGAL_ASSIGN_OR_RETURN(KeepCount count, ParseKeepCount(p, 0.01));
          return std::unique_ptr<Compressor>(std::make_unique<SbcCompressor>(count));
        },
        .error_feedback_by_default = true});
  must({.name = "stc",
        .summary = "sparse ternary compression: top-k sent as signs times their mean magnitude",
        .params = "ratio=0.01 | k=N, select=exact|sampled, sample=0.01; error feedback on unless "
                  "ef=0",
        .factory = [](CompressorParams& p) -> Made {
          FRUGAL_ASSIGN_OR_RETURN(TopKParams topk, ParseTopKParams(p));
          return std::unique_ptr<Compressor>(std::make_unique<StcCompressor>(topk));
        },
        .error_feedback_by_default = true});
}

}  // namespace frugal::sparse
