// Running sweeps: which points run, how a run's JSON becomes its record, the runner with resume
// and interruption, and the rendered table and plots. The runs are done by a small shell program
// that writes `frugal train --json` lines whose accuracy is a known function of the flags, so
// every number in the rendered table can be checked.
#include "sweep_run.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "sweep_report.h"
#include "sweep_results.h"
#include "sweep_test_util.h"

namespace frugal::apps {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::kGoodSweep;
using testing::kVariantSweep;
using testing::Spec;

TEST(PointsToRun, SkipsCompletedPointsAndFailedOnesUnlessRetrying) {
  auto spec = Spec(kGoodSweep);
  ASSERT_TRUE(spec.ok());
  const std::vector<SweepPoint> points = ExpandSweep(*spec);
  const nlohmann::json completed = {
      {"key", points[1].key}, {"exit_code", 0}, {"summary", {{"test_accuracy", 0.5}}}};
  const nlohmann::json failed = {{"key", points[2].key}, {"exit_code", 3}, {"error", "boom"}};
  // A later record of a point replaces its earlier one.
  const nlohmann::json failed_then_done = {{"key", points[3].key}, {"exit_code", 1}};
  const nlohmann::json done_later = {
      {"key", points[3].key}, {"exit_code", 0}, {"summary", nlohmann::json::object()}};
  const std::vector<nlohmann::json> records = {completed, failed, failed_then_done, done_later};
  auto indices = [](const std::vector<const SweepPoint*>& todo) {
    std::vector<int> out;
    for (const SweepPoint* p : todo) out.push_back(p->index);
    return out;
  };
  EXPECT_EQ(indices(PointsToRun(points, records, true)), (std::vector<int>{0, 2, 4, 5, 6, 7}));
  EXPECT_EQ(indices(PointsToRun(points, records, false)), (std::vector<int>{0, 4, 5, 6, 7}));
  EXPECT_EQ(PointsToRun(points, {}, true).size(), points.size());
}

class FoldRunJsonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() / fmt::format("frugal-fold-{}.jsonl", ::getpid());
  }
  void TearDown() override { fs::remove(path_); }
  Status Fold(const std::string& text, nlohmann::json& record) {
    std::ofstream(path_) << text;
    return FoldRunJson(path_, record);
  }
  fs::path path_;
};

TEST_F(FoldRunJsonTest, KeepsEpochsAndTheSummary) {
  nlohmann::json record;
  ASSERT_TRUE(Fold("{\"epoch\":1,\"test_accuracy\":0.5}\n\n{\"note\":1}\n"
                   "{\"epoch\":2,\"test_accuracy\":0.7}\n{\"event\":\"summary\",\"x\":3}\n",
                   record)
                  .ok());
  ASSERT_EQ(record["epochs"].size(), 2u);
  EXPECT_EQ(record["epochs"][1]["test_accuracy"], 0.7);
  EXPECT_EQ(record["summary"]["x"], 3);
}

TEST_F(FoldRunJsonTest, RefusesBrokenLinesAndRunsWithoutSummary) {
  nlohmann::json a, b;
  Status broken = Fold("{\"epoch\":1}\n{\"epo\n", a);
  EXPECT_EQ(broken.code(), StatusCode::kMalformed);
  Status unfinished = Fold("{\"epoch\":1}\n", b);
  EXPECT_EQ(unfinished.code(), StatusCode::kMalformed);
  EXPECT_THAT(unfinished.message(), HasSubstr("no summary record"));
  nlohmann::json c;
  EXPECT_EQ(FoldRunJson(path_.string() + ".missing", c).code(), StatusCode::kIoError);
}

// ---------------------------------------------------------------------------------------------
// Runner, resume, report

