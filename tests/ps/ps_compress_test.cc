// Compressed pushes (worker error feedback) and pulls (server-side error feedback) against the
// serial reference of ps_compress_reference.h, bit for bit, over 1-3 servers and workers; the
// exact bytes of the pushes; the combinations that cannot work.
#include <gtest/gtest.h>

#include "ps/ps_compress_reference.h"

namespace frugal::ps_test {
namespace {

constexpr int kCompressSteps = 5;

void RunAgainstReference(const CompressCase& c) {
  const Model initial = SmallModel();
  for (int servers : {1, 3}) {
    for (int workers : {1, 3}) {
      for (size_t part_bytes : {size_t{64}, size_t{1} << 20}) {
        const ParameterServerConfig config = CompressConfig(workers, servers, part_bytes, c);
        const std::string where =
            "push '" + c.push + "' pull '" + c.pull + "' servers=" + std::to_string(servers) +
            " workers=" + std::to_string(workers) + " part=" + std::to_string(part_bytes);
        std::vector<Model> finals(static_cast<size_t>(workers));
        std::vector<uint64_t> push_bytes(static_cast<size_t>(workers));
        ClusterResult run =
            RunCluster(config, CompressSgd(), initial,
                       [&](int w, ParameterClient& client, Transport&, Model& x) {
                         FRUGAL_RETURN_IF_ERROR(CompressTrain(w, client, x, kCompressSteps));
                         finals[static_cast<size_t>(w)] = x;
                         push_bytes[static_cast<size_t>(w)] = client.push_bytes();
                         return Status::Ok();
                       });
        for (size_t r = 0; r < run.statuses.size(); ++r) {
          ASSERT_TRUE(run.statuses[r].ok())
              << where << " rank " << r << ": " << run.statuses[r].ToString();
        }
        const CompressExpected expected = CompressReference(initial, config, c, kCompressSteps);
        for (int w = 0; w < workers; ++w) {
          EXPECT_EQ(finals[w].values, expected.workers.values) << where << " worker " << w;
          EXPECT_EQ(push_bytes[w], expected.push_bytes[w]) << where << " worker " << w;
        }
        ExpectServersEqual(run.reports, expected, where);
      }
    }
  }
}

TEST(ParameterServerCompress, TopKPushesWithErrorFeedback) {
  RunAgainstReference({"topk:ratio=0.25", true, ""});
}

TEST(ParameterServerCompress, TopKPullsWithServerErrorFeedback) {
  RunAgainstReference({"", false, "topk:ratio=0.25"});
}

// QSGD both ways: stochastic rounding from the encoder's stream on either side.
TEST(ParameterServerCompress, QsgdBothWays) {
  RunAgainstReference({"qsgd:levels=4,bucket=16", false, "qsgd:levels=8,bucket=16"});
}

TEST(ParameterServerCompress, OneBitPushesAndFp16Pulls) {
  RunAgainstReference({"onebit", true, "fp16"});
}

// The reference is not trivially met: compressed pulls leave the workers somewhere else than
// dense ones would, and the servers' residual is not zero.
TEST(ParameterServerCompress, CompressionChangesTheResult) {
  const Model initial = SmallModel();
  const CompressCase dense{"", false, ""};
  const CompressCase both{"topk:ratio=0.25", true, "topk:ratio=0.25"};
  const size_t part = size_t{1} << 20;
  const CompressExpected a =
      CompressReference(initial, CompressConfig(2, 1, part, dense), dense, 3);
  const CompressExpected b = CompressReference(initial, CompressConfig(2, 1, part, both), both, 3);
  EXPECT_NE(a.workers.values, b.workers.values);
  EXPECT_LT(b.push_bytes[0], a.push_bytes[0]);
  EXPECT_EQ(a.server_residual, 0.0);
  EXPECT_GT(b.server_residual, 0.0);
}

Status ConnectOnly(const ParameterServerConfig& config) {
  const Model initial = SmallModel();
  ClusterResult run =
      RunCluster(config, CompressSgd(), initial,
                 [](int, ParameterClient&, Transport&, Model&) { return Status::Ok(); });
  for (const Status& s : run.statuses) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

TEST(ParameterServerCompress, RefusesCompressorsThatCombineRanks) {
  for (const char* spec : {"sign", "powersgd", "terngrad"}) {
    ParameterServerConfig config = CompressConfig(2, 1, 1 << 20, {spec, true, ""});
    config.timeout = std::chrono::seconds(2);
    Status s = ConnectOnly(config);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << spec << ": " << s.ToString();
    EXPECT_NE(s.message().find("decodes each worker's payload on its own"), std::string::npos)
        << s.ToString();
  }
}

TEST(ParameterServerCompress, RefusesCompressedPullsWhereWorkersSkipVersions) {
  for (PsConsistency consistency :
       {PsConsistency::kSsp, PsConsistency::kAsp, PsConsistency::kBackup}) {
    ParameterServerConfig config = CompressConfig(3, 1, 1 << 20, {"", false, "fp16"});
    config.consistency = consistency;
    config.staleness = 1;
    config.backup = 1;
    config.timeout = std::chrono::seconds(2);
    Status s = ConnectOnly(config);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("need every worker to pull every version"), std::string::npos)
        << s.ToString();
  }
}

}  // namespace
}  // namespace frugal::ps_test
