// Fashion-MNIST reader, shard samplers and learning-rate schedules, against the real files.
#include "frugal_torch/data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "frugal_torch/schedule.h"

namespace frugal_torch {
namespace {

class FashionMnistTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = LoadFashionMnist();
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    data_ = new FashionMnist(std::move(loaded).value());
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }
  static FashionMnist* data_;
};
FashionMnist* FashionMnistTest::data_ = nullptr;

TEST_F(FashionMnistTest, ReadsTheRealFiles) {
  ASSERT_NE(data_, nullptr);
  EXPECT_EQ(data_->train.count, 60000);
  EXPECT_EQ(data_->test.count, 10000);
  EXPECT_EQ(data_->train.rows, 28);
  EXPECT_EQ(data_->train.cols, 28);
  EXPECT_EQ(data_->train.images.size(), 60000u * 784);
  EXPECT_EQ(data_->test.images.size(), 10000u * 784);
  // Fashion-MNIST is balanced: 6000 training and 1000 test images per class.
  std::vector<int> train_counts(10), test_counts(10);
  for (uint8_t l : data_->train.labels) ++train_counts.at(l);
  for (uint8_t l : data_->test.labels) ++test_counts.at(l);
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(train_counts[c], 6000) << c;
    EXPECT_EQ(test_counts[c], 1000) << c;
  }
  // The first training label of the published dataset is 9 (ankle boot), the first test one 9.
  EXPECT_EQ(data_->train.labels[0], 9);
  EXPECT_EQ(data_->test.labels[0], 9);
}

TEST_F(FashionMnistTest, NormalisedToZeroMeanUnitVariance) {
  double sum = 0, sq = 0;
  for (float v : data_->train.images) {
    sum += v;
    sq += double{v} * v;
  }
  const double n = static_cast<double>(data_->train.images.size());
  const double mean = sum / n;
  const double var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(var), 1.0, 0.01);
  // A zero pixel maps to -mean/std.
  const float lowest = *std::min_element(data_->train.images.begin(), data_->train.images.end());
  EXPECT_NEAR(lowest, -kFashionMnistMean / kFashionMnistStd, 1e-6);
}

TEST(FashionMnistLoad, MissingDirectoryNamesThePackage) {
  auto loaded = LoadFashionMnist("/nonexistent/fashion-mnist");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), frugal::StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("dataset-fashion-mnist"), std::string::npos);
}

class IdxFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("frugal_idx_test_" + std::to_string(::getpid()) + ".idx");
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void Write(const std::vector<uint8_t>& bytes) {
    std::ofstream out(path_, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  std::filesystem::path path_;
};

TEST_F(IdxFileTest, ReadsAPlainFile) {
  Write({0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6});
  auto idx = ReadIdxFile(path_);
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  EXPECT_EQ(idx->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(idx->data, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
}

TEST_F(IdxFileTest, RejectsBadMagicTruncationAndExtraBytes) {
  Write({0, 0, 9, 1, 0, 0, 0, 1, 7});  // type 0x09 (signed byte)
  EXPECT_EQ(ReadIdxFile(path_).status().code(), frugal::StatusCode::kMalformed);
  Write({0, 0, 8, 2, 0, 0});  // header cut short
  EXPECT_EQ(ReadIdxFile(path_).status().code(), frugal::StatusCode::kMalformed);
  Write({0, 0, 8, 1, 0, 0, 0, 3, 1, 2});  // payload shorter than the header says
  EXPECT_EQ(ReadIdxFile(path_).status().code(), frugal::StatusCode::kMalformed);
  Write({0, 0, 8, 1, 0, 0, 0, 1, 1, 2});  // longer
  EXPECT_EQ(ReadIdxFile(path_).status().code(), frugal::StatusCode::kMalformed);
  Write({});
  EXPECT_EQ(ReadIdxFile(path_).status().code(), frugal::StatusCode::kMalformed);
}

TEST(Partition, Parses) {
  auto iid = ParsePartition("iid");
  ASSERT_TRUE(iid.ok());
  EXPECT_EQ(iid->kind, PartitionKind::kIid);
  auto dir = ParsePartition("dirichlet:0.5");
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(dir->kind, PartitionKind::kDirichlet);
  EXPECT_DOUBLE_EQ(dir->alpha, 0.5);
  EXPECT_EQ(PartitionName(*dir), "dirichlet:0.5");
  for (const char* bad : {"", "IID", "dirichlet", "dirichlet:", "dirichlet:0", "dirichlet:-1",
                          "dirichlet:x", "dirichlet:1x", "dirichlet:nan", "zipf:1"}) {
    EXPECT_EQ(ParsePartition(bad).status().code(), frugal::StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(FashionMnistTest, IidShardsAreDisjointAndCoverTheSetEveryEpoch) {
  const auto& labels = data_->train.labels;
  for (int world : {1, 3, 4, 7}) {
    for (int64_t epoch : {int64_t{0}, int64_t{1}}) {
      std::vector<int> seen(labels.size(), 0);
      for (int r = 0; r < world; ++r) {
        ShardSampler sampler(labels, r, world, 64, {}, 7);
        const std::vector<int64_t> order = sampler.EpochOrder(epoch);
        EXPECT_EQ(static_cast<int64_t>(order.size()), 60000 / world);
        EXPECT_EQ(sampler.samples_per_epoch(), 60000 / world);
        EXPECT_EQ(sampler.steps_per_epoch(), (60000 / world + 63) / 64);
        for (int64_t i : order) ++seen.at(static_cast<size_t>(i));
      }
      const int64_t covered = std::count(seen.begin(), seen.end(), 1);
      EXPECT_EQ(std::count_if(seen.begin(), seen.end(), [](int c) { return c > 1; }), 0);
      EXPECT_EQ(covered, 60000 - 60000 % world) << "world " << world;
    }
  }
}

TEST_F(FashionMnistTest, IidIsReshuffledEachEpochAndRepeatable) {
  ShardSampler a(data_->train.labels, 1, 4, 32, {}, 11);
  ShardSampler b(data_->train.labels, 1, 4, 32, {}, 11);
  ShardSampler other_seed(data_->train.labels, 1, 4, 32, {}, 12);
  EXPECT_EQ(a.EpochOrder(0), b.EpochOrder(0));
  EXPECT_NE(a.EpochOrder(0), a.EpochOrder(1));
  EXPECT_NE(a.EpochOrder(0), other_seed.EpochOrder(0));
}

TEST_F(FashionMnistTest, IidBatchesOfNRanksAreTheSingleRankBatchOfNTimesTheSize) {
  const int world = 4;
  const int64_t b = 16;
  ShardSampler single(data_->train.labels, 0, 1, world * b, {}, 3);
  std::vector<std::vector<int64_t>> orders;
  for (int r = 0; r < world; ++r) {
    orders.push_back(ShardSampler(data_->train.labels, r, world, b, {}, 3).EpochOrder(2));
  }
  const std::vector<int64_t> single_order = single.EpochOrder(2);
  EXPECT_EQ(single.steps_per_epoch(),
            ShardSampler(data_->train.labels, 0, world, b, {}, 3).steps_per_epoch());
  for (int64_t step : {int64_t{0}, int64_t{1}, int64_t{57}, single.steps_per_epoch() - 1}) {
    std::vector<int64_t> expected = ShardSampler::BatchOf(single_order, step, world * b);
    std::vector<int64_t> got;
    for (const auto& order : orders) {
      const std::vector<int64_t> part = ShardSampler::BatchOf(order, step, b);
      got.insert(got.end(), part.begin(), part.end());
    }
    std::sort(expected.begin(), expected.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected) << "step " << step;
  }
}

// Largest fraction of one class in a shard.
double MaxClassFraction(const std::vector<int64_t>& shard, const std::vector<uint8_t>& labels) {
  std::vector<double> counts(10, 0);
  for (int64_t i : shard) counts[labels[static_cast<size_t>(i)]] += 1;
  return *std::max_element(counts.begin(), counts.end()) / static_cast<double>(shard.size());
}

TEST_F(FashionMnistTest, DirichletShardsAreDisjointCoverTheSetAndAreSkewed) {
  const auto& labels = data_->train.labels;
  const int world = 5;
  for (double alpha : {0.1, 1000.0}) {
    std::vector<int> seen(labels.size(), 0);
    double mean_max_fraction = 0;
    int64_t steps = -1;
    for (int r = 0; r < world; ++r) {
      ShardSampler sampler(labels, r, world, 32, {PartitionKind::kDirichlet, alpha}, 5);
      ASSERT_FALSE(sampler.shard().empty());
      for (int64_t i : sampler.shard()) ++seen.at(static_cast<size_t>(i));
      mean_max_fraction += MaxClassFraction(sampler.shard(), labels) / world;
      // Every rank runs the same number of full batches, drawn from its own shard only.
      if (steps < 0) steps = sampler.steps_per_epoch();
      EXPECT_EQ(sampler.steps_per_epoch(), steps);
      EXPECT_EQ(steps, (60000 / world + 31) / 32);
      const std::vector<int64_t> order = sampler.EpochOrder(3);
      EXPECT_EQ(static_cast<int64_t>(order.size()), steps * 32);
      const std::set<int64_t> shard(sampler.shard().begin(), sampler.shard().end());
      for (int64_t i : order) ASSERT_TRUE(shard.count(i)) << i;
      EXPECT_NE(order, sampler.EpochOrder(4));
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 60000) << "alpha " << alpha;
    if (alpha < 1) {
      EXPECT_GT(mean_max_fraction, 0.5) << "alpha " << alpha;
    } else {
      EXPECT_LT(mean_max_fraction, 0.15) << "alpha " << alpha;
    }
  }
}

TEST(Schedule, WarmupThenConstant) {
  LrSchedule s;
  s.base_lr = 0.4;
  s.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(LearningRate(s, 0), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(s, 1), 0.2);
  EXPECT_DOUBLE_EQ(LearningRate(s, 3), 0.4);
  EXPECT_DOUBLE_EQ(LearningRate(s, 1000), 0.4);
}

TEST(Schedule, StepDecay) {
  LrSchedule s;
  s.kind = LrScheduleKind::kStep;
  s.base_lr = 1.0;
  s.milestones = {10, 20};
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(LearningRate(s, 9), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(s, 10), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(s, 19), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(s, 20), 0.25);
}

TEST(Schedule, CosineFromBaseToMin) {
  LrSchedule s;
  s.kind = LrScheduleKind::kCosine;
  s.base_lr = 1.0;
  s.min_lr = 0.1;
  s.warmup_steps = 10;
  s.total_steps = 110;
  EXPECT_DOUBLE_EQ(LearningRate(s, 10), 1.0);
  EXPECT_NEAR(LearningRate(s, 60), 0.55, 1e-12);
  EXPECT_NEAR(LearningRate(s, 110), 0.1, 1e-12);
  EXPECT_NEAR(LearningRate(s, 500), 0.1, 1e-12);
  EXPECT_LT(LearningRate(s, 70), LearningRate(s, 69));
}

TEST(Schedule, ParsesNames) {
  EXPECT_EQ(ParseLrScheduleKind("cosine").value(), LrScheduleKind::kCosine);
  EXPECT_EQ(ParseLrScheduleKind("step").value(), LrScheduleKind::kStep);
  EXPECT_EQ(ParseLrScheduleKind("constant").value(), LrScheduleKind::kConstant);
  EXPECT_EQ(ParseLrScheduleKind("linear").status().code(), frugal::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace frugal_torch
