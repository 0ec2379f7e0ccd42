// CHOCO-SGD (Koloskova et al. 2019, Algorithm 1), in the memory-efficient form that keeps two
// vectors instead of one copy per neighbour.
//
// Every rank i has a public copy x̂_i of its model that all its neighbours hold too; x̂_i starts
// at 0 and moves only by compressed increments, so the copies agree bit for bit. Round r, with
// the model after the local step in x (x^{r+1/2} of the paper):
//
//   q_i = C(x - x̂_i)                        (--compress; tensors below --compress-min-bytes go as
//                                             float32)
//   send q_i to the out-neighbours, receive q_j of the in-neighbours;
//   x̂_i <- x̂_i + q_i
//   s_i <- s_i + sum_j W_ij q_j              (s_i = sum_j W_ij x̂_j, kept instead of the copies)
//   x   <- x + gamma (s_i - x̂_i)            (= x + gamma sum_j W_ij (x̂_j - x̂_i): rows sum to 1)
// in float; the messages are added where they are decoded (CompressedExchange), so with a sparse
// compressor a round passes over the model twice (the difference and the last line) beside the
// encoding.
//
// gamma is the consensus step (--arch gossip:...,gamma=G, default 0.9 as in the authors' code).
// State: x̂_i ("xhat") and s_i ("neighbour_sum").
#include <optional>

#include "frugal/check.h"
#include "gossip/algorithm.h"
#include "gossip/compressed_message.h"

namespace frugal::gossip {
namespace {

class Choco final : public Algorithm {
 public:
  explicit Choco(const AlgorithmOptions& options) : options_(options) {}

  Status Begin(const FlatLayout& layout, std::span<const float> x) override {
    FRUGAL_CHECK_EQ(x.size(), layout.total);
    layout_ = layout;
    exchange_.emplace(options_, options_.rank, options_.topology->size());
    xhat_.assign(layout.total, 0.0f);
    sum_.assign(layout.total, 0.0f);
    return Status::Ok();
  }

  Status AfterStep(Transport& t, uint64_t round, std::span<float> x) override {
    diff_.resize(x.size());
    for (size_t e = 0; e < x.size(); ++e) diff_[e] = x[e] - xhat_[e];
    FRUGAL_RETURN_IF_ERROR(exchange_->Round(t, round, layout_, diff_, "CHOCO"));
    FRUGAL_RETURN_IF_ERROR(exchange_->AddOwn(1.0f, xhat_));
    FRUGAL_RETURN_IF_ERROR(exchange_->AddMixed(1.0f, sum_));
    const float gamma = static_cast<float>(options_.gamma);
    for (size_t e = 0; e < x.size(); ++e) x[e] += gamma * (sum_[e] - xhat_[e]);
    return Status::Ok();
  }

  void VisitState(const StateVisitor& visit) override {
    visit("xhat", xhat_);
    visit("neighbour_sum", sum_);
  }

 private:
  AlgorithmOptions options_;
  FlatLayout layout_;
  std::optional<CompressedExchange> exchange_;
  std::vector<float> xhat_;
  std::vector<float> sum_;
  std::vector<float> diff_;
};

}  // namespace

std::unique_ptr<Algorithm> MakeChoco(const AlgorithmOptions& options) {
  return std::make_unique<Choco>(options);
}

}  // namespace frugal::gossip
