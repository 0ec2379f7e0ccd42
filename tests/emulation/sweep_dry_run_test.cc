// Every sweep file shipped under sweeps/ passes `frugal sweep --dry-run` (parsed, expanded into
// points, each point's command line checked). A dry run starts no job, so this suite runs beside
// the jobs (label `single`, no `jobs` lock).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "child_process.h"
#include "emulation/frugal_cli_paths.h"

namespace frugal::apps {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(SweepDryRun, EveryShippedSweepFilePasses) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(FRUGAL_SOURCE_DIR) / "sweeps")) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    RunCommandOptions options;
    options.timeout = std::chrono::seconds(60);
    auto r = RunCommand({FRUGAL_CLI_PATH, "sweep", entry.path().string(), "--dry-run"}, options);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->exit_code, 0) << entry.path() << ": " << r->output;
    EXPECT_THAT(r->output, HasSubstr(" points")) << entry.path();
  }
  EXPECT_GE(files, 5) << "sweeps/ should hold quick, compression_4w/8w, tta_cnn and tta_vgg";
}

}  // namespace
}  // namespace frugal::apps
