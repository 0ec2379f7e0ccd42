// ReadNetworkFit: the alpha-beta-gamma record of `frugal bench allreduce --json` (--fit FILE).
#include "network_fit.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace frugal::apps {
namespace {

namespace fs = std::filesystem;

std::string Write(const std::string& name, const std::string& text) {
  const fs::path path = fs::path(testing::TempDir()) / name;
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
  auto missing = ReadNetworkFit((fs::path(testing::TempDir()) / "no_such_fit.jsonl").string());
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

}  // namespace
}  // namespace frugal::apps
