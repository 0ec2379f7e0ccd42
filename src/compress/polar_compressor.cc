// polar: lossy source coding of gradients with polar codes (Korada and Urbanke 2010).
//
// The tensor is cut into blocks of N = 2^n elements; a last block of t < N elements is coded in a
// block of 2^ceil(log2 t) positions whose padding positions have LLR 0. A block of t real
// positions has K = round(rate * t) information positions (the K most reliable of its size,
// polar_construct.h). Compression is SC decoding of the source (polar_sc.h; polar_list.h for
// list= and rounding=random): LLR_i = p_i (mode=soft) or +-1 by the sign of p_i (mode=sign);
// the result is the codeword x = u F^{(x)m} with u zero on the frozen positions. The block
// decodes to alpha (1 - 2 x_i) with alpha = max(0, sum_i p_i (1 - 2 x_i) / t) over its real
// positions, the least-squares scale of the signs s = 1 - 2x.
//
// Body, block after block: alpha (float32), then the K information bits of u in increasing
// position order, LSB-first, padded with zero bits to a byte. Bits per element: rate + 32/N plus
// at most 7/N of padding. The header's check word is a CRC-32 of the fingerprints of the
// information sets the tensor's blocks use (polar_construct.h), so that a payload made with
// another construction is refused. The decoder checks the body length, every alpha (finite,
// >= 0) and every padding bit before it adds anything: u from the bits, x = u F^{(x)m}
// (polar_transform.h), output += alpha (1 - 2x).
//
// Error feedback is on by default ("polar:ef=0" turns it off); EncodeWithResidual computes the
// residual p - alpha s from the codeword the encoder already holds.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "compress/polar_construct.h"
#include "compress/polar_list.h"
#include "compress/polar_sc.h"
#include "compress/polar_transform.h"
#include "compress/polar_vector.h"
#include "compress/quant_util.h"
#include "compress/register.h"
#include "frugal/crc.h"

namespace frugal {
namespace polar {
namespace {

using compress_internal::LoadF32;
using compress_internal::QuantizerBase;
using compress_internal::StoreF32;

struct PolarOptions {
  double rate = 0.75;
  int n = 14;
  LlrMode mode = LlrMode::kSoft;
  int list = 1;
  Construction construct = Construction::kPw;
  bool randomized = false;
};

std::string CanonicalParams(const PolarOptions& o) {
  return fmt::format("construct={},ef=0,list={},mode={},n={},rate={},rounding={}",
                     ConstructionName(o.construct), o.list,
                     o.mode == LlrMode::kSoft ? "soft" : "sign", o.n, o.rate,
                     o.randomized ? "random" : "hard");
}

// The blocks of a tensor: `full` blocks of 2^n elements, then a tail of `tail` elements (0: none).
struct Layout {
  size_t full = 0;
  size_t tail = 0;
  int tail_m = 0;
};

// The random draws of rounding=random per block, and the scale that turns min-sum LLRs into the
// test channel's BSC(D) LLRs (+-ln((1 - D) / D), D = h^-1(1 - rate)).
double TestChannelLlr(double rate) {
  const double d = DesignDistortion(rate);
  return std::log((1.0 - d) / d);
}

class PolarCompressor final : public QuantizerBase {
 public:
  explicit PolarCompressor(const PolarOptions& o)
      : QuantizerBase("polar", CompressorId::kPolar,
                      CompressorTraits{.requantizable = true, .needs_error_feedback = true},
                      CanonicalParams(o)),
        o_(o),
        block_k_(KFor(size_t{1} << o.n)),
        test_llr_(TestChannelLlr(o.rate)) {
    for (int m = 0; m <= o.n; ++m) orders_.push_back(ReliabilityOrder(m, o.construct, o.rate));
    block_set_ = MakeInfoSet(orders_[o.n], o.n, block_k_);
    block_plan_ = std::make_unique<ScPlan>(block_set_);
  }

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return 8 * BodyBytes(LayoutOf(tensor.numel));
  }

  uint32_t WireCheck(const TensorInfo& tensor) const override {
    const Layout layout = LayoutOf(tensor.numel);
    const uint32_t parts[2] = {layout.full > 0 ? block_set_.fingerprint : 0u,
                               layout.tail > 0 ? TailSet(layout).fingerprint : 0u};
    return Crc32(std::as_bytes(std::span<const uint32_t>(parts)));
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    return EncodeImpl(input.data(), nullptr, tensor, ctx, out);
  }