// Stands in for `frugal train`: 3 epochs, accuracy 0.1*epoch + lr (+0.05 for top-k, +0.2 for
// --model=big), 1 s of "wall time" per epoch, 1e6 bytes per epoch for none and 1e4 for top-k.
// Records each call.
constexpr const char* kFakeTrain = R"(#!/bin/sh
calls="$1"; shift
json=""; lr=0; comp=none; big=0
for a in "$@"; do
  case "$a" in
    --json=*) json="${a#--json=}" ;;
    --lr=*) lr="${a#--lr=}" ;;
    --compressor=*) comp="${a#--compressor=}" ;;
    --model=big) big=0.2 ;;
  esac
done
echo "$*" >> "$calls"
case "$comp" in fail*) echo "boom: bad run" >&2; exit 3 ;; sleep*) sleep 30 ;; esac
bonus=0; bytes=1000000
case "$comp" in topk*) bonus=0.05; bytes=10000 ;; esac
bonus=$(awk "BEGIN{print $bonus + $big}")
for e in 1 2 3; do
  acc=$(awk "BEGIN{print 0.1*$e + $lr + $bonus}")
  b=$(awk "BEGIN{print $bytes*$e}")
  echo "{\"epoch\":$e,\"test_accuracy\":$acc,\"wall_seconds\":$e.0,\"bytes_per_worker\":$b}" >> "$json"
done
acc=$(awk "BEGIN{print 0.3 + $lr + $bonus}")
echo "{\"event\":\"summary\",\"test_accuracy\":$acc,\"wall_seconds\":3.0,\"bytes_per_worker\":$(awk "BEGIN{print $bytes*3}")}" >> "$json"
)";

class SweepRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("frugal-sweep-test-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fake_ = dir_ / "fake-train.sh";
    std::ofstream(fake_) << kFakeTrain;
    calls_ = dir_ / "calls.txt";
  }
  void TearDown() override { fs::remove_all(dir_); }

  SweepRunOptions Options() const {
    SweepRunOptions o;
    o.self = {"/bin/sh", fake_.string(), calls_.string()};
    o.out_dir = dir_ / "out";
    return o;
  }
  // Runs every point of the sweep file `text` and renders the table of their records.
  std::string RunAndRender(const std::string& text) {
    auto spec = Spec(text);
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    if (!spec.ok()) return "";
    auto points = ExpandSweep(*spec);
    EXPECT_TRUE(RunSweep(*spec, points, Options(), logger_).ok());
    auto records = ReadResults(dir_ / "out" / "results.jsonl", logger_);
    EXPECT_TRUE(records.ok()) << records.status().ToString();
    return records.ok() ? RenderMarkdownTable(*spec, points, *records) : "";
  }
  int Calls() const {
    std::ifstream in(calls_);
    int n = 0;
    std::string line;
    while (std::getline(in, line)) ++n;
    return n;
  }

  fs::path dir_, fake_, calls_;
  Logger logger_{LogLevel::kError};
};

TEST_F(SweepRun, RunsEveryPointThenResumesWithoutRerunning) {
  auto spec = Spec(kGoodSweep);
  ASSERT_TRUE(spec.ok());
  auto points = ExpandSweep(*spec);
  auto code = RunSweep(*spec, points, Options(), logger_);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(Calls(), 8);
  auto records = ReadResults(dir_ / "out" / "results.jsonl", logger_);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 8u);
  for (const auto& r : *records) {
    EXPECT_TRUE(IsCompleted(r)) << r.dump();
    EXPECT_EQ(r["epochs"].size(), 3u);
  }
  // The command carries every flag and --json.
  std::ifstream in(calls_);
  std::string first;
  std::getline(in, first);
  EXPECT_THAT(first, HasSubstr("train --model=mlp --epochs=3 --fast --compressor=none --np=2 "
                               "--lr=0.01 --json="));

  // Resume: nothing runs again.
  code = RunSweep(*spec, points, Options(), logger_);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(Calls(), 8);

  // A new axis value runs only the new points.
  auto bigger =
      Spec(std::string(kGoodSweep)
               .replace(std::string(kGoodSweep).find("[0.01, 0.1]"), 11, "[0.01, 0.1, 0.2]"));
  ASSERT_TRUE(bigger.ok());
  code = RunSweep(*bigger, ExpandSweep(*bigger), Options(), logger_);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(Calls(), 12);
}

