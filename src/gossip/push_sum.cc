// Stochastic Gradient Push (Assran et al. 2019): push-sum gossip over a directed graph.
//
// Rank i keeps a numerator x_i (state "numerator") and a weight w_i (state "weight"), starting at
// the initial model and 1. The model the local step sees is the de-biased z_i = x_i / w_i. With P
// the (column-stochastic) mixing matrix of round r:
//
//   AfterStep   x holds z_i + u (u: the local update); x_i <- x_i + u;
//               rank i sends the shares (P_ji w_i, P_ji x_i) to every out-neighbour j, keeps
//               (P_ii w_i, P_ii x_i), and adds what its in-neighbours pushed:
//               x_i <- sum_j share_j, w_i <- sum_j weight share_j (ascending j, itself
//               included, in double); then x <- x_i / w_i.
//   overlap=1   the shares pushed in round r are received in round r + 1: AfterStep of round r
//               finishes round r-1's messages, pushes round r's, and adds its own share of round
//               r to the in-neighbours' shares of round r-1. Settle adds the last round's.
//
// Column-stochastic P keeps sum_i x_i (plus the shares in flight) equal to the sum of the
// initial models and every update, and sum_i w_i = n. A share is computed once by its sender,
// P_ji x_i rounded to float, and sent; the message is [P_ji w_i, P_ji x_i] as floats.
#include <fmt/format.h>

#include <array>

#include "frugal/check.h"
#include "gossip/algorithm.h"
#include "gossip/neighbour_exchange.h"

namespace frugal::gossip {
namespace {

class PushSum final : public Algorithm {
 public:
  explicit PushSum(const AlgorithmOptions& options) : options_(options) {}

  Status Begin(const FlatLayout& layout, std::span<const float> x) override {
    FRUGAL_CHECK_EQ(x.size(), layout.total);
    numerator_.assign(x.begin(), x.end());
    weight_ = {1.0f};
    return Status::Ok();
  }

  Status AfterStep(Transport& t, uint64_t round, std::span<float> x) override {
    const int me = t.rank();
    const double w = weight_[0];
    for (size_t e = 0; e < x.size(); ++e) {
      const float z = static_cast<float>(numerator_[e] / w);
      numerator_[e] =
          static_cast<float>(static_cast<double>(numerator_[e]) + (static_cast<double>(x[e]) - z));
    }
    NeighbourExchange& previous = rounds_[(round + 1) % 2];
    if (options_.overlap && previous.in_flight()) {
      FRUGAL_RETURN_IF_ERROR(
          previous.Finish(t, options_.timeout, fmt::format("SGP round {}", previous_round_)));
    }
    // This round's shares.
    const std::span<const MixingMatrix::Entry> column = options_.mixing->Column(me, round);
    const Topology& g = *options_.topology;
    std::vector<std::vector<float>>& messages = messages_[round % 2];
    messages.clear();
    std::vector<std::span<const std::byte>> payloads;
    float self_weight = 0;
    for (const MixingMatrix::Entry& entry : column) {
      std::vector<float> share(1 + numerator_.size());
      share[0] = static_cast<float>(entry.weight * weight_[0]);
      for (size_t e = 0; e < numerator_.size(); ++e) {
        share[1 + e] = static_cast<float>(entry.weight * numerator_[e]);
      }
      if (entry.rank == me) {
        self_weight = share[0];
        self_.assign(share.begin() + 1, share.end());
      } else {
        messages.push_back(std::move(share));
      }
    }
    for (const auto& m : messages) payloads.push_back(std::as_bytes(std::span<const float>(m)));
    NeighbourExchange& current = rounds_[round % 2];
    current.Start(t, kPushSumTag, g.Out(me, round), payloads, g.In(me, round),
                  (1 + numerator_.size()) * sizeof(float));
    NeighbourExchange* incoming = &current;
    if (options_.overlap) {
      incoming = previous_round_valid_ ? &previous : nullptr;
      previous_round_ = round;
      previous_round_valid_ = true;
    } else {
      FRUGAL_RETURN_IF_ERROR(
          current.Finish(t, options_.timeout, fmt::format("SGP round {}", round)));
    }
    Combine(me, self_weight, self_, incoming);
    Debias(x);
    return Status::Ok();
  }

  bool Progress(Transport&) override { return rounds_[0].Progress() && rounds_[1].Progress(); }

  Status Settle(Transport& t, std::span<float> x) override {
    if (!options_.overlap || !previous_round_valid_) return Status::Ok();
    NeighbourExchange& last = rounds_[previous_round_ % 2];
    FRUGAL_RETURN_IF_ERROR(
        last.Finish(t, options_.timeout, fmt::format("SGP round {}", previous_round_)));
    self_.assign(numerator_.begin(), numerator_.end());
    Combine(t.rank(), weight_[0], self_, &last);
    previous_round_valid_ = false;
    Debias(x);
    return Status::Ok();
  }

  void VisitState(const StateVisitor& visit) override {
    visit("numerator", numerator_);
    visit("weight", weight_);
  }

 private:
  // x_i <- own share + the shares received (ascending sender rank, in double).
  void Combine(int me, float own_weight, std::span<const float> own,
               const NeighbourExchange* incoming) {
    std::vector<std::pair<int, std::span<const float>>> shares = {{me, own}};
    if (incoming != nullptr) {
      for (size_t k = 0; k < incoming->received_count(); ++k) {
        shares.emplace_back(incoming->Source(k), incoming->ReceivedFloats(k));
      }
    }
    std::sort(shares.begin(), shares.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    acc_.assign(numerator_.size(), 0.0);
    double weight = 0;
    for (const auto& [rank, share] : shares) {
      const bool received = rank != me;
      weight += received ? share[0] : own_weight;
      const std::span<const float> values = received ? share.subspan(1) : share;
      for (size_t e = 0; e < acc_.size(); ++e) acc_[e] += values[e];
    }
    for (size_t e = 0; e < acc_.size(); ++e) numerator_[e] = static_cast<float>(acc_[e]);
    weight_[0] = static_cast<float>(weight);
  }

  void Debias(std::span<float> x) const {
    const double w = weight_[0];
    for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<float>(numerator_[e] / w);
  }

  AlgorithmOptions options_;
  std::vector<float> numerator_;
  std::vector<float> weight_;  // one value
  std::vector<float> self_;
  std::vector<double> acc_;
  std::array<NeighbourExchange, 2> rounds_;
  std::array<std::vector<std::vector<float>>, 2> messages_;
  uint64_t previous_round_ = 0;
  bool previous_round_valid_ = false;
};

}  // namespace

std::unique_ptr<Algorithm> MakePushSum(const AlgorithmOptions& options) {
  return std::make_unique<PushSum>(options);
}

}  // namespace frugal::gossip
