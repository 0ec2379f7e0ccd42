// The single-process reference (see gossip_reference.h).
//
// Each algorithm is written on the matrix of all models, X (n rows), as its paper writes it
// (U: each row's local update, taken at X):
//   D-PSGD cta  X <- W X + U
//   D-PSGD atc  X <- W (X + U)
//   local       X <- X + U every step, X <- W X after every H-th
//   CHOCO       X' = X + U; Q_i = C(X'_i - Xhat_i); Xhat <- Xhat + Q;
//               X <- X' + gamma (W Xhat - Xhat)
//   DCD         X' = W X + U; X <- X + C(X' - X)
//   ECD         X' = W Y + U; Z = (1 - t/2) X + (t/2) X'; Y <- (1 - 2/t) Y + (2/t) C(Z); X <- X'
//   SGP         Z = X / w; X <- X + (local(Z) - Z); X <- P X, w <- P w
//               (overlap: the shares of round r reach the others in round r + 1)
// with one copy per rank of every public vector (Xhat, Y), not the running sums the distributed
// algorithms keep. Sums over j are in double, in ascending j; shares and compressions are
// computed as the sender computes them (the same compressor, seed, rank and round).
#include "gossip/gossip_reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "frugal/check.h"
#include "frugal/random.h"
#include "strategy/thread_runner.h"