TEST_F(SweepRun, FailedPointsAreRecordedAndRetried) {
  auto spec = Spec("name = \"f\"\n[axes]\ncompressor = [\"none\", \"fail\"]\nlr = [0.1]\n");
  ASSERT_TRUE(spec.ok());
  auto points = ExpandSweep(*spec);
  auto code = RunSweep(*spec, points, Options(), logger_);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 1);
  auto records = ReadResults(dir_ / "out" / "results.jsonl", logger_);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[1]["exit_code"], 3);
  EXPECT_THAT((*records)[1]["error"].get<std::string>(), HasSubstr("boom: bad run"));
  SweepRunOptions no_retry = Options();
  no_retry.retry_failed = false;
  ASSERT_TRUE(RunSweep(*spec, points, no_retry, logger_).ok());
  EXPECT_EQ(Calls(), 2);
  ASSERT_TRUE(RunSweep(*spec, points, Options(), logger_).ok());
  EXPECT_EQ(Calls(), 3);  // only the failed one again
}

TEST_F(SweepRun, ATruncatedResultsLineIsIgnored) {
  auto spec = Spec("name = \"t\"\n[axes]\nlr = [0.1, 0.2]\n");
  ASSERT_TRUE(spec.ok());
  auto points = ExpandSweep(*spec);
  fs::create_directories(dir_ / "out");
  std::ofstream(dir_ / "out" / "results.jsonl") << "{\"key\": \"trunc";
  auto code = RunSweep(*spec, points, Options(), logger_);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(Calls(), 2);
}

TEST_F(SweepRun, ASignalStopsTheSweepAndTheRunIsNotRecorded) {
  auto spec = Spec("name = \"s\"\n[axes]\ncompressor = [\"none\", \"sleep\", \"none2\"]\n");
  ASSERT_TRUE(spec.ok());
  auto points = ExpandSweep(*spec);
  pid_t pid = ::fork();
  if (pid == 0) {
    auto code = RunSweep(*spec, points, Options(), logger_);
    ::_exit(code.ok() ? *code : 100);
  }
  // Wait until the sleeping point has started.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (Calls() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(Calls(), 2);
  auto start = std::chrono::steady_clock::now();
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);
  auto records = ReadResults(dir_ / "out" / "results.jsonl", logger_);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(records->size(), 1u);  // the first point only
  EXPECT_EQ(Calls(), 2);           // the third never started
}

TEST_F(SweepRun, TableHasTheSurveysShape) {
  const std::string table = RunAndRender(kGoodSweep);
  // Rows: method x workers; columns: lr; cells: final accuracy in percent (0.3 + lr + bonus).
  EXPECT_THAT(table, HasSubstr("| compressor | np | lr=0.01 | lr=0.1 | MB/worker | compression | "
                               "wall (s) | time to 34% (s) |"));
  EXPECT_THAT(table, HasSubstr("| none | 2 | 31.00 | **40.00** | 3.00 | 1.00x | 3.0 | 3.0 |"));
  EXPECT_THAT(table, HasSubstr("| none | 4 | 31.00 | **40.00** |"));
  // top-k at lr 0.1: 25%, 35%, 45% per epoch, so 34% is reached after 2 s.
  EXPECT_THAT(table, HasSubstr("| topk:ratio=0.01,ef=1 | 2 | 36.00 | **45.00** | 0.03 | 100x | "
                               "3.0 | 2.0 |"));
}

