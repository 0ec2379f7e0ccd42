// The parameter server with bsp, against a serial reference: every step the servers apply SGD
// (momentum, weight decay) with the average of the workers' gradients, over 1-4 servers and parts
// small enough that tensors are cut.
#include <gtest/gtest.h>

#include <cmath>

#include "ps/ps_test_util.h"
#include "ps/server_optimizer.h"

namespace frugal::ps_test {
namespace {

// Worker w's gradient of tensor t at step k: it depends on the parameters, so a worker that
// used stale or wrong parameters would be seen.
float Gradient(int w, size_t t, size_t i, uint64_t k, float x) {
  return (x - 0.05f * static_cast<float>(w + 1)) * 0.5f +
         0.01f * static_cast<float>((k + 1) * (t + 1)) - 0.001f * static_cast<float>(i % 5);
}

ServerOptimizer Sgd() {
  ServerOptimizer opt;
  opt.lr = [](int64_t step) { return step < 3 ? 0.1 : 0.05; };  // a schedule by server step
  opt.momentum = 0.9;
  opt.weight_decay = 0.001;
  return opt;
}

// The serial computation: the average over workers of their gradients, then SGD.
Model Reference(const Model& initial, int workers, int steps) {
  Model x = initial;
  std::vector<ps_internal::KeyOptimizerState> state(x.values.size());
  for (int k = 0; k < steps; ++k) {
    for (size_t t = 0; t < x.values.size(); ++t) {
      std::vector<float> avg(x.values[t].size(), 0.0f);
      for (size_t i = 0; i < avg.size(); ++i) {
        float sum = 0;
        for (int w = 0; w < workers; ++w) sum += Gradient(w, t, i, k, x.values[t][i]);
        avg[i] = sum / static_cast<float>(workers);
      }
      ps_internal::ApplySgd(Sgd(), Sgd().lr(k), x.values[t], avg, state[t]);
    }
  }
  return x;
}

Status TrainSteps(int w, ParameterClient& client, Model& x, int steps) {
  for (int k = 0; k < steps; ++k) {
    std::vector<std::vector<float>> buffers = x.values;
    for (size_t t = 0; t < buffers.size(); ++t) {
      for (size_t i = 0; i < buffers[t].size(); ++i) {
        buffers[t][i] = Gradient(w, t, i, k, x.values[t][i]);
      }
    }
    FRUGAL_RETURN_IF_ERROR(PushPull(client, x, k, buffers));
    x.values = buffers;
  }
  return Status::Ok();
}

TEST(ParameterServerBsp, EqualsTheSerialReference) {
  constexpr int kSteps = 6;
  const Model initial = SmallModel();
  for (int servers : {1, 2, 3, 4}) {
    for (int workers : {1, 2, 3}) {
      for (size_t part_bytes : {size_t{64}, size_t{1} << 20}) {
        const ParameterServerConfig config = Config(workers, servers, part_bytes);
        std::vector<Model> finals(static_cast<size_t>(workers));
        ClusterResult run = RunCluster(config, Sgd(), initial,
                                       [&](int w, ParameterClient& client, Transport&, Model& x) {
                                         FRUGAL_RETURN_IF_ERROR(TrainSteps(w, client, x, kSteps));
                                         finals[static_cast<size_t>(w)] = x;
                                         return Status::Ok();
                                       });
        const std::string where = "servers=" + std::to_string(servers) +
                                  " workers=" + std::to_string(workers) +
                                  " part=" + std::to_string(part_bytes);
        for (size_t r = 0; r < run.statuses.size(); ++r) {
          ASSERT_TRUE(run.statuses[r].ok())
              << where << " rank " << r << ": " << run.statuses[r].ToString();
        }
        const Model expected = Reference(initial, workers, kSteps);
        for (int w = 0; w < workers; ++w) {
          for (size_t t = 0; t < expected.values.size(); ++t) {
            EXPECT_LT(MaxDifference(finals[w].values[t], expected.values[t]), 1e-5)
                << where << " worker " << w << " tensor " << t;
            // Every worker pulls every version: identical replicas, bit for bit.
            EXPECT_EQ(finals[w].values[t], finals[0].values[t]) << where;
          }
        }
        uint64_t updates = 0;
        for (const ServerReport& report : run.reports) {
          updates += report.updates;
          EXPECT_GT(report.bytes_in, 0u);
          EXPECT_GT(report.bytes_out, 0u);
        }
        // One update per key per step.
        size_t keys = 0;
        for (const ServerReport& report : run.reports) keys += report.key_names.size();
        EXPECT_EQ(updates, keys * kSteps) << where;
      }
    }
  }
}

// The servers' final values are the workers' last pull.
TEST(ParameterServerBsp, ServersHoldWhatTheWorkersPulled) {
  const Model initial = SmallModel();
  const ParameterServerConfig config = Config(2, 2, 64);
  Model final0;
  ClusterResult run =
      RunCluster(config, Sgd(), initial, [&](int w, ParameterClient& client, Transport&, Model& x) {
        FRUGAL_RETURN_IF_ERROR(TrainSteps(w, client, x, 3));
        if (w == 0) final0 = x;
        return Status::Ok();
      });
  for (const Status& s : run.statuses) ASSERT_TRUE(s.ok()) << s.ToString();
  size_t checked = 0;
  for (const ServerReport& report : run.reports) {
    for (size_t k = 0; k < report.key_names.size(); ++k) {
      const std::string& name = report.key_names[k];
      const std::string tensor = name.substr(0, name.find('#'));
      const size_t t = static_cast<size_t>(std::stoi(tensor.substr(1)));
      // Find the part's offset by matching its values inside the tensor.
      const std::vector<float>& part = report.key_values[k];
      const std::vector<float>& whole = final0.values[t];
      bool found = false;
      for (size_t off = 0; off + part.size() <= whole.size() && !found; ++off) {
        found = std::equal(part.begin(), part.end(), whole.begin() + static_cast<long>(off));
      }
      EXPECT_TRUE(found) << name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 5u);
}

}  // namespace
}  // namespace frugal::ps_test
