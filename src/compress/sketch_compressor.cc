// sketch: count-sketch compression (Sketched-SGD, Ivkin et al. 2019).
//
// Every rank sketches its (error-compensated) gradient into a rows x cols count sketch whose hash
// functions come from the shared-seed stream of (seed, step, tensor), so all ranks' sketches are
// compatible and sum to the sketch of the summed gradient (CountSketch is linear). From the
// summed sketch every rank recovers the same k heavy hitters (largest estimated magnitudes).
//   rounds=2 (Aggregate, Sketched-SGD's second round): the ranks all-reduce the sketch and take
//     the candidates * k indices of largest estimate, then all-reduce their exact values; the k
//     candidates of largest exact sum form the aggregate (divided by P for an average). Asking
//     for more candidates than k makes the result robust to the sketch's collisions (an index
//     whose estimate is inflated by a heavy neighbour is dropped once its exact value is known).
//     The residual is the input minus the values that made it into the aggregate (zero at those k
//     indices, the input elsewhere). Traffic: rows * cols + candidates * k floats per all-reduce.
//   rounds=1 (summable payloads on the all-reduce path): the body is the table itself (rows * cols
//     float32, summed as it is); Decode recovers the k heavy hitters of the table and adds their
//     estimates.
// cols=0 picks 4k columns (at least 16). Error feedback is on by default (Sketched-SGD keeps an
// error accumulator); ef=0 turns it off.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "compress/sketch_count.h"
#include "compress/sketch_register_internal.h"
#include "compress/sparse_common.h"

namespace frugal::sketch {
namespace {

using sparse::KeepCount;
using sparse::SparseCompressorBase;

struct SketchParams {
  KeepCount count;
  int64_t rows = 5;
  int64_t cols = 0;
  int64_t rounds = 2;
  double candidates = 2.0;
};

struct SketchScratch : TensorState {
  std::vector<float> table, estimates, values;
  sparse::TopKSelector selector;
  sparse::SparseVector heavy, kept;
};

class SketchCompressor final : public SparseCompressorBase {
 public:
  explicit SketchCompressor(const SketchParams& p)
      : SparseCompressorBase("sketch", CompressorId::kCountSketch,
                             CompressorTraits{.summable = true,
                                              .needs_error_feedback = true,
                                              .shared_seed = true,
                                              .custom_aggregate = p.rounds == 2},
                             fmt::format("candidates={},cols={},ef=0,{},rounds={},rows={}",
                                         sparse::FormatParam(p.candidates), p.cols,
                                         p.count.Canonical(), p.rounds, p.rows)),
        p_(p) {}

  size_t Cols(size_t numel) const {
    if (p_.cols > 0) return static_cast<size_t>(p_.cols);
    return std::max<size_t>(16, 4 * p_.count.For(numel));
  }

  CountSketch SketchFor(const TensorInfo& tensor, const CompressContext& ctx) const {
    RngStream rng(ctx.Key(tensor, /*shared=*/true));
    return CountSketch(static_cast<int>(p_.rows), Cols(tensor.numel), rng.NextU64());
  }

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return uint64_t{32} * static_cast<uint64_t>(p_.rows) * Cols(tensor.numel);
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckSize(input.size(), tensor);
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    CountSketch sketch = SketchFor(tensor, ctx);
    SketchScratch& s = Scratch(ctx);
    s.table.assign(sketch.table_size(), 0.0f);
    sketch.Accumulate(input, s.table);
    std::span<std::byte> body = BeginPayload(*this, tensor, 4 * s.table.size(), out);
    std::memcpy(body.data(), s.table.data(), body.size());
    return Status::Ok();
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    CheckSize(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    CountSketch sketch = SketchFor(tensor, ctx);
    if (body.size() != 4 * sketch.table_size()) {
      return MalformedError(fmt::format("sketch payload: body of {} bytes for a {} x {} table",
                                        body.size(), sketch.rows(), sketch.cols()));
    }
    SketchScratch& s = Scratch(ctx);
    s.table.resize(sketch.table_size());
    std::memcpy(s.table.data(), body.data(), body.size());
    s.estimates.resize(tensor.numel);
    sketch.HeavyHitters(s.table, p_.count.For(tensor.numel), s.estimates, s.selector, &s.heavy);
    for (size_t i = 0; i < s.heavy.size(); ++i) output[s.heavy.indices[i]] += s.heavy.values[i];
    return Status::Ok();
  }