namespace frugal::gossip_test {
namespace {

using Matrix = std::vector<std::vector<float>>;

struct Tensor {
  const char* name;
  size_t offset;
  size_t numel;
};
constexpr Tensor kTensors[] = {{"w", 0, kW}, {"b", kW, kB}, {"bn", kW + kB, kBn}};

// Rank i's compression of v in round r, decoded: what every neighbour adds.
std::vector<float> Compress(const Compressor* compressor, uint64_t seed, int rank, int n,
                            uint64_t round, std::span<const float> v) {
  static const std::unique_ptr<Compressor> none =
      DefaultCompressorRegistry().Create("none").value();
  CompressContext encode(seed, rank, n);
  encode.set_step(round);
  CompressContext decode(seed, rank, n);
  decode.set_step(round);
  std::vector<float> out(v.size(), 0.0f);
  for (const Tensor& t : kTensors) {
    const TensorInfo info(t.name, t.numel);
    const Compressor& c =
        compressor != nullptr && t.numel * sizeof(float) >= kMinBytes ? *compressor : *none;
    std::vector<std::byte> payload;
    FRUGAL_CHECK(c.Encode(v.subspan(t.offset, t.numel), info, encode, payload).ok());
    FRUGAL_CHECK(
        c.Decode(payload, info, decode, std::span<float>(out).subspan(t.offset, t.numel)).ok());
  }
  return out;
}

// (W M)_i in double, ascending j.
std::vector<double> MixRow(const MixingMatrix& w, uint64_t round, int i, const Matrix& m) {
  std::vector<double> acc(kTotal, 0.0);
  for (int j = 0; j < w.size(); ++j) {
    const double weight = w.Weight(i, j, round);
    if (weight == 0) continue;
    for (size_t e = 0; e < kTotal; ++e) acc[e] += weight * static_cast<double>(m[j][e]);
  }
  return acc;
}

Matrix Locals(const ReferenceConfig& config, const Matrix& x, uint64_t step) {
  Matrix out = x;
  for (size_t i = 0; i < out.size(); ++i)
    LocalStep(config.local, static_cast<int>(i), step, out[i]);
  return out;
}

}  // namespace

void LocalStep(const LocalStepOptions& options, int rank, uint64_t step, std::span<float> x) {
  RngStream rng(RngKey{options.seed, rank, step, TensorId("test/noise")});
  for (size_t e = 0; e < x.size(); ++e) {
    const float b = static_cast<float>(rank + 1) * 0.5f + static_cast<float>(e % 13) * 0.1f;
    const float noise = options.noise * (rng.Uniform() - 0.5f);
    x[e] = x[e] - options.lr * (x[e] - b) + noise;
  }
}

std::vector<float> InitialModel(int rank, Initial initial) {
  std::vector<float> x(kTotal);
  if (initial == Initial::kIntegers) {
    for (size_t e = 0; e < kTotal; ++e) x[e] = static_cast<float>(rank * 16 + e % 7);
    return x;
  }
  RngStream rng(
      RngKey{11, initial == Initial::kPerRank ? rank : kAnyRank, 0, TensorId("test/initial")});
  for (float& v : x) v = 2 * rng.Uniform() - 1;
  return x;
}

std::vector<std::vector<float>> RunReference(const ReferenceConfig& config, int n, int steps) {
  const StrategyPlan plan = PlanOf(config, n).value();
  const Topology topology = Topology::Make(config.spec.topology, n, plan.seed).value();
  const MixingMatrix w = MixingMatrix::Make(topology, MixingOf(config.spec, topology)).value();
  std::unique_ptr<Compressor> compressor;
  if (!config.compress.empty())
    compressor = DefaultCompressorRegistry().Create(config.compress).value();
  Matrix x(n);
  for (int i = 0; i < n; ++i) x[i] = InitialModel(i, config.initial);
  const GossipAlgorithm algorithm = config.spec.algorithm;

  if (config.sync.kind == SyncKind::kLocal) {
    const int period = static_cast<int>(config.sync.period);
    for (int s = 0; s < steps; ++s) {
      x = Locals(config, x, s);
      if ((s + 1) % period != 0) continue;
      const uint64_t round = (s + 1) / period - 1;
      Matrix mixed(n);
      for (int i = 0; i < n; ++i) {
        const std::vector<double> acc = MixRow(w, round, i, x);
        mixed[i].assign(acc.begin(), acc.end());
      }
      x = mixed;
    }
    return x;
  }

  if (algorithm == GossipAlgorithm::kDpsgd) {
    for (int s = 0; s < steps; ++s) {
      const Matrix after = Locals(config, x, s);
      Matrix next(n, std::vector<float>(kTotal));
      for (int i = 0; i < n; ++i) {
        const std::vector<double> acc = MixRow(w, s, i, config.spec.atc ? after : x);
        for (size_t e = 0; e < kTotal; ++e) {
          next[i][e] = config.spec.atc
                           ? static_cast<float>(acc[e])
                           : static_cast<float>(acc[e] + (static_cast<double>(after[i][e]) -
                                                          static_cast<double>(x[i][e])));
        }
      }
      x = next;
    }
    return x;
  }

  if (algorithm == GossipAlgorithm::kChoco) {
    Matrix xhat(n, std::vector<float>(kTotal, 0.0f));
    for (int s = 0; s < steps; ++s) {
      const Matrix half = Locals(config, x, s);
      for (int i = 0; i < n; ++i) {
        std::vector<float> d(kTotal);
        for (size_t e = 0; e < kTotal; ++e) d[e] = half[i][e] - xhat[i][e];
        const std::vector<float> q = Compress(compressor.get(), plan.seed, i, n, s, d);
        for (size_t e = 0; e < kTotal; ++e) xhat[i][e] += q[e];
      }
      for (int i = 0; i < n; ++i) {
        const std::vector<double> mix = MixRow(w, s, i, xhat);
        for (size_t e = 0; e < kTotal; ++e) {
          x[i][e] = static_cast<float>(half[i][e] + config.spec.gamma * (mix[e] - xhat[i][e]));
        }
      }
    }
    return x;
  }

  if (algorithm == GossipAlgorithm::kDcd || algorithm == GossipAlgorithm::kEcd) {
    const bool ecd = algorithm == GossipAlgorithm::kEcd;
    Matrix y = x;  // ECD's estimates; DCD's neighbours hold the models themselves
    for (int s = 0; s < steps; ++s) {
      const Matrix after = Locals(config, x, s);
      const double t = s + 1.0;
      Matrix next(n, std::vector<float>(kTotal));
      Matrix c(n);
      for (int i = 0; i < n; ++i) {
        const std::vector<double> mix = MixRow(w, s, i, ecd ? y : x);
        std::vector<float> z(kTotal);
        for (size_t e = 0; e < kTotal; ++e) {
          const double u = static_cast<double>(after[i][e]) - x[i][e];
          next[i][e] = static_cast<float>(mix[e] + u);
          z[e] = ecd ? static_cast<float>((1 - t / 2) * x[i][e] + (t / 2) * next[i][e])
                     : static_cast<float>(mix[e] + u - x[i][e]);
        }
        c[i] = Compress(compressor.get(), plan.seed, i, n, s, z);
      }
      for (int i = 0; i < n; ++i) {
        for (size_t e = 0; e < kTotal; ++e) {
          if (ecd) {
            y[i][e] = static_cast<float>((1 - 2 / t) * y[i][e] + (2 / t) * c[i][e]);
            x[i][e] = next[i][e];
          } else {
            x[i][e] += c[i][e];
          }
        }
      }
    }
    return x;
  }

  // SGP: numerators x, weights.
  FRUGAL_CHECK(algorithm == GossipAlgorithm::kSgp, "no reference for this algorithm");
  std::vector<float> weight(n, 1.0f);
  // shares[i][j]: what rank j pushed to rank i in the previous round (overlap).
  std::vector<std::vector<std::pair<int, std::vector<float>>>> in_flight(n);
  auto debias = [&](int i) {
    std::vector<float> z(kTotal);
    for (size_t e = 0; e < kTotal; ++e)
      z[e] = static_cast<float>(x[i][e] / static_cast<double>(weight[i]));
    return z;
  };
  auto combine = [&](int i, std::vector<std::pair<int, std::vector<float>>> shares) {
    std::sort(shares.begin(), shares.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<double> acc(kTotal, 0.0);
    double wsum = 0;
    for (const auto& [j, share] : shares) {
      wsum += share[0];
      for (size_t e = 0; e < kTotal; ++e) acc[e] += share[1 + e];
    }
    for (size_t e = 0; e < kTotal; ++e) x[i][e] = static_cast<float>(acc[e]);
    weight[i] = static_cast<float>(wsum);
  };
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<std::pair<int, std::vector<float>>>> pushed(n);
    for (int i = 0; i < n; ++i) {
      const std::vector<float> z = debias(i);
      std::vector<float> after = z;
      LocalStep(config.local, i, s, after);
      for (size_t e = 0; e < kTotal; ++e) {
        x[i][e] = static_cast<float>(static_cast<double>(x[i][e]) +
                                     (static_cast<double>(after[e]) - z[e]));
      }
      for (int j = 0; j < n; ++j) {
        const double p = w.Weight(j, i, s);  // the share i pushes to j
        if (p == 0) continue;
        std::vector<float> share(1 + kTotal);
        share[0] = static_cast<float>(p * weight[i]);
        for (size_t e = 0; e < kTotal; ++e) share[1 + e] = static_cast<float>(p * x[i][e]);
        pushed[j].emplace_back(i, std::move(share));
      }
    }
    for (int i = 0; i < n; ++i) {
      if (!config.spec.overlap) {
        combine(i, pushed[i]);
        continue;
      }
      std::vector<std::pair<int, std::vector<float>>> shares = in_flight[i];
      for (auto& [j, share] : pushed[i]) {
        if (j == i) shares.emplace_back(j, share);
      }
      combine(i, shares);
      in_flight[i].clear();
      for (auto& [j, share] : pushed[i]) {
        if (j != i) in_flight[i].emplace_back(j, share);
      }
    }
  }
  // Settle: the last round's shares arrive.
  for (int i = 0; i < n; ++i) {
    if (!config.spec.overlap || in_flight[i].empty()) continue;
    std::vector<float> own(1 + kTotal);
    own[0] = weight[i];
    std::copy(x[i].begin(), x[i].end(), own.begin() + 1);
    std::vector<std::pair<int, std::vector<float>>> shares = in_flight[i];
    shares.emplace_back(i, own);
    combine(i, shares);
  }
  for (int i = 0; i < n; ++i) x[i] = debias(i);
  return x;
}

StatusOr<StrategyPlan> PlanOf(const ReferenceConfig& config, int workers) {
  StrategyOptions options;
  options.arch = "gossip:" + GossipSpecName(config.spec);
  options.sync = SyncSpecName(config.sync);
  options.compress = config.compress;
  if (!config.compress.empty()) options.compress_min_bytes = kMinBytes;
  options.workers = workers;
  options.seed = config.seed;
  options.timeout = std::chrono::seconds(60);
  return PlanStrategy(options);
}

StatusOr<std::vector<float>> RunStrategy(
    const ReferenceConfig& config, Transport& t, int steps,
    std::vector<std::pair<std::string, std::vector<float>>>* state,
    std::vector<std::pair<std::string, double>>* report) {
  FRUGAL_ASSIGN_OR_RETURN(StrategyPlan plan, PlanOf(config, t.size()));
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<GradientReducer> reducer,
                          MakeStrategyReducer(plan, t, 0, DefaultCompressorRegistry()));
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> strategy, MakeStrategy(plan, t, *reducer));
  std::vector<float> x = InitialModel(t.rank(), config.initial);
  const std::span<float> all(x);
  ModelBuffers model;
  model.parameters = {{"w", all.subspan(0, kW)}, {"b", all.subspan(kW, kB)}};
  model.buffers = {{"bn", all.subspan(kW + kB, kBn)}};
  strategy_test::ThreadRunner runner(t);
  FRUGAL_RETURN_IF_ERROR(strategy->Begin(model));
  for (int s = 0; s < steps; ++s) {
    StepPoint p;
    p.step = static_cast<uint64_t>(s);
    p.steps_per_epoch = steps;
    p.step_in_epoch = s;
    if (strategy->ActsBeforeForward(p)) {
      FRUGAL_RETURN_IF_ERROR(strategy->BeforeForward(p, model, runner));
    }
    LocalStep(config.local, t.rank(), p.step, x);
    if (strategy->ExchangesAfterStep(p)) {
      FRUGAL_RETURN_IF_ERROR(strategy->AfterOptimizerStep(p, model, runner));
    }
  }
  FRUGAL_RETURN_IF_ERROR(strategy->Settle(model, runner));
  if (state != nullptr) {
    strategy->VisitState([&](std::string_view name, std::span<float> v) {
      state->emplace_back(std::string(name), std::vector<float>(v.begin(), v.end()));
    });
  }
  if (report != nullptr) {
    strategy->Report([&](std::string_view name, double v) { report->emplace_back(name, v); });
  }
  if (strategy->bytes_sent() != 0 && t.size() == 1) {
    return InternalError("a single rank sent gossip bytes");
  }
  return x;
}

}  // namespace frugal::gossip_test
