// A parameter-server job with ranks as threads: W workers (world ranks 0 .. W-1), each with a
// ParameterClient, and S servers (ranks W .. W+S-1) running RunParameterServer.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/parameter_server.h"

namespace frugal::ps_test {

inline constexpr Duration kWait = std::chrono::seconds(30);

struct Model {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;  // per tensor
};

inline Model SmallModel() {
  Model m;
  const size_t counts[] = {37, 5, 64, 1, 20};
  for (size_t t = 0; t < std::size(counts); ++t) {
    m.names.push_back(fmt::format("p{}", t));
    std::vector<float> v(counts[t]);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * static_cast<float>((t * 31 + i * 7) % 13);
    m.values.push_back(v);
  }
  return m;
}

inline ParameterServerConfig Config(int workers, int servers, size_t part_bytes,
                                    Duration timeout = kWait) {
  ParameterServerConfig config;
  for (int w = 0; w < workers; ++w) config.worker_ranks.push_back(w);
  for (int s = 0; s < servers; ++s) config.server_ranks.push_back(workers + s);
  config.part_bytes = part_bytes;
  config.timeout = timeout;
  return config;
}

// What a worker does once connected: `x` holds the model as the job started.
using WorkerFn =
    std::function<Status(int worker, ParameterClient& client, Transport& workers, Model& x)>;

struct ClusterResult {
  std::vector<Status> statuses;       // by world rank
  std::vector<ServerReport> reports;  // by server
};

// One rank of a job over `t` (world ranks as Config lays them out): a server runs its loop into
// `report`, a worker connects a client and runs `worker_fn`.
inline Status RunRank(Transport& t, const ParameterServerConfig& config,
                      const ServerOptimizer& optimizer, const Model& initial,
                      const WorkerFn& worker_fn, ServerReport* report,
                      const std::function<void(int server, Transport&)>& before_server = {}) {
  const bool server = t.rank() >= config.workers();
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Transport> group,
                          t.Split(server ? 1 : 0, t.rank(), config.timeout));
  if (server) {
    const int s = t.rank() - config.workers();
    if (before_server) before_server(s, t);
    return RunParameterServer(t, config, optimizer, Logger(LogLevel::kOff), report);
  }
  Model x = initial;
  std::vector<std::pair<std::string, std::span<const float>>> params;
  for (size_t i = 0; i < x.names.size(); ++i) params.emplace_back(x.names[i], x.values[i]);
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<ParameterClient> client,
                          ParameterClient::Connect(t, *group, config, params));
  Status status = worker_fn(t.rank(), *client, *group, x);
  Status shutdown = client->Shutdown();
  return status.ok() ? shutdown : status;
}

inline ClusterResult RunCluster(const ParameterServerConfig& config,
                                const ServerOptimizer& optimizer, const Model& initial,
                                const WorkerFn& worker_fn, InProcOptions inproc = {},
                                std::function<void(int server, Transport&)> before_server = {}) {
  ClusterResult result;
  result.reports.resize(static_cast<size_t>(config.servers()));
  const int world_size = config.workers() + config.servers();
  InProcWorld world(world_size, inproc);
  result.statuses = RunRanks(world, [&](Transport& t) -> Status {
    const int s = t.rank() - config.workers();
    return RunRank(t, config, optimizer, initial, worker_fn,
                   s >= 0 ? &result.reports[static_cast<size_t>(s)] : nullptr, before_server);
  });
  return result;
}

// Pushes `gradients` (one buffer per tensor, in place) at `step` and waits for the pulls: the
// buffers then hold the parameters the servers answered with.
inline Status PushPull(ParameterClient& client, const Model& model, uint64_t step,
                       std::vector<std::vector<float>>& gradients) {
  std::vector<std::unique_ptr<Work>> works;
  for (size_t t = model.names.size(); t-- > 0;) {  // as backward: last parameter first
    TensorRequest request;
    request.name = model.names[t];
    request.priority = static_cast<int>(t);
    request.step = step;
    works.push_back(client.Submit(request, gradients[t]));
  }
  for (auto& w : works) FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
  return Status::Ok();
}

inline double MaxDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return worst;
}

}  // namespace frugal::ps_test
