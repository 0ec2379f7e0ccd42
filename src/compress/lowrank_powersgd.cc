// powersgd: PowerSGD (Vogels, Karimireddy and Jaggi 2019), following PyTorch's PowerSGD
// communication hook.
//
// Matrix view: a tensor with a shape of two or more dimensions is the matrix rows = shape[0] x
// cols = numel / rows; a flat buffer without a shape (a fused bucket) is viewed as the near-square
// matrix cols = ceil(sqrt(n)), rows = ceil(n / cols), padded with zeros. A 1-D tensor, and a
// matrix where (rows + cols) * r * min_compression_rate >= rows * cols (compression does not
// pay), stays dense; r = min(rank, rows, cols).
//
// Aggregate, per step (ctx.step()):
//   - step < start_iter, or a dense tensor: plain all-reduce of the values (residual zero);
//   - otherwise, with M the rank's (error-compensated) matrix and Q kept in the context (slot
//     "powersgd"; filled from the shared-seed stream of (seed, step, tensor) on first use, so
//     every rank starts from the same Q, then warm-started from the previous step):
//       orthonormalise Q; P = M Q; all-reduce P (sum); orthonormalise P; Q = M^T P;
//       all-reduce Q (sum); Q /= world size; the aggregate is P Q^T (times the world size for
//       ReduceOp::kSum), and the residual the error feedback keeps is M - P Q^T.
//   Two all-reduces of (rows + cols) * r floats replace one of rows * cols.
// Encode/Decode, for the generic paths, apply the same power iteration to the rank's own matrix
// (Q warm-started in slot "powersgd.encode"). Body: u32 mode (0 dense, 1 low rank), then the n
// float32 values (mode 0) or P (rows * r) then Q (cols * r) float32 values (mode 1). Decode checks
// the mode against the tensor's view and the exact length.
// Error feedback is on by default (PyTorch's use_error_feedback=True); ef=0 turns it off.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "compress/lowrank_linalg.h"
#include "compress/lowrank_register_internal.h"
#include "compress/sparse_common.h"

namespace frugal::lowrank {
namespace {

using sparse::FormatParam;
using sparse::SparseCompressorBase;

struct PowerSgdParams {
  int64_t rank = 1;
  int64_t start_iter = 10;
  double min_compression_rate = 2.0;
  bool warm_start = true;
};

struct MatrixView {
  bool compress = false;
  size_t rows = 0, cols = 0;
  int r = 0;
};

// q is warm-started from one step to the next; p is recomputed from it but kept as well.
struct PowerSgdState : TensorState {
  std::vector<float> p, q;
  bool has_q = false;
  void VisitState(StateVisitor& visitor) override {
    visitor.FloatVector("p", p);
    visitor.FloatVector("q", q);
    uint64_t has = has_q ? 1 : 0;
    visitor.U64("has_q", has);
    has_q = has != 0;
  }
};

class PowerSgdCompressor final : public SparseCompressorBase {
 public:
  explicit PowerSgdCompressor(const PowerSgdParams& p)
      : SparseCompressorBase(
            "powersgd", CompressorId::kPowerSgd,
            CompressorTraits{.needs_error_feedback = true,
                             .shared_seed = true,
                             .variable_size = true,
                             .custom_aggregate = true},
            fmt::format("ef=0,min_compression_rate={},rank={},start_iter={},warm_start={}",
                        FormatParam(p.min_compression_rate), p.rank, p.start_iter,
                        p.warm_start ? 1 : 0)),
        p_(p) {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override { return std::nullopt; }

  MatrixView View(const TensorInfo& tensor) const {
    MatrixView v;
    const size_t n = tensor.numel;
    if (n == 0 || tensor.shape.size() == 1) return v;
    if (tensor.shape.size() >= 2) {
      v.rows = tensor.rows();
      v.cols = tensor.cols();
    } else {
      v.cols = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(n))));
      v.rows = (n + v.cols - 1) / v.cols;
    }
    v.r = static_cast<int>(std::min<uint64_t>({static_cast<uint64_t>(p_.rank), v.rows, v.cols}));
    double dense = static_cast<double>(v.rows) * static_cast<double>(v.cols);
    double low = static_cast<double>(v.rows + v.cols) * v.r;
    v.compress = low * p_.min_compression_rate < dense;
    return v;
  }

