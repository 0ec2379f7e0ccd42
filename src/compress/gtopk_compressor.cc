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

class GTopKCompressor final : public TopKValuesCompressor {
 public:
  explicit GTopKCompressor(const TopKParams& p)
      : TopKValuesCompressor(
            "gtopk", CompressorId::kGTopK,
            CompressorTraits{
                .needs_error_feedback = true, .variable_size = true, .custom_aggregate = true},
            "ef=0,", p) {}

  Status Aggregate(Transport& t, std::span<float> data, std::span<float> residual,
                   const TensorInfo& tensor, CompressContext& ctx,
                   const AggregateOptions& options) const override {
    CheckSize(data.size(), tensor);
    FRUGAL_CHECK(residual.empty() || residual.size() == data.size(), "gtopk residual size ",
                 residual.size(), " for ", data.size(), " elements");
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    const size_t k = KeepFor(tensor.numel);
    SparseVector local;
    Select(data, tensor, ctx, &local);
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
         FRUGAL_ASSIGN_OR_RETURN(TopKParams topk, ParseTopKParams(p));
         return std::unique_ptr<Compressor>(std::make_unique<GTopKCompressor>(topk));
       },
       .error_feedback_by_default = true});
  FRUGAL_INTERNAL_ASSERT(s.ok(), s.ToString());
}

}  // namespace frugal::sparse
