// `frugal sweep` end to end with the real `frugal train`: bad sweep files (and bad `train
// --config` files) are refused with one line and exit code 2 before anything runs;
// sweeps/quick.toml runs, resumes without running again, and renders its table and plots.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "child_process.h"
#include "emulation/frugal_cli_paths.h"
#include "frugal/logging.h"
#include "sweep_results.h"
#include "sweep_run.h"

namespace frugal::apps {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class SweepCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("frugal-sweep-cli-test-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CommandResult Frugal(std::vector<std::string> args, int timeout_s = 60) {
    args.insert(args.begin(), FRUGAL_CLI_PATH);
    RunCommandOptions options;
    options.timeout = std::chrono::seconds(timeout_s);
    auto r = RunCommand(args, options);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : CommandResult{};
  }

  fs::path Write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }

  fs::path dir_;
};

TEST_F(SweepCli, BadSweepFilesAreRefusedBeforeAnythingRuns) {
  struct Case {
    std::string text;
    const char* says;
  };
  const std::string head = "name = \"bad\"\n[base]\nnp = 2\nmax-steps = 1\n";
  for (const Case& c : {
           Case{head + "[axes]\nlrr = [0.1]\n",
                "point 0 (lrr=0.1): The following argument was "
                "not expected: --lrr=0.1"},
           Case{head + "[axes]\nmodel = [\"mlp\", \"resnet99\"]\n",
                "point 1 (model=resnet99): unknown model 'resnet99'"},
           Case{head + "[axes]\nepochs = [\"many\"]\n", "Could not convert"},
           Case{head + "[axes]\nlr = []\n", "[axes] lr is empty"},
           Case{"colour = 1\n" + head + "[axes]\nlr = [0.1]\n", "bad.toml:1: unknown key 'colour'"},
           Case{"name = \"bad\"\n[base]\nnp = 3\nemulate = \"hosts=2,nic=1gbit\"\n[axes]\n"
                "lr = [0.1]\n",
                "does not spread evenly over 2 emulated hosts"},
       }) {
    fs::path file = Write("bad.toml", c.text);
    CommandResult r = Frugal({"sweep", file.string(), "--out", (dir_ / "out").string()});
    EXPECT_EQ(r.exit_code, 2) << c.text << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.says)) << c.text;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << "something ran for: " << c.text;
  }
}

// `frugal train --config` reads the same TOML as sweep files: values reach the options (a bad
// one is refused by the command's own check), the command line wins, and bad TOML, unknown keys
// and bad values are one line naming the file and the line, exit 2.
TEST_F(SweepCli, TrainConfigFileIsReadLikeSweepFiles) {
  struct Case {
    std::string text;
    std::vector<std::string> more;
    const char* says;
  };
  for (const Case& c : {
           Case{"[train]\nepochs = 1\nlr = 0\n", {}, "--lr must be > 0"},
           Case{"lr = 0\n", {"--lr", "0.1", "--model", "alexnet"}, "unknown model 'alexnet'"},
           Case{"epochs = 1\nlr =\n", {}, "train.toml:2:"},
           Case{"epochs = 1\nlrr = 0.1\n", {}, "train.toml:2: unknown key 'lrr'"},
           Case{"[train]\nepochs = \"x\"\n", {}, "train.toml:2: bad value for 'epochs'"},
           Case{"[bench]\nsizes = 1\n", {}, "train.toml:1: unknown table [bench]"},
       }) {
    fs::path file = Write("train.toml", c.text);
    std::vector<std::string> args = {"train", "--config", file.string()};
    args.insert(args.end(), c.more.begin(), c.more.end());
    CommandResult r = Frugal(args);
    EXPECT_EQ(r.exit_code, 2) << c.text << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.says)) << c.text;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

// --only keeps the points with one of the given values of every axis it names; a value no point
// has is refused.
TEST_F(SweepCli, OnlySelectsPointsByAxisValue) {
  std::string quick = std::string(FRUGAL_SOURCE_DIR) + "/sweeps/quick.toml";
  CommandResult one = Frugal({"sweep", quick, "--dry-run", "--only", "allreduce=mpi"});
  EXPECT_EQ(one.exit_code, 0) << one.output;
  EXPECT_THAT(one.output, HasSubstr("2 points"));
  EXPECT_THAT(one.output, Not(HasSubstr("--allreduce=ring")));
  CommandResult both =
      Frugal({"sweep", quick, "--dry-run", "--only", "allreduce=mpi", "--only", "lr=0.05"});
  EXPECT_EQ(both.exit_code, 0) << both.output;
  EXPECT_THAT(both.output, HasSubstr("1 points"));
  EXPECT_THAT(both.output, Not(HasSubstr("--lr=0.1")));
  CommandResult either = Frugal({"sweep", quick, "--dry-run", "--only", "lr=0.05", "--only",
                                 "lr=0.1", "--only", "allreduce=ring"});
  EXPECT_EQ(either.exit_code, 0) << either.output;
  EXPECT_THAT(either.output, HasSubstr("2 points"));
  EXPECT_THAT(either.output, Not(HasSubstr("--allreduce=mpi")));
  CommandResult bad = Frugal({"sweep", quick, "--dry-run", "--only", "allreduce=tree"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("--only allreduce=tree: no point has it"));
}

// The long sweeps are not run in CI, but every shipped file must stay valid: --dry-run checks
// each point's flags and compressor specification against `frugal train` without running it.
TEST_F(SweepCli, QuickSweepRunsResumesAndRenders) {
  std::string quick = std::string(FRUGAL_SOURCE_DIR) + "/sweeps/quick.toml";
  fs::path out = dir_ / "quick";
  CommandResult dry = Frugal({"sweep", quick, "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_THAT(dry.output, HasSubstr("4 points"));

  CommandResult run = Frugal({"sweep", quick, "--out", out.string()}, 900);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  Logger quiet(LogLevel::kError);
  auto records = ReadResults(out / "results.jsonl", quiet);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 4u);
  for (const auto& r : *records) {
    ASSERT_TRUE(IsCompleted(r)) << r.dump();
    // 150 steps of an MLP on Fashion-MNIST are far above chance (10%).
    EXPECT_GT(r["summary"]["test_accuracy"].get<double>(), 0.6) << r.dump();
    EXPECT_EQ(r["summary"]["workers"].get<int>(), 2) << r.dump();
    EXPECT_GE(r["epochs"].size(), 1u);
  }
  std::ifstream table_in(out / "table.md");
  std::string table((std::istreambuf_iterator<char>(table_in)), {});
  EXPECT_THAT(table, HasSubstr("| allreduce | lr=0.05 | lr=0.1 |"));
  EXPECT_THAT(table, HasSubstr("| ring |"));
  EXPECT_THAT(table, HasSubstr("| mpi |"));
  for (const char* kind : {"epoch", "time", "bytes"}) {
    fs::path png = out / fmt::format("accuracy_vs_{}_all.png", kind);
    EXPECT_TRUE(fs::exists(png)) << png;
  }

  // Resume: everything is there, nothing runs.
  CommandResult again = Frugal({"sweep", quick, "--out", out.string()}, 120);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("4 already in"));
  EXPECT_THAT(again.output, HasSubstr("0 to run"));
  records = ReadResults(out / "results.jsonl", quiet);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(records->size(), 4u);
}

}  // namespace
}  // namespace frugal::apps