  bool Compresses(const TensorInfo& tensor, uint64_t step) const {
    return step >= static_cast<uint64_t>(p_.start_iter) && View(tensor).compress;
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckSize(input.size(), tensor);
    const size_t n = input.size();
    if (!Compresses(tensor, ctx.step())) {
      std::span<std::byte> body = BeginPayload(*this, tensor, 4 + 4 * n, out);
      uint32_t mode = 0;
      std::memcpy(body.data(), &mode, 4);
      if (n > 0) std::memcpy(body.data() + 4, input.data(), 4 * n);
      return Status::Ok();
    }
    const MatrixView v = View(tensor);
    auto& state = ctx.State<PowerSgdState>(tensor, "powersgd.encode");
    PowerIteration(input, v, tensor, ctx, state);
    OrthonormalizeColumns(state.p, v.rows, v.r);
    MultiplyMtP(input, v.rows, v.cols, state.p, v.r, state.q);
    std::span<std::byte> body =
        BeginPayload(*this, tensor, 4 + 4 * (state.p.size() + state.q.size()), out);
    uint32_t mode = 1;
    std::memcpy(body.data(), &mode, 4);
    std::memcpy(body.data() + 4, state.p.data(), 4 * state.p.size());
    std::memcpy(body.data() + 4 + 4 * state.p.size(), state.q.data(), 4 * state.q.size());
    return Status::Ok();
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    CheckSize(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    if (body.size() < 4) return MalformedError("powersgd payload: no mode");
    uint32_t mode;
    std::memcpy(&mode, body.data(), 4);
    const size_t n = tensor.numel;
    const MatrixView v = View(tensor);
    if (mode == 0) {
      if (body.size() != 4 + 4 * n) {
        return MalformedError(fmt::format(
            "powersgd payload: dense body of {} bytes for {} elements", body.size(), n));
      }
      for (size_t i = 0; i < n; ++i) {
        float x;
        std::memcpy(&x, body.data() + 4 + 4 * i, 4);
        output[i] += x;
      }
      return Status::Ok();
    }
    if (mode != 1 || !v.compress) {
      return MalformedError(
          fmt::format("powersgd payload: mode {} for tensor '{}'", mode, tensor.name));
    }
    const size_t p_size = v.rows * static_cast<size_t>(v.r);
    const size_t q_size = v.cols * static_cast<size_t>(v.r);
    if (body.size() != 4 + 4 * (p_size + q_size)) {
      return MalformedError(fmt::format("powersgd payload: body of {} bytes, expected {}",
                                        body.size(), 4 + 4 * (p_size + q_size)));
    }
    std::vector<float> pq(p_size + q_size);
    std::memcpy(pq.data(), body.data() + 4, 4 * pq.size());
    AddOuterProducts(std::span(pq).first(p_size), std::span(pq).subspan(p_size), v.rows, v.cols,
                     v.r, 1.0f, output);
    return Status::Ok();
  }

  std::optional<std::vector<uint64_t>> AggregateAllreduceFloats(const TensorInfo& tensor,
                                                                uint64_t step) const override {
    if (!Compresses(tensor, step)) return std::vector<uint64_t>{tensor.numel};
    const MatrixView v = View(tensor);
    return std::vector<uint64_t>{v.rows * static_cast<uint64_t>(v.r),
                                 v.cols * static_cast<uint64_t>(v.r)};
  }

  Status Aggregate(Transport& t, std::span<float> data, std::span<float> residual,
                   const TensorInfo& tensor, CompressContext& ctx,
                   const AggregateOptions& options) const override {
    CheckSize(data.size(), tensor);
    FRUGAL_CHECK(residual.empty() || residual.size() == data.size(), "powersgd residual size ",
                 residual.size(), " for ", data.size(), " elements");
    AllreduceOptions sum;
    sum.algorithm = options.algorithm;
    sum.op = ReduceOp::kSum;
    sum.timeout = options.timeout;
    sum.check_lengths = false;
    if (!Compresses(tensor, ctx.step())) {
      AllreduceOptions dense = sum;
      dense.op = options.op;
      FRUGAL_RETURN_IF_ERROR(Allreduce(t, data, dense).Annotate("powersgd dense all-reduce"));
      std::fill(residual.begin(), residual.end(), 0.0f);
      return Status::Ok();
    }
    const MatrixView v = View(tensor);
    auto& state = ctx.State<PowerSgdState>(tensor, "powersgd");
    PowerIteration(data, v, tensor, ctx, state);
    FRUGAL_RETURN_IF_ERROR(Allreduce(t, state.p, sum).Annotate("powersgd all-reduce of P"));
    OrthonormalizeColumns(state.p, v.rows, v.r);
    MultiplyMtP(data, v.rows, v.cols, state.p, v.r, state.q);
    FRUGAL_RETURN_IF_ERROR(Allreduce(t, state.q, sum).Annotate("powersgd all-reduce of Q"));
    const float world = static_cast<float>(t.size());
    for (float& x : state.q) x /= world;
    if (!residual.empty()) {
      std::copy(data.begin(), data.end(), residual.begin());
      AddOuterProducts(state.p, state.q, v.rows, v.cols, v.r, -1.0f, residual);
    }
    std::fill(data.begin(), data.end(), 0.0f);
    AddOuterProducts(state.p, state.q, v.rows, v.cols, v.r,
                     options.op == ReduceOp::kSum ? world : 1.0f, data);
    return Status::Ok();
  }

 private:
  // Q from the shared seed (first use, or every step without warm start), orthonormalised; then
  // P = M Q.
  void PowerIteration(std::span<const float> m, const MatrixView& v, const TensorInfo& tensor,
                      CompressContext& ctx, PowerSgdState& state) const {
    state.p.resize(v.rows * static_cast<size_t>(v.r));
    if (!state.has_q || !p_.warm_start || state.q.size() != v.cols * static_cast<size_t>(v.r)) {
      state.q.resize(v.cols * static_cast<size_t>(v.r));
      RngStream rng(ctx.Key(tensor, /*shared=*/true));
      FillNormal(state.q, rng);
      state.has_q = true;
    }
    OrthonormalizeColumns(state.q, v.cols, v.r);
    MultiplyMQ(m, v.rows, v.cols, state.q, v.r, state.p);
  }

  PowerSgdParams p_;
};

}  // namespace

