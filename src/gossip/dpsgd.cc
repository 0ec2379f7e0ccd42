// D-PSGD (Lian et al. 2017), and the mixing step every dense gossip algorithm shares.
//
// Round r on rank i, with W the mixing matrix of phase r and x_j^r the model rank j starts the
// round's local step from:
//
//   order=cta (combine then adapt; the paper's x_{r+1} = W x_r - lr g(x_r)):
//     BeforeStep  snapshot = x_i^r; send it to every out-neighbour, post the receives of the
//                 in-neighbours' snapshots (in flight during forward and backward, moved along
//                 by Progress, which the strategy polls from the transport's thread);
//     AfterStep   x holds snapshot + update; wait for the round, then
//                 x_i <- sum_j W_ij x_j^r + (x - snapshot),
//   order=atc (adapt then combine, x_{r+1} = W (x_r - lr g(x_r))):
//     AfterStep   send x (after the local step), receive the neighbours', x_i <- sum_j W_ij x_j.
//
// Each element is summed in double in ascending j (i itself at its place), the local update
// added last, and rounded to float once, so the single-process reference gets the same bits.
// With a doubly stochastic W the average of the models moves only by the average update.
#include <fmt/format.h>

#include "frugal/check.h"
#include "gossip/algorithm.h"
#include "gossip/neighbour_exchange.h"

namespace frugal::gossip {

void FlatLayout::Add(std::string name, size_t numel) {
  offsets.push_back(total);
  tensors.emplace_back(std::move(name), numel);
  total += numel;
}

void MixRow(std::span<const MixingMatrix::Entry> row,
            const std::function<std::span<const float>(int)>& values, std::vector<double>& acc) {
  bool first = true;
  for (const MixingMatrix::Entry& entry : row) {
    const std::span<const float> x = values(entry.rank);
    if (first) acc.assign(x.size(), 0.0);
    first = false;
    FRUGAL_CHECK_EQ(x.size(), acc.size(), "rank ", entry.rank, "'s vector");
    const double w = entry.weight;
    for (size_t e = 0; e < x.size(); ++e) acc[e] += w * static_cast<double>(x[e]);
  }
}

namespace {

class Dpsgd final : public Algorithm {
 public:
  explicit Dpsgd(const AlgorithmOptions& options) : options_(options) {}

  Status Begin(const FlatLayout& layout, std::span<const float> x) override {
    FRUGAL_CHECK_EQ(x.size(), layout.total);
    return Status::Ok();
  }

  bool ActsBeforeStep(uint64_t) const override { return !options_.atc; }

  Status BeforeStep(Transport& t, uint64_t round, std::span<float> x) override {
    snapshot_.assign(x.begin(), x.end());
    Start(t, round);
    return Status::Ok();
  }

  bool Progress(Transport&) override { return exchange_.Progress(); }

  Status AfterStep(Transport& t, uint64_t round, std::span<float> x) override {
    if (options_.atc) {
      snapshot_.assign(x.begin(), x.end());
      Start(t, round);
    }
    FRUGAL_INTERNAL_ASSERT(exchange_.in_flight(), "D-PSGD round ", round, " was not started");
    FRUGAL_RETURN_IF_ERROR(
        exchange_.Finish(t, options_.timeout, fmt::format("D-PSGD round {}", round)));
    const int me = t.rank();
    MixRow(
        options_.mixing->Row(me, round), [&](int j) { return Values(me, j); }, acc_);
    if (options_.atc) {
      for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<float>(acc_[e]);
    } else {
      for (size_t e = 0; e < x.size(); ++e) {
        x[e] = static_cast<float>(acc_[e] + (static_cast<double>(x[e]) - snapshot_[e]));
      }
    }
    return Status::Ok();
  }

 private:
  void Start(Transport& t, uint64_t round) {
    const Topology& g = *options_.topology;
    exchange_.Start(t, kMixTag, g.Out(t.rank(), round),
                    std::as_bytes(std::span<const float>(snapshot_)), g.In(t.rank(), round),
                    snapshot_.size() * sizeof(float));
  }

  std::span<const float> Values(int me, int j) const {
    if (j == me) return snapshot_;
    for (size_t k = 0; k < exchange_.received_count(); ++k) {
      if (exchange_.Source(k) == j) return exchange_.ReceivedFloats(k);
    }
    FRUGAL_INTERNAL_ASSERT(false, "no message of rank ", j);
    return {};
  }

  AlgorithmOptions options_;
  NeighbourExchange exchange_;
  std::vector<float> snapshot_;
  std::vector<double> acc_;
};

}  // namespace

std::unique_ptr<Algorithm> MakeDpsgd(const AlgorithmOptions& options) {
  return std::make_unique<Dpsgd>(options);
}

}  // namespace frugal::gossip
