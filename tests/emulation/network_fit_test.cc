// ReadNetworkFit: the alpha-beta-gamma record of `frugal bench allreduce --json` (--fit FILE);
// ReadRoundFit: the round rate of `frugal bench round --json` (--fit-round FILE).
// ReadDuplexFit: the duplex share of `frugal bench exchange --json` (--fit-duplex FILE).
#include "network_fit.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace frugal::apps {
namespace {

namespace fs = std::filesystem;

std::string Write(const std::string& name, const std::string& text) {
  const fs::path path = fs::path(::testing::TempDir()) / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(NetworkFit, ReadsTheFirstRecordWithAlphaAndBeta) {
  const std::string path =
      Write("fit_ok.jsonl",
            "{\"bench\":\"pingpong\"}\n"
            "{\"algorithm\":\"ring\",\"alpha_us\":120.5,\"beta_s_per_byte\":8e-9,"
            "\"gamma_s_per_byte\":2e-10}\n"
            "{\"algorithm\":\"ring\",\"alpha_us\":1,\"beta_s_per_byte\":1e-9}\n");
  auto fit = ReadNetworkFit(path);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_DOUBLE_EQ(fit->alpha_s, 120.5e-6);
  EXPECT_DOUBLE_EQ(fit->beta_s_per_byte, 8e-9);
  EXPECT_DOUBLE_EQ(fit->gamma_s_per_byte, 2e-10);
}

TEST(NetworkFit, GammaIsOptional) {
  auto fit =
      ReadNetworkFit(Write("fit_nogamma.jsonl", "{\"alpha_us\":0,\"beta_s_per_byte\":1e-8}\n"));
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_EQ(fit->gamma_s_per_byte, 0.0);
}

TEST(NetworkFit, RefusesWhatIsNotAFit) {
  auto missing = ReadNetworkFit((fs::path(::testing::TempDir()) / "no_such_fit.jsonl").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto none = ReadNetworkFit(Write("fit_none.jsonl", "not json\n{\"alpha_us\":\"5\"}\n{}\n"));
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("no record with alpha_us and beta_s_per_byte"),
            std::string::npos)
      << none.status().message();
  auto zero = ReadNetworkFit(Write("fit_zero.jsonl", "{\"alpha_us\":5,\"beta_s_per_byte\":0}\n"));
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  auto negative =
      ReadNetworkFit(Write("fit_negative.jsonl", "{\"alpha_us\":-1,\"beta_s_per_byte\":1e-9}\n"));
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
}

TEST(RoundFit, TakesTheFreeRunningRecordOfTheGraphAndRanksWithTheLargestMessage) {
  const std::string path =
      Write("round_ok.jsonl",
            "{\"bench\":\"exchange\",\"bytes\":4000000,\"round_bytes_per_s\":1}\n"
            "{\"bench\":\"round\",\"topology\":\"ring\",\"ranks\":4,\"bytes\":1048576,"
            "\"round_bytes_per_s\":9e6}\n"
            "{\"bench\":\"round\",\"topology\":\"ring\",\"ranks\":4,\"bytes\":1819688,"
            "\"round_bytes_per_s\":9.5e6,\"copy_bytes_per_s\":4.5e9}\n"
            "{\"bench\":\"round\",\"topology\":\"ring\",\"ranks\":4,\"lockstep\":true,"
            "\"bytes\":4194304,\"round_bytes_per_s\":1.1e7}\n"
            "{\"bench\":\"round\",\"topology\":\"ring\",\"ranks\":8,\"bytes\":4194304,"
            "\"round_bytes_per_s\":7e6}\n"
            "{\"bench\":\"round\",\"topology\":\"onepeer-exp\",\"ranks\":4,\"bytes\":1819688,"
            "\"round_bytes_per_s\":8e6}\n");
  auto ring = ReadRoundFit(path, "ring", 4);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  EXPECT_DOUBLE_EQ(ring->round_bytes_per_s, 9.5e6);
  EXPECT_DOUBLE_EQ(ring->copy_bytes_per_s, 4.5e9);
  auto ring8 = ReadRoundFit(path, "ring", 8);
  ASSERT_TRUE(ring8.ok()) << ring8.status().ToString();
  EXPECT_DOUBLE_EQ(ring8->round_bytes_per_s, 7e6);
  EXPECT_DOUBLE_EQ(ring8->copy_bytes_per_s, 0);  // a record without a copy rate
  auto one_peer = ReadRoundFit(path, "onepeer-exp", 4);
  ASSERT_TRUE(one_peer.ok()) << one_peer.status().ToString();
  EXPECT_DOUBLE_EQ(one_peer->round_bytes_per_s, 8e6);
}

TEST(RoundFit, RefusesWhatDoesNotMatch) {
  auto missing =
      ReadRoundFit((fs::path(::testing::TempDir()) / "no_such_round.jsonl").string(), "ring", 4);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  const std::string path =
      Write("round_other.jsonl",
            "{\"bench\":\"round\",\"topology\":\"ring\",\"ranks\":4,\"bytes\":1000,"
            "\"round_bytes_per_s\":9e6}\n");
  auto other_graph = ReadRoundFit(path, "exp", 4);
  EXPECT_EQ(other_graph.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other_graph.status().message().find("no record of topology exp over 4 ranks"),
            std::string::npos)
      << other_graph.status().message();
  EXPECT_EQ(ReadRoundFit(path, "ring", 8).status().code(), StatusCode::kInvalidArgument);
  auto zero = ReadRoundFit(Write("round_zero.jsonl",
                                 "{\"bench\":\"round\",\"topology\":\"ring\",\"ranks\":4,"
                                 "\"bytes\":1000,\"round_bytes_per_s\":0}\n"),
                           "ring", 4);
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  auto negative_copy = ReadRoundFit(Write("round_negative_copy.jsonl",
                                          "{\"bench\":\"round\",\"topology\":\"ring\","
                                          "\"ranks\":4,\"bytes\":1000,\"round_bytes_per_s\":9e6,"
                                          "\"copy_bytes_per_s\":-1}\n"),
                                    "ring", 4);
  EXPECT_EQ(negative_copy.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(negative_copy.status().message().find("copy_bytes_per_s must be finite and >= 0"),
            std::string::npos)
      << negative_copy.status().message();
}

TEST(DuplexFit, InvertsBothOverOneWayOfEachMessageSizeAndCapsAtOne) {
  const std::string path =
      Write("duplex_ok.jsonl",
            "{\"bench\":\"exchange\",\"bytes\":4194304,\"mode\":\"send\",\"seconds\":0.4}\n"
            "{\"bench\":\"exchange\",\"bytes\":4194304,\"mode\":\"both\","
            "\"both_over_one_way\":1.25}\n"
            "{\"bench\":\"exchange\",\"bytes\":131072,\"mode\":\"both\","
            "\"both_over_one_way\":3}\n"
            "{\"bench\":\"exchange\",\"bytes\":1048576,\"mode\":\"both\","
            "\"both_over_one_way\":1.6}\n"
            "{\"bench\":\"round\",\"bytes\":8388608,\"mode\":\"both\","
            "\"both_over_one_way\":2}\n"
            // A later record of a size replaces the earlier one.
            "{\"bench\":\"exchange\",\"bytes\":131072,\"mode\":\"both\","
            "\"both_over_one_way\":2}\n");
  auto shares = ReadDuplexFit(path);
  ASSERT_TRUE(shares.ok()) << shares.status().ToString();
  ASSERT_EQ(shares->size(), 3u);
  EXPECT_DOUBLE_EQ((*shares)[0].bytes, 131072);
  EXPECT_DOUBLE_EQ((*shares)[0].share, 0.5);
  EXPECT_DOUBLE_EQ((*shares)[1].bytes, 1048576);
  EXPECT_DOUBLE_EQ((*shares)[1].share, 0.625);
  EXPECT_DOUBLE_EQ((*shares)[2].bytes, 4194304);
  EXPECT_DOUBLE_EQ((*shares)[2].share, 0.8);
  // Both ways faster than one (noise on a full-duplex link): each direction keeps the whole NIC.
  auto faster = ReadDuplexFit(Write("duplex_faster.jsonl",
                                    "{\"bench\":\"exchange\",\"bytes\":1000,\"mode\":\"both\","
                                    "\"both_over_one_way\":0.9}\n"));
  ASSERT_TRUE(faster.ok()) << faster.status().ToString();
  ASSERT_EQ(faster->size(), 1u);
  EXPECT_DOUBLE_EQ(faster->front().share, 1.0);
}

TEST(DuplexFit, RefusesWhatDoesNotMatch) {
  auto missing = ReadDuplexFit((fs::path(::testing::TempDir()) / "no_such_duplex.jsonl").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  // Only one-way records (`--modes send`): nothing to compare with.
  auto one_way = ReadDuplexFit(
      Write("duplex_one_way.jsonl",
            "{\"bench\":\"exchange\",\"bytes\":1000,\"mode\":\"send\",\"seconds\":0.1}\n"));
  EXPECT_EQ(one_way.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(one_way.status().message().find("no record of both directions at once"),
            std::string::npos)
      << one_way.status().message();
  auto zero = ReadDuplexFit(Write("duplex_zero.jsonl",
                                  "{\"bench\":\"exchange\",\"bytes\":1000,\"mode\":\"both\","
                                  "\"both_over_one_way\":0}\n"));
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("both_over_one_way must be finite and > 0"),
            std::string::npos)
      << zero.status().message();
}

}  // namespace
}  // namespace frugal::apps