void RegisterPowerSgd(CompressorRegistry& registry) {
  Status s = registry.Register(
      {.name = "powersgd",
       .summary = "PowerSGD: rank-r approximation by one warm-started power iteration, P and Q "
                  "all-reduced",
       .params = "rank=1, start_iter=10 (dense steps first), min_compression_rate=2, "
                 "warm_start=1; error feedback on unless ef=0",
       .factory = [](CompressorParams& p) -> StatusOr<std::unique_ptr<Compressor>> {
         PowerSgdParams d;
         FRUGAL_ASSIGN_OR_RETURN(d.rank, p.Int("rank", 1, 1, 1024));
         FRUGAL_ASSIGN_OR_RETURN(d.start_iter, p.Int("start_iter", 10, 0, int64_t{1} << 40));
         FRUGAL_ASSIGN_OR_RETURN(d.min_compression_rate,
                                 p.Double("min_compression_rate", 2.0, 0.0, 1e9));
         FRUGAL_ASSIGN_OR_RETURN(d.warm_start, p.Bool("warm_start", true));
         return std::unique_ptr<Compressor>(std::make_unique<PowerSgdCompressor>(d));
       },
       .error_feedback_by_default = true});
  FRUGAL_INTERNAL_ASSERT(s.ok(), s.ToString());
}

}  // namespace frugal::lowrank