TEST_F(SweepRun, ATableWithOnlyColumnsIsLabelledByTheSweep) {
  const std::string table = RunAndRender("name = \"solo\"\n[axes]\nlr = [0.01, 0.1]\n");
  EXPECT_THAT(table, HasSubstr("| sweep | lr=0.01 | lr=0.1 | MB/worker | compression | wall (s) |\n"
                               "| --- | ---: | ---: | ---: | ---: | ---: |\n"
                               "| solo | 31.00 | **40.00** | 3.00 | – | 3.0 |"));
}

TEST_F(SweepRun, VariantsAreTheRowsOfTheTable) {
  const std::string table = RunAndRender(kVariantSweep);
  EXPECT_THAT(table, HasSubstr("| variant | lr=0.01 | lr=0.1 |"));
  EXPECT_THAT(table, HasSubstr("| dense | 31.00 | **40.00** | 3.00 | 1.00x |"));
  EXPECT_THAT(table, HasSubstr("| topk_ef | 36.00 | **45.00** | 0.03 | 100x |"));
}

TEST_F(SweepRun, PlotsArePngs) {
  if (std::system("gnuplot --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gnuplot";
  auto spec = Spec(kGoodSweep);
  ASSERT_TRUE(spec.ok());
  auto points = ExpandSweep(*spec);
  ASSERT_TRUE(RunSweep(*spec, points, Options(), logger_).ok());
  auto records = ReadResults(dir_ / "out" / "results.jsonl", logger_);
  auto files = RenderReport(*spec, points, *records, dir_ / "out", logger_);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(files->plots.size(), 6u);  // 3 kinds x (np=2, np=4)
  for (const auto& png : files->plots) {
    std::ifstream in(png, std::ios::binary);
    char magic[8] = {};
    in.read(magic, 8);
    EXPECT_EQ(std::string(magic + 1, 3), "PNG") << png;
    EXPECT_GT(fs::file_size(png), 2000u) << png;
  }
  EXPECT_TRUE(fs::exists(dir_ / "out" / "accuracy_vs_bytes_np_4.png"));
  // The data behind the lines: one file per method with 3 epochs.
  std::ifstream data(dir_ / "out" / "plots" / "np_2_1.dat");
  std::string header, line;
  std::getline(data, header);
  EXPECT_THAT(header, HasSubstr("topk:ratio=0.01,ef=1"));
  std::getline(data, line);
  EXPECT_EQ(line, "1 25 1 0.01");
}

TEST_F(SweepRun, PlotsOfAModelByLrStudyAreOneSetPerModel) {
  if (std::system("gnuplot --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gnuplot";
  // "big" beats "small" at every learning rate, and "small" is best at lr 0.1: a line of small's
  // plots is small's run at lr 0.1, never big's.
  auto spec = Spec(R"(
name = "models"
[base]
np = 2
[axes]
model = ["small", "big"]
lr = [0.01, 0.1]
compressor = ["none"]
[report]
columns = ["model", "lr"]
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto points = ExpandSweep(*spec);
  ASSERT_TRUE(RunSweep(*spec, points, Options(), logger_).ok());
  auto records = ReadResults(dir_ / "out" / "results.jsonl", logger_);
  ASSERT_TRUE(records.ok());
  auto files = RenderReport(*spec, points, *records, dir_ / "out", logger_);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(files->plots.size(), 6u);  // 3 kinds x (small, big)
  EXPECT_TRUE(fs::exists(dir_ / "out" / "accuracy_vs_epoch_model_small.png"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "accuracy_vs_epoch_model_big.png"));
  auto first_point = [&](const std::string& name) {
    std::ifstream data(dir_ / "out" / "plots" / name);
    std::string header, line;
    std::getline(data, header);
    std::getline(data, line);
    return line;
  };
  EXPECT_EQ(first_point("model_small_0.dat"), "1 20 1 1");  // 0.1 + lr 0.1
  EXPECT_EQ(first_point("model_big_0.dat"), "1 40 1 1");    // 0.1 + lr 0.1 + 0.2
}

}  // namespace
}  // namespace frugal::apps
