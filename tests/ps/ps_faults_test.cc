// Faults of a parameter-server job (tier 3, ranks as threads): a worker that dies, a server that
// dies, a server that never starts, a malformed message. Each ends the job on every rank with a
// message naming the rank.
#include <gtest/gtest.h>

#include "ps/messages.h"
#include "ps/ps_common.h"
#include "ps/ps_test_util.h"

namespace frugal::ps_test {
namespace {

constexpr Duration kShort = std::chrono::milliseconds(1000);

ServerOptimizer Plain() {
  ServerOptimizer opt;
  opt.lr = [](int64_t) { return 0.1; };
  return opt;
}

Status Steps(ParameterClient& client, Model& x, int from, int to) {
  for (int k = from; k < to; ++k) {
    std::vector<std::vector<float>> buffers = x.values;
    FRUGAL_RETURN_IF_ERROR(PushPull(client, x, k, buffers));
    x.values = buffers;
  }
  return Status::Ok();
}

bool Names(const Status& s, const std::string& what) {
  return s.message().find(what) != std::string::npos;
}

TEST(ParameterServerFaults, DeadWorkerEndsTheJobNamingIt) {
  const ParameterServerConfig config = Config(3, 1, 64, kShort);
  ClusterResult run = RunCluster(config, Plain(), SmallModel(),
                                 [&](int w, ParameterClient& client, Transport& group, Model& x) {
                                   FRUGAL_RETURN_IF_ERROR(Steps(client, x, 0, 2));
                                   if (w == 1) {
                                     MarkRankDead(group, "killed by the test");
                                     return Status::Ok();
                                   }
                                   return Steps(client, x, 2, 50);
                                 });
  const Status& server = run.statuses[3];
  EXPECT_FALSE(server.ok());
  EXPECT_TRUE(Names(server, "worker rank 1")) << server.ToString();
  for (int w : {0, 2}) {
    EXPECT_FALSE(run.statuses[w].ok());
    EXPECT_TRUE(Names(run.statuses[w], "rank 1")) << run.statuses[w].ToString();
  }
}

TEST(ParameterServerFaults, DeadServerEndsTheJobNamingIt) {
  const ParameterServerConfig config = Config(2, 2, 64, kShort);
  InProcOptions inproc;
  InProcFault kill;
  kill.kind = InProcFaultKind::kKill;
  kill.src = 3;
  kill.tag = ps_internal::kToWorkerTag;
  kill.first = 30;  // after the welcomes and some answers
  inproc.faults.push_back(kill);
  ClusterResult run = RunCluster(
      config, Plain(), SmallModel(),
      [&](int, ParameterClient& client, Transport&, Model& x) { return Steps(client, x, 0, 100); },
      inproc);
  for (int w : {0, 1}) {
    EXPECT_FALSE(run.statuses[w].ok());
    EXPECT_TRUE(Names(run.statuses[w], "server rank 3")) << run.statuses[w].ToString();
  }
  EXPECT_FALSE(run.statuses[3].ok());
}

TEST(ParameterServerFaults, ServerThatNeverStartsIsNamed) {
  const ParameterServerConfig config = Config(2, 2, 64, kShort);
  const int world_size = 4;
  InProcWorld world(world_size);
  std::vector<Status> statuses = RunRanks(world, [&](Transport& t) -> Status {
    const bool server = t.rank() >= 2;
    FRUGAL_ASSIGN_OR_RETURN(auto group, t.Split(server ? 1 : 0, t.rank(), kShort));
    if (t.rank() == 3) return Status::Ok();  // never serves
    if (server) return RunParameterServer(t, config, Plain(), Logger(LogLevel::kOff));
    Model x = SmallModel();
    std::vector<std::pair<std::string, std::span<const float>>> params;
    for (size_t i = 0; i < x.names.size(); ++i) params.emplace_back(x.names[i], x.values[i]);
    return ParameterClient::Connect(t, *group, config, params).status();
  });
  for (int w : {0, 1}) {
    EXPECT_EQ(statuses[w].code(), StatusCode::kTimeout) << statuses[w].ToString();
    EXPECT_TRUE(Names(statuses[w], "no welcome from server rank 3")) << statuses[w].ToString();
  }
  EXPECT_FALSE(statuses[2].ok());
}

// A worker whose model differs from the others' is refused at the hello, naming both.
TEST(ParameterServerFaults, DifferentModelsAreRefused) {
  const ParameterServerConfig config = Config(2, 1, 64, kShort);
  const int world_size = 3;
  InProcWorld world(world_size);
  std::vector<Status> statuses = RunRanks(world, [&](Transport& t) -> Status {
    const bool server = t.rank() == 2;
    FRUGAL_ASSIGN_OR_RETURN(auto group, t.Split(server ? 1 : 0, t.rank(), kShort));
    if (server) return RunParameterServer(t, config, Plain(), Logger(LogLevel::kOff));
    Model x = SmallModel();
    if (t.rank() == 1) x.values[2].resize(10);
    std::vector<std::pair<std::string, std::span<const float>>> params;
    for (size_t i = 0; i < x.names.size(); ++i) params.emplace_back(x.names[i], x.values[i]);
    return ParameterClient::Connect(t, *group, config, params).status();
  });
  EXPECT_FALSE(statuses[2].ok());
  EXPECT_TRUE(Names(statuses[2], "differs from worker rank")) << statuses[2].ToString();
  for (int w : {0, 1}) EXPECT_FALSE(statuses[w].ok()) << w;
}

// A message corrupted on the way (one bit of worker 1's hello) is refused by the server, which
// names the sender and tells the workers.
TEST(ParameterServerFaults, CorruptedMessageFailsTheJob) {
  const ParameterServerConfig config = Config(2, 1, 1 << 20, kShort);
  InProcOptions inproc;
  InProcFault corrupt;
  corrupt.kind = InProcFaultKind::kCorrupt;
  corrupt.src = 1;
  corrupt.tag = ps_internal::kToServerTag;
  corrupt.first = 0;
  corrupt.count = 1;
  corrupt.seed = 3;
  inproc.faults.push_back(corrupt);
  ClusterResult run = RunCluster(
      config, Plain(), SmallModel(),
      [&](int, ParameterClient& client, Transport&, Model& x) { return Steps(client, x, 0, 20); },
      inproc);
  EXPECT_EQ(run.statuses[2].code(), StatusCode::kMalformed) << run.statuses[2].ToString();
  EXPECT_TRUE(Names(run.statuses[2], "worker rank 1")) << run.statuses[2].ToString();
  for (int w : {0, 1}) {
    EXPECT_TRUE(Names(run.statuses[w], "worker rank 1")) << run.statuses[w].ToString();
  }
}

}  // namespace
}  // namespace frugal::ps_test