  std::optional<Status> EncodeWithResidual(std::span<const float> input, std::span<float> residual,
                                           const TensorInfo& tensor, CompressContext& ctx,
                                           std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    CheckInput(residual.size(), tensor);
    return EncodeImpl(input.data(), residual.data(), tensor, ctx, out);
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    CheckInput(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    const Layout layout = LayoutOf(tensor.numel);
    if (body.size() != BodyBytes(layout)) {
      return MalformedError(fmt::format("polar payload: body of {} bytes, expected {}", body.size(),
                                        BodyBytes(layout)));
    }
    const InfoSet tail_set = layout.tail > 0 ? TailSet(layout) : InfoSet{};
    const size_t blocks = layout.full + (layout.tail > 0 ? 1 : 0);
    auto set_of = [&](size_t b) -> const InfoSet& {
      return b < layout.full ? block_set_ : tail_set;
    };
    // Validate everything before writing anything.
    size_t at = 0;
    for (size_t b = 0; b < blocks; ++b) {
      const float alpha = LoadF32(body.data() + at);
      if (!std::isfinite(alpha) || !(alpha >= 0.0f)) {
        return MalformedError(fmt::format("polar payload: block {} has scale {}", b, alpha));
      }
      const InfoSet& set = set_of(b);
      if (!PaddingIsZero(body.data() + at + 4, set.k)) {
        return MalformedError(fmt::format("polar payload: block {} has padding bits set", b));
      }
      at += 4 + InfoBytes(set.k);
    }
    std::vector<uint64_t> words;
    at = 0;
    for (size_t b = 0; b < blocks; ++b) {
      const InfoSet& set = set_of(b);
      const float alpha = LoadF32(body.data() + at);
      words.assign(set.mask.size(), 0);
      ScatterInfoBits(kernels(), body.data() + at + 4, set, words);
      Transform(words, set.m);
      const size_t count = b < layout.full ? size_t{1} << o_.n : layout.tail;
      compress_internal::AddSigns(kernels(), reinterpret_cast<const std::byte*>(words.data()),
                                  count, alpha, -alpha, output.data() + (b << o_.n));
      at += 4 + InfoBytes(set.k);
    }
    return Status::Ok();
  }

 private:
  uint32_t KFor(size_t count) const {
    return static_cast<uint32_t>(std::llround(o_.rate * static_cast<double>(count)));
  }

  Layout LayoutOf(size_t numel) const {
    Layout layout;
    layout.full = numel >> o_.n;
    layout.tail = numel - (layout.full << o_.n);
    if (layout.tail > 0) layout.tail_m = std::bit_width(layout.tail - 1);
    return layout;
  }

  size_t BodyBytes(const Layout& layout) const {
    size_t bytes = layout.full * (4 + InfoBytes(block_k_));
    if (layout.tail > 0) bytes += 4 + InfoBytes(KFor(layout.tail));
    return bytes;
  }

  InfoSet TailSet(const Layout& layout) const {
    return MakeInfoSet(orders_[layout.tail_m], layout.tail_m, KFor(layout.tail));
  }

  // SC (or list / randomized) codewords of the blocks, into x (words per block as the sets').
  bool Codewords(std::span<const ScBlock> blocks, const InfoSet& set, const ScPlan& plan,
                 RngStream& rng, std::span<uint64_t> x) const {
    if (o_.list == 1 && !o_.randomized) return ScEncode(kernels(), plan, o_.mode, blocks, x);
    const size_t words = set.mask.size();
    std::vector<float> llr(set.size());
    for (size_t b = 0; b < blocks.size(); ++b) {
      if (!LoadBlockLlrs(blocks[b], set.size(), o_.mode, llr.data())) return false;
      ListOptions options{.list = o_.list, .randomized = o_.randomized, .rng = &rng};
      if (o_.randomized) {
        double mean = 0;
        for (size_t i = 0; i < blocks[b].count; ++i) mean += std::fabs(static_cast<double>(llr[i]));
        mean /= static_cast<double>(std::max<size_t>(1, blocks[b].count));
        options.llr_scale = mean > 0 ? test_llr_ / mean : 0.0;
      }
      ListEncode(llr, set, options, x.subspan(b * words, words));
    }
    return true;
  }

  Status EncodeImpl(const float* g, float* e, const TensorInfo& tensor, CompressContext& ctx,
                    std::vector<std::byte>& out) const {
    const Layout layout = LayoutOf(tensor.numel);
    const size_t block = size_t{1} << o_.n;
    const size_t words = block_set_.mask.size();
    const InfoSet tail_set = layout.tail > 0 ? TailSet(layout) : InfoSet{};
    const size_t tail_words = layout.tail > 0 ? tail_set.mask.size() : 0;
    std::vector<uint64_t> x(layout.full * words + tail_words);
    std::vector<ScBlock> blocks(layout.full);
    for (size_t b = 0; b < layout.full; ++b) {
      blocks[b] = {g + b * block, e != nullptr ? e + b * block : nullptr, block};
    }
    RngStream rng(ctx.Key(tensor));
    bool finite = Codewords(blocks, block_set_, *block_plan_, rng, x);
    if (finite && layout.tail > 0) {
      const size_t offset = layout.full * block;
      const ScBlock tail{g + offset, e != nullptr ? e + offset : nullptr, layout.tail};
      finite = Codewords(std::span<const ScBlock>(&tail, 1), tail_set, ScPlan(tail_set), rng,
                         std::span<uint64_t>(x).subspan(layout.full * words));
    }
    if (!finite) {
      return InvalidArgumentError(
          fmt::format("polar: tensor '{}' has non-finite values", tensor.name));
    }
    std::span<std::byte> body = BeginPayload(*this, tensor, BodyBytes(layout), out);
    const size_t blocks_total = layout.full + (layout.tail > 0 ? 1 : 0);
    std::vector<float> alphas(blocks_total);
    std::vector<uint64_t> u;
    size_t at = 0;
    for (size_t b = 0; b < blocks_total; ++b) {
      const bool full = b < layout.full;
      const InfoSet& set = full ? block_set_ : tail_set;
      const size_t count = full ? block : layout.tail;
      const uint64_t* xb = x.data() + b * words;
      const auto* bits = reinterpret_cast<const std::byte*>(xb);
      const size_t offset = b * block;
      const double sum =
          SignedSum(kernels(), g + offset, e != nullptr ? e + offset : nullptr, bits, count);
      const double mean = sum / static_cast<double>(count);
      alphas[b] = mean > 0.0 ? static_cast<float>(mean) : 0.0f;
      StoreF32(body.data() + at, alphas[b]);
      u.assign(xb, xb + set.mask.size());
      Transform(u, set.m);
      const bool gathered = GatherInfoBits(kernels(), u, set, body.data() + at + 4);
      FRUGAL_INTERNAL_ASSERT(gathered, "polar: SC left a frozen position of block ", b,
                             " of tensor '", tensor.name, "' nonzero");
      at += 4 + InfoBytes(set.k);
    }
    if (e != nullptr) {
      for (size_t b = 0; b < blocks_total; ++b) {
        const size_t count = b < layout.full ? block : layout.tail;
        SubtractCodeword(kernels(), g + b * block, e + b * block,
                         reinterpret_cast<const std::byte*>(x.data() + b * words), count,
                         alphas[b]);
      }
    }
    return Status::Ok();
  }

  PolarOptions o_;
  uint32_t block_k_;
  double test_llr_;
  std::vector<std::vector<uint32_t>> orders_;  // ReliabilityOrder for m = 0 .. n
  InfoSet block_set_;
  std::unique_ptr<ScPlan> block_plan_;
};

// The value of a choice parameter as its index in `accepted`.
StatusOr<size_t> ChoiceIndex(CompressorParams& p, std::string_view key,
                             const std::vector<std::string>& accepted) {
  StatusOr<std::string> value = p.Choice(key, accepted[0], accepted);
  if (!value.ok()) return value.status();
  return static_cast<size_t>(std::find(accepted.begin(), accepted.end(), *value) -
                             accepted.begin());
}

StatusOr<std::unique_ptr<Compressor>> MakePolar(CompressorParams& p) {
  PolarOptions o;
  FRUGAL_ASSIGN_OR_RETURN(o.rate, p.Double("rate", 0.75, 0.0, 1.0));
  FRUGAL_ASSIGN_OR_RETURN(int64_t n, p.Int("n", 14, 4, 20));
  o.n = static_cast<int>(n);
  FRUGAL_ASSIGN_OR_RETURN(size_t mode, ChoiceIndex(p, "mode", {"soft", "sign"}));
  o.mode = mode == 0 ? LlrMode::kSoft : LlrMode::kSign;
  FRUGAL_ASSIGN_OR_RETURN(int64_t list, p.Int("list", 1, 1, 32));
  o.list = static_cast<int>(list);
  FRUGAL_ASSIGN_OR_RETURN(size_t construct, ChoiceIndex(p, "construct", {"pw", "bb", "ga"}));
  o.construct = static_cast<Construction>(construct);
  FRUGAL_ASSIGN_OR_RETURN(size_t rounding, ChoiceIndex(p, "rounding", {"hard", "random"}));
  o.randomized = rounding == 1;
  if (o.randomized && o.list > 1) {
    return InvalidArgumentError("polar: rounding=random takes one path (list=1)");
  }
  return std::unique_ptr<Compressor>(std::make_unique<PolarCompressor>(o));
}

}  // namespace
}  // namespace polar

void RegisterCoding(CompressorRegistry& registry) {
  compress_internal::MustRegister(
      registry,
      {.name = "polar",
       .summary = "polar-code lossy source coding: rate bits per element (+32/N), +-alpha per "
                  "block of N = 2^n, SC encoding; with error feedback (ef=0: without)",
       .params = "rate=0.75 n=14 mode=soft|sign list=1 construct=pw|bb|ga rounding=hard|random "
                 "ef=1",
       .factory = polar::MakePolar,
       .error_feedback_by_default = true});
}

}  // namespace frugal