  Status Aggregate(Transport& t, std::span<float> data, std::span<float> residual,
                   const TensorInfo& tensor, CompressContext& ctx,
                   const AggregateOptions& options) const override {
    CheckSize(data.size(), tensor);
    FRUGAL_CHECK(residual.empty() || residual.size() == data.size(), "sketch residual size ",
                 residual.size(), " for ", data.size(), " elements");
    FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
    AllreduceOptions sum;
    sum.algorithm = options.algorithm;
    sum.op = ReduceOp::kSum;
    sum.timeout = options.timeout;
    sum.check_lengths = false;
    CountSketch sketch = SketchFor(tensor, ctx);
    SketchScratch& s = Scratch(ctx);
    s.table.assign(sketch.table_size(), 0.0f);
    sketch.Accumulate(data, s.table);
    FRUGAL_RETURN_IF_ERROR(Allreduce(t, s.table, sum).Annotate("sketch all-reduce of the table"));
    const size_t k = p_.count.For(tensor.numel);
    const size_t candidates = std::min<size_t>(
        tensor.numel, static_cast<size_t>(std::ceil(p_.candidates * static_cast<double>(k))));
    s.estimates.resize(tensor.numel);
    sketch.HeavyHitters(s.table, candidates, s.estimates, s.selector, &s.heavy);
    s.values.resize(s.heavy.size());
    for (size_t i = 0; i < s.heavy.size(); ++i) s.values[i] = data[s.heavy.indices[i]];
    FRUGAL_RETURN_IF_ERROR(Allreduce(t, s.values, sum).Annotate("sketch all-reduce of values"));
    // The top-k of the exact sums, over the candidates' positions (increasing with the indices).
    s.selector.SelectExact(s.values, k, &s.kept);
    if (!residual.empty()) std::copy(data.begin(), data.end(), residual.begin());
    std::fill(data.begin(), data.end(), 0.0f);
    const float divisor = options.op == ReduceOp::kAverage ? static_cast<float>(t.size()) : 1.0f;
    for (size_t j = 0; j < s.kept.size(); ++j) {
      uint32_t index = s.heavy.indices[s.kept.indices[j]];
      data[index] = s.kept.values[j] / divisor;
      if (!residual.empty()) residual[index] = 0.0f;
    }
    return Status::Ok();
  }

 private:
  static SketchScratch& Scratch(CompressContext& ctx) {
    static const TensorInfo kTensor("frugal.sketch.scratch", 0);
    return ctx.State<SketchScratch>(kTensor, "sketch.scratch");
  }

  SketchParams p_;
};

}  // namespace

void RegisterCountSketch(CompressorRegistry& registry) {
  Status s = registry.Register(
      {.name = "sketch",
       .summary = "count sketch (Sketched-SGD): summed sketches, top-k heavy hitters recovered, "
                  "their exact values in a second round",
       .params = "ratio=0.005 | k=N, rows=5, cols=0 (4k), rounds=2|1, candidates=2; error "
                 "feedback on unless ef=0",
       .factory = [](CompressorParams& p) -> StatusOr<std::unique_ptr<Compressor>> {
         SketchParams d;
         FRUGAL_ASSIGN_OR_RETURN(d.count, sparse::ParseKeepCount(p, 0.005));
         FRUGAL_ASSIGN_OR_RETURN(d.rows, p.Int("rows", 5, 1, 64));
         FRUGAL_ASSIGN_OR_RETURN(d.cols, p.Int("cols", 0, 0, UINT32_MAX));
         FRUGAL_ASSIGN_OR_RETURN(d.rounds, p.Int("rounds", 2, 1, 2));
         FRUGAL_ASSIGN_OR_RETURN(d.candidates, p.Double("candidates", 2.0, 1.0, 1e6));
         return std::unique_ptr<Compressor>(std::make_unique<SketchCompressor>(d));
       },
       .error_feedback_by_default = true});
  FRUGAL_INTERNAL_ASSERT(s.ok(), s.ToString());
}

}  // namespace frugal::sketch
