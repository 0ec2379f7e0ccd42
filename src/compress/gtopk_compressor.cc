// gtopk: global top-k sparsification (Shi et al. 2019).
//
// Aggregate: every rank selects the top-k of its (error-compensated) gradient, exactly or by the
// sampled threshold; GlobalTopK (gtopk_merge.cc) merges the ranks' vectors pairwise in
// ceil(log2 P) rounds, each keeping the top-k of the union, for any P; the result — the same k
// entries on every rank — replaces the gradient (divided by P for an average). The residual the
// error feedback keeps is the input minus this rank's entries that survived every merge: entries
// that were selected locally but dropped on the way go back to the residual.
// Traffic per rank: about 2 log2(P) messages of k indices and values, against P - 1 messages of k
// for all-gathering top-k payloads.
// Encode/Decode, for the generic paths: topk's payload (index section, then float32 values) of
// the local top-k. Error feedback is on by default (the method is defined with it); ef=0 turns it
// off.
#include <fmt/format.h>

#include "compress/gtopk_merge.h"
#include "compress/sparse_common.h"
#include "compress/sparse_register_internal.h"

namespace frugal::sparse {
namespace {

class GTopKCompressor final : public SparseCompressorBase {
 public:
  GTopKCompressor(KeepCount count, SelectMethod method, double sample)
      : SparseCompressorBase(
            "gtopk", CompressorId::kGTopK,
            CompressorTraits{
                .needs_error_feedback = true, .variable_size = true, .custom_aggregate = true},
            fmt::format("ef=0,{},sample={},select={}", count.Canonical(), FormatParam(sample),
                        SelectMethodName(method))),
        count_(count),
        method_(method),
        sample_(sample) {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override { return std::nullopt; }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckSize(input.size(), tensor);
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    SparseScratch& s = Scratch(ctx);
    SelectTopK(input, count_.For(tensor.numel), method_, sample_, ctx.Key(tensor), s.selector,
               &s.picked);
    WriteSparsePayload(*this, tensor, {}, s.picked, kLayout, out);
    return Status::Ok();
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    CheckSize(output.size(), tensor);
    SparseBody& body = Scratch(ctx).body;
    FRUGAL_RETURN_IF_ERROR(
        ReadSparsePayload(payload, *this, tensor, kLayout, count_.For(tensor.numel), &body));
    const SparseVector& e = body.entries;
    for (size_t i = 0; i < e.size(); ++i) output[e.indices[i]] += e.values[i];
    return Status::Ok();
  }

  Status Aggregate(Transport& t, std::span<float> data, std::span<float> residual,
                   const TensorInfo& tensor, CompressContext& ctx,
                   const AggregateOptions& options) const override {
    CheckSize(data.size(), tensor);
    FRUGAL_CHECK(residual.empty() || residual.size() == data.size(), "gtopk residual size ",
                 residual.size(), " for ", data.size(), " elements");
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    SparseScratch& s = Scratch(ctx);
    const size_t k = count_.For(tensor.numel);
    SparseVector local;
    SelectTopK(data, k, method_, sample_, ctx.Key(tensor), s.selector, &local);
    SparseVector global;
    std::vector<uint8_t> alive;
    FRUGAL_RETURN_IF_ERROR(GlobalTopK(t, local, tensor.numel, k,
                                      {.timeout = options.timeout, .tag = kCompressTagBase + 16},
                                      &global, &alive));
    if (!residual.empty()) {
      std::copy(data.begin(), data.end(), residual.begin());
      for (size_t i = 0; i < local.size(); ++i) {
        if (alive[i]) residual[local.indices[i]] -= local.values[i];
      }
    }
    std::fill(data.begin(), data.end(), 0.0f);
    const float divisor = options.op == ReduceOp::kAverage ? static_cast<float>(t.size()) : 1.0f;
    for (size_t i = 0; i < global.size(); ++i) data[global.indices[i]] = global.values[i] / divisor;
    return Status::Ok();
  }

 private:
  static constexpr SparseLayout kLayout{.scalars = 0, .values = true, .signs = false};
  KeepCount count_;
  SelectMethod method_;
  double sample_;
};

}  // namespace

void RegisterGTopK(CompressorRegistry& registry) {
  Status s = registry.Register(
      {.name = "gtopk",
       .summary = "global top-k: local top-k merged pairwise in log2(P) rounds; dropped entries "
                  "return to the residual",
       .params = "ratio=0.01 | k=N, select=exact|sampled, sample=0.01; error feedback on unless "
                 "ef=0",
       .factory = [](CompressorParams& p) -> StatusOr<std::unique_ptr<Compressor>> {
         FRUGAL_ASSIGN_OR_RETURN(KeepCount count, ParseKeepCount(p, 0.01));
         FRUGAL_ASSIGN_OR_RETURN(SelectMethod method, ParseSelectMethod(p, SelectMethod::kExact));
         FRUGAL_ASSIGN_OR_RETURN(double sample, p.Double("sample", 0.01, 1e-6, 1.0));
         return std::unique_ptr<Compressor>(
             std::make_unique<GTopKCompressor>(count, method, sample));
       },
       .error_feedback_by_default = true});
  FRUGAL_INTERNAL_ASSERT(s.ok(), s.ToString());
}

}  // namespace frugal::sparse
