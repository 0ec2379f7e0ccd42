// dgc: Deep Gradient Compression (Lin et al. 2018).
//
// Per tensor the context keeps the momentum u and the accumulated velocity v (slot "dgc"). Each
// step, for the gradient g:
//   1. local gradient clipping: with clip > 0, g is scaled so that ||g||_2 <= clip / sqrt(N),
//      N the number of ranks (the global threshold shared among N summed gradients);
//   2. momentum correction: u = momentum * u + g; v = v + u — what accumulates locally is the
//      velocity, not the raw gradient, so delayed entries keep their momentum;
//   3. sparsification: the top-k of |v| by the sampled threshold (sample = fraction sampled,
//      refined to within 0.8-1.3x of k, exact top-k of the candidates when over — see
//      sparse_select.cc), k = density * n;
//   4. momentum factor masking: u and v are zeroed at the sent indices, so stale momentum does not
//      push those entries again.
// Warm-up: with epoch_steps > 0, epoch e = step / epoch_steps < warmup_epochs uses the density
// max(ratio, 0.25 / 4^e), the paper's exponential schedule 75%, 93.75%, 98.4375%, 99.6% sparsity
// before the target (99.9% for ratio=0.001).
// The payload is topk's (index section, then float32 values of v). Since u carries the momentum,
// the optimizer applying the aggregate must not add momentum again (plain SGD, as in the paper);
// momentum=0 turns the correction off for use under an optimizer with momentum. dgc keeps its
// own residual (v), so it refuses the generic error feedback (ef=1), which would count the unsent
// gradient twice.
#include "compress/sparse_dgc.h"

#include <fmt/format.h>

#include <cmath>

#include "compress/sparse_common.h"
#include "compress/sparse_register_internal.h"

namespace frugal::sparse {
namespace {

struct DgcParams {
  double ratio = 0.001;
  double momentum = 0.9;
  double clip = 0;
  double sample = 0.01;
  int64_t warmup_epochs = 4;
  int64_t epoch_steps = 0;
};

class DgcCompressor final : public ScaledSparseDecoder<SparseCompressorBase> {
 public:
  explicit DgcCompressor(const DgcParams& p)
      : ScaledSparseDecoder(
            "dgc", CompressorId::kDgc, CompressorTraits{.variable_size = true},
            fmt::format("clip={},epoch_steps={},momentum={},ratio={},sample={},warmup_epochs={}",
                        FormatParam(p.clip), p.epoch_steps, FormatParam(p.momentum),
                        FormatParam(p.ratio), FormatParam(p.sample), p.warmup_epochs)),
        p_(p) {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override { return std::nullopt; }

  // The density (kept fraction) at `step`.
  double Density(uint64_t step) const {
    if (p_.epoch_steps <= 0 || p_.warmup_epochs <= 0) return p_.ratio;
    uint64_t epoch = step / static_cast<uint64_t>(p_.epoch_steps);
    if (epoch >= static_cast<uint64_t>(p_.warmup_epochs)) return p_.ratio;
    return std::max(p_.ratio, 0.25 / std::pow(4.0, static_cast<double>(epoch)));
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckSize(input.size(), tensor);
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    const size_t n = input.size();
    auto& state = ctx.State<DgcState>(tensor, kDgcSlot);
    state.u.resize(n, 0.0f);
    state.v.resize(n, 0.0f);
    float scale = 1.0f;
    if (p_.clip > 0) {
      double norm2 = 0;
      for (float g : input) norm2 += static_cast<double>(g) * g;
      double limit = p_.clip / std::sqrt(static_cast<double>(ctx.world_size()));
      double norm = std::sqrt(norm2);
      if (norm > limit) scale = static_cast<float>(limit / norm);
    }
    const float m = static_cast<float>(p_.momentum);
    float* u = state.u.data();
    float* v = state.v.data();
    for (size_t i = 0; i < n; ++i) {
      u[i] = m * u[i] + scale * input[i];
      v[i] += u[i];
    }
    SparseScratch& s = Scratch(ctx);
    SelectTopK(state.v, KFromRatio(Density(ctx.step()), n), SelectMethod::kSampled, p_.sample,
               ctx.Key(tensor), s.selector, &s.picked);
    WriteSparsePayload(*this, tensor, {}, s.picked, kLayout, out);
    for (uint32_t index : s.picked.indices) {
      u[index] = 0.0f;
      v[index] = 0.0f;
    }
    return Status::Ok();
  }

  Status DecodeScaled(std::span<const std::byte> payload, const TensorInfo& tensor,
                      CompressContext& ctx, float scale, std::span<float> output) const override {
    CheckSize(output.size(), tensor);
    SparseBody& body = Scratch(ctx).body;
    FRUGAL_RETURN_IF_ERROR(
        ReadSparsePayload(payload, *this, tensor, kLayout, MaxCount(tensor.numel), &body));
    const SparseVector& e = body.entries;
    for (size_t i = 0; i < e.size(); ++i) output[e.indices[i]] += scale * e.values[i];
    return Status::Ok();
  }

 private:
  static constexpr SparseLayout kLayout{.scalars = 0, .values = true, .signs = false};

  // The largest count of any step: the first warm-up density, or the target.
  size_t MaxCount(size_t n) const {
    if (n == 0) return 0;
    return KFromRatio(std::max(Density(0), p_.ratio), n);
  }

  DgcParams p_;
};

}  // namespace

void RegisterDgc(CompressorRegistry& registry) {
  Status s = registry.Register(
      {.name = "dgc",
       .summary = "deep gradient compression: momentum correction and factor masking, local "
                  "clipping, sampled top-k, warm-up",
       .params = "ratio=0.001, momentum=0.9, clip=0 (off), sample=0.01, warmup_epochs=4, "
                 "epoch_steps=0 (no warm-up)",
       .factory = [](CompressorParams& p) -> StatusOr<std::unique_ptr<Compressor>> {
         DgcParams d;
         FRUGAL_ASSIGN_OR_RETURN(d.ratio, p.Double("ratio", 0.001, 1e-9, 1.0));
         FRUGAL_ASSIGN_OR_RETURN(d.momentum, p.Double("momentum", 0.9, 0.0, 0.999999));
         FRUGAL_ASSIGN_OR_RETURN(d.clip, p.Double("clip", 0.0, 0.0, 1e30));
         FRUGAL_ASSIGN_OR_RETURN(d.sample, p.Double("sample", 0.01, 1e-6, 1.0));
         FRUGAL_ASSIGN_OR_RETURN(d.warmup_epochs, p.Int("warmup_epochs", 4, 0, 1000));
         FRUGAL_ASSIGN_OR_RETURN(d.epoch_steps, p.Int("epoch_steps", 0, 0, int64_t{1} << 40));
         FRUGAL_ASSIGN_OR_RETURN(bool ef, p.Bool("ef", false));
         if (ef) {
           return InvalidArgumentError(
               "dgc accumulates the unsent gradient itself (momentum correction); error "
               "feedback (ef=1, --ef) would count it twice");
         }
         return std::unique_ptr<Compressor>(std::make_unique<DgcCompressor>(d));
       }});
  FRUGAL_INTERNAL_ASSERT(s.ok(), s.ToString());
}

}  // namespace frugal::sparse
