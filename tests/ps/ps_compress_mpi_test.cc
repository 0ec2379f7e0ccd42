// Tier 2: compressed pushes and pulls over the MPI transport across real processes (run with 3
// and 5 ranks, 1 or 2 of them servers), against the serial reference that every rank computes
// for itself (ps_compress_reference.h), bit for bit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mpi/mpi_test_main.h"
#include "ps/ps_compress_reference.h"

namespace frugal::ps_test {
namespace {

constexpr int kCompressMpiSteps = 4;

TEST(ParameterServerCompressMpi, MatchesTheReference) {
  const CompressCase cases[] = {
      {"topk:ratio=0.25", true, "qsgd:levels=8,bucket=16"},
      {"qsgd:levels=4,bucket=16", false, "topk:ratio=0.25"},
      {"efsign", false, "fp16"},
  };
  const Model initial = SmallModel();
  for (const CompressCase& c : cases) {
    for (int servers : {1, 2}) {
      auto world = mpitest::TestWorld();
      ASSERT_NE(world, nullptr);
      const int workers = world->size() - servers;
      if (workers < 1) continue;
      const ParameterServerConfig config = CompressConfig(workers, servers, 64, c);
      const std::string where = "push '" + c.push + "' pull '" + c.pull +
                                "' servers=" + std::to_string(servers) + " rank " +
                                std::to_string(world->rank());
      Model final_model;
      uint64_t push_bytes = 0;
      ServerReport report;
      const Status status = RunRank(
          *world, config, CompressSgd(), initial,
          [&](int w, ParameterClient& client, Transport&, Model& x) {
            FRUGAL_RETURN_IF_ERROR(CompressTrain(w, client, x, kCompressMpiSteps));
            final_model = x;
            push_bytes = client.push_bytes();
            return Status::Ok();
          },
          &report);
      ASSERT_TRUE(status.ok()) << where << ": " << status.ToString();
      const CompressExpected expected = CompressReference(initial, config, c, kCompressMpiSteps);
      if (world->rank() < workers) {
        EXPECT_EQ(final_model.values, expected.workers.values) << where;
        EXPECT_EQ(push_bytes, expected.push_bytes[static_cast<size_t>(world->rank())]) << where;
      } else {
        // This server's keys against the reference.
        ASSERT_FALSE(report.key_names.empty()) << where;
        for (size_t k = 0; k < report.key_names.size(); ++k) {
          auto it = expected.servers.find(report.key_names[k]);
          ASSERT_NE(it, expected.servers.end()) << where << " key " << report.key_names[k];
          EXPECT_EQ(report.key_values[k], it->second) << where << " key " << report.key_names[k];
        }
      }
    }
  }
}

}  // namespace
}  // namespace frugal::ps_test
