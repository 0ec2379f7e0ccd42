// DCD-PSGD and ECD-PSGD (Tang et al. 2018, "Communication compression for decentralized
// training"). Both keep the rank's own model x_i as its neighbours know it (x_i below, state
// "model") and s_i = sum_j W_ij y_j, the mixture of what the neighbours know of each other
// (state "neighbour_sum"); the local update of round r is u = x - x_i, where x is the model after
// the local step (computed at x_i, as the paper's gradient).
//
// DCD (compressed differences): the neighbours hold x_j exactly (y_j = x_j), s_i starts at
// sum_j W_ij x_j^0.
//   z   = (s_i + u) - x_i                  the change of the model, x^{r+1/2} - x^r
//   x_i <- x_i + C(z); send C(z), receive C(z_j)
//   s_i <- s_i + sum_j W_ij C(z_j)
//   x   <- x_i
//
// ECD (extrapolation compression), with t = r + 1: the neighbours hold estimates y_j, y_j^0 =
// x_j^0.
//   x^{t+1} = s_i + u                      (= sum_j W_ij y_j - lr g(x_i))
//   z   = (1 - t/2) x_i + (t/2) x^{t+1}     the extrapolation; send C(z), receive C(z_j)
//   s_i <- (1 - 2/t) s_i + (2/t) sum_j W_ij C(z_j)
//   x_i <- x^{t+1}; x <- x^{t+1}
// (y_j <- (1 - 2/t) y_j + (2/t) C(z_j) is an unbiased estimate of x_j^{t+1} when C is unbiased.)
//
// Both need an unbiased compressor (the strategy factory refuses others).
#include <algorithm>
#include <optional>

#include "frugal/check.h"
#include "gossip/algorithm.h"
#include "gossip/compressed_message.h"

namespace frugal::gossip {
namespace {

class TangBase : public Algorithm {
 public:
  explicit TangBase(const AlgorithmOptions& options) : options_(options) {}

  Status Begin(const FlatLayout& layout, std::span<const float> x) override {
    FRUGAL_CHECK_EQ(x.size(), layout.total);
    layout_ = layout;
    exchange_.emplace(options_, options_.rank, options_.topology->size());
    model_.assign(x.begin(), x.end());
    // s_i = sum_j W_ij x_j^0 with every x_j^0 = x^0.
    sum_.resize(x.size());
    double row = 0;
    for (const MixingMatrix::Entry& e : options_.mixing->Row(options_.rank, 0)) row += e.weight;
    for (size_t e = 0; e < x.size(); ++e) sum_[e] = static_cast<float>(row * x[e]);
    return Status::Ok();
  }

  void VisitState(const StateVisitor& visit) override {
    visit("model", model_);
    visit("neighbour_sum", sum_);
  }

 protected:
  Status Exchange(Transport& t, uint64_t round, std::span<const float> v, const char* name) {
    return exchange_->Round(t, round, layout_, v, name);
  }

  AlgorithmOptions options_;
  FlatLayout layout_;
  std::optional<CompressedExchange> exchange_;
  std::vector<float> model_;
  std::vector<float> sum_;
  std::vector<float> z_;
};

class Dcd final : public TangBase {
 public:
  explicit Dcd(const AlgorithmOptions& options) : TangBase(options) {}

  Status AfterStep(Transport& t, uint64_t round, std::span<float> x) override {
    z_.resize(x.size());
    for (size_t e = 0; e < x.size(); ++e) {
      const double u = static_cast<double>(x[e]) - model_[e];
      z_[e] = static_cast<float>(static_cast<double>(sum_[e]) + u - model_[e]);
    }
    FRUGAL_RETURN_IF_ERROR(Exchange(t, round, z_, "DCD-PSGD"));
    FRUGAL_RETURN_IF_ERROR(exchange_->AddOwn(1.0f, model_));
    FRUGAL_RETURN_IF_ERROR(exchange_->AddMixed(1.0f, sum_));
    std::copy(model_.begin(), model_.end(), x.begin());
    return Status::Ok();
  }
};

class Ecd final : public TangBase {
 public:
  explicit Ecd(const AlgorithmOptions& options) : TangBase(options) {}

  Status AfterStep(Transport& t, uint64_t round, std::span<float> x) override {
    const double step = static_cast<double>(round) + 1;
    z_.resize(x.size());
    next_.resize(x.size());
    for (size_t e = 0; e < x.size(); ++e) {
      const double u = static_cast<double>(x[e]) - model_[e];
      next_[e] = static_cast<float>(static_cast<double>(sum_[e]) + u);
      z_[e] = static_cast<float>((1 - step / 2) * model_[e] + (step / 2) * next_[e]);
    }
    FRUGAL_RETURN_IF_ERROR(Exchange(t, round, z_, "ECD-PSGD"));
    const float keep = static_cast<float>(1 - 2 / step);
    for (float& s : sum_) s *= keep;
    FRUGAL_RETURN_IF_ERROR(exchange_->AddMixed(static_cast<float>(2 / step), sum_));
    std::copy(next_.begin(), next_.end(), model_.begin());
    std::copy(next_.begin(), next_.end(), x.begin());
    return Status::Ok();
  }

 private:
  std::vector<float> next_;
};

}  // namespace

std::unique_ptr<Algorithm> MakeDcd(const AlgorithmOptions& options) {
  return std::make_unique<Dcd>(options);
}

std::unique_ptr<Algorithm> MakeEcd(const AlgorithmOptions& options) {
  return std::make_unique<Ecd>(options);
}

}  // namespace frugal::gossip
