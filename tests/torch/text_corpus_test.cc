// The fortunes corpus: windows and targets of a small corpus written by the test, the fixed
// train/test split, the real corpus of the Debian packages, the split by source and FedAvg's
// client partition by source.
#include "frugal_torch/text_corpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frugal_torch/client_partition.h"
#include "frugal_torch/data.h"
#include "frugal_torch/dataset.h"

namespace frugal_torch {
namespace {

namespace fs = std::filesystem;

class SmallCorpus : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("frugal_corpus_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

std::vector<uint8_t> Codes(const std::string& text) {
  std::vector<uint8_t> codes;
  for (char c : text) codes.push_back(static_cast<uint8_t>(CharCode(static_cast<uint8_t>(c))));
  return codes;
}

TEST(CharCode, MapsNewlinePrintableAsciiAndEverythingElse) {
  EXPECT_EQ(CharCode('\n'), 1);
  EXPECT_EQ(CharCode(' '), 2);
  EXPECT_EQ(CharCode('a'), 2 + ('a' - 32));
  EXPECT_EQ(CharCode('~'), kCharVocabulary - 1);
  EXPECT_EQ(CharCode('\t'), 0);
  EXPECT_EQ(CharCode(0xc3), 0);
}

TEST_F(SmallCorpus, WindowsOverlapByOneAndTargetsAreTheNextCharacters) {
  // Everything in the training set (test_fraction 0): the stream is "abc\n%\nde\n%\n".
  Write("b_file", "abc\n%\nde\n");
  Write("a_file", "xyz\n");
  Write("a_file.dat", "binary index, skipped");
  fs::create_symlink(dir_ / "a_file", dir_ / "a_file.u8");
  TextCorpusOptions options;
  options.sequence_length = 4;
  options.test_fraction = 0;
  auto corpus = LoadFortunes(dir_.string(), options);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  EXPECT_EQ(corpus->sources, (std::vector<std::string>{"a_file", "b_file"}));
  const ImageSet& train = corpus->data.train;
  EXPECT_EQ(train.rows, 1);
  EXPECT_EQ(train.cols, 4);
  // a_file: "xyz\n%\n" (6 codes) -> one window (codes 0..4); b_file: "abc\n%\nde\n%\n" (12
  // codes) -> windows at 0 and 4 (codes 0..4, 4..8); the tail 8..11 is shorter than 5.
  ASSERT_EQ(train.count, 3);
  EXPECT_EQ(train.labels, (std::vector<uint8_t>{0, 1, 1}));
  const std::vector<uint8_t> a = Codes("xyz\n%\n");
  const std::vector<uint8_t> b = Codes("abc\n%\nde\n%\n");
  auto inputs = [&](int64_t k) {
    return std::vector<uint8_t>(train.images.begin() + k * 4, train.images.begin() + k * 4 + 4);
  };
  auto targets = [&](int64_t k) {
    return std::vector<uint8_t>(train.targets.begin() + k * 4, train.targets.begin() + k * 4 + 4);
  };
  EXPECT_EQ(inputs(0), std::vector<uint8_t>(a.begin(), a.begin() + 4));
  EXPECT_EQ(targets(0), std::vector<uint8_t>(a.begin() + 1, a.begin() + 5));
  EXPECT_EQ(inputs(1), std::vector<uint8_t>(b.begin(), b.begin() + 4));
  EXPECT_EQ(targets(1), std::vector<uint8_t>(b.begin() + 1, b.begin() + 5));
  EXPECT_EQ(inputs(2), std::vector<uint8_t>(b.begin() + 4, b.begin() + 8));
  EXPECT_EQ(targets(2), std::vector<uint8_t>(b.begin() + 5, b.begin() + 9));
}

TEST_F(SmallCorpus, MissingOrEmptyDirectoryNamesThePackages) {
  auto missing = LoadFortunes((dir_ / "nothing").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), frugal::StatusCode::kNotFound);
  EXPECT_NE(
      missing.status().message().find("install the Debian packages fortunes and fortunes-min"),
      std::string::npos)
      << missing.status().message();
  auto empty = LoadFortunes(dir_.string());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), frugal::StatusCode::kNotFound);
  auto check = CheckDatasetFiles("fortunes", dir_.string());
  EXPECT_EQ(check.code(), frugal::StatusCode::kNotFound);
  EXPECT_NE(check.message().find("fortunes-min"), std::string::npos);
}

TEST_F(SmallCorpus, SplitIsFixedBySplitSeedAndKeepsWholeFortunes) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "fortune number " + std::to_string(i) + "\n%\n";
  Write("many", text);
  TextCorpusOptions options;
  options.sequence_length = 8;
  auto first = LoadFortunes(dir_.string(), options);
  auto again = LoadFortunes(dir_.string(), options);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->data.train.images, again->data.train.images);
  EXPECT_EQ(first->data.test.targets, again->data.test.targets);
  options.split_seed = 2;
  auto other = LoadFortunes(dir_.string(), options);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(first->data.test.images, other->data.test.images);
  // About a tenth of the characters are test characters.
  const double test_share = static_cast<double>(first->data.test.count) /
                            static_cast<double>(first->data.test.count + first->data.train.count);
  EXPECT_GT(test_share, 0.05);
  EXPECT_LT(test_share, 0.15);
}

TEST(Fortunes, TheDebianCorpusLoads) {
  auto corpus = LoadFortunes();
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  EXPECT_GE(corpus->sources.size(), 40u);
  EXPECT_NE(std::find(corpus->sources.begin(), corpus->sources.end(), "fortunes"),
            corpus->sources.end());
  const ImageSet& train = corpus->data.train;
  const ImageSet& test = corpus->data.test;
  EXPECT_EQ(train.cols, 64);
  EXPECT_GT(train.count, 30000);
  EXPECT_GT(test.count, 2000);
  EXPECT_EQ(train.images.size(), static_cast<size_t>(train.count * 64));
  EXPECT_EQ(train.targets.size(), train.images.size());
  EXPECT_EQ(train.labels.size(), static_cast<size_t>(train.count));
  for (uint8_t t : train.targets) ASSERT_LT(t, kCharVocabulary);
  // Every source has training text; labels are in source order.
  EXPECT_TRUE(std::is_sorted(train.labels.begin(), train.labels.end()));
  EXPECT_EQ(std::set<uint8_t>(train.labels.begin(), train.labels.end()).size(),
            corpus->sources.size());
}

TEST(SourceSplit, WholeSourcesBalancedLargestFirst) {
  // Sources of 5, 3, 2 and 2 samples over 2 parts: 5 -> part 0, 3 -> part 1, 2 -> part 1 (3 <
  // 5), 2 -> part 0 (5 = 5: the lower index).
  std::vector<uint8_t> labels = {0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 3};
  auto shards = SourceSplit(labels, 2);
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_EQ(shards[0], (std::vector<int64_t>{0, 1, 2, 3, 4, 10, 11}));
  EXPECT_EQ(shards[1], (std::vector<int64_t>{5, 6, 7, 8, 9}));
}

TEST(SourceSplit, CutsTheLargestSourcesWhenThereAreMorePartsThanSources) {
  // Two sources (6 and 2 samples) over 4 parts: {0..5} -> {0,1,2} + {3,4,5}, then the first of
  // the two largest, {0,1,2} -> {0} + {1,2}; largest first: {3,4,5}, {1,2}, {6,7}, {0}.
  std::vector<uint8_t> labels = {0, 0, 0, 0, 0, 0, 1, 1};
  auto shards = SourceSplit(labels, 4);
  ASSERT_EQ(shards.size(), 4u);
  std::vector<std::vector<int64_t>> expected = {{3, 4, 5}, {1, 2}, {6, 7}, {0}};
  EXPECT_EQ(shards, expected);
  // Too few samples: some shards stay empty, none is lost.
  auto tiny = SourceSplit({7, 7}, 3);
  size_t total = 0;
  for (const auto& s : tiny) total += s.size();
  EXPECT_EQ(total, 2u);
}

TEST(SourceSplit, RanksGetDisjointWholeFilesOfTheRealCorpus) {
  auto corpus = LoadFortunes();
  ASSERT_TRUE(corpus.ok());
  const std::vector<uint8_t>& labels = corpus->data.train.labels;
  const int world = 4;
  std::set<int64_t> seen;
  std::map<uint8_t, int> owner;
  for (int r = 0; r < world; ++r) {
    ShardSampler sampler(labels, r, world, 32, PartitionSpec{PartitionKind::kSource, 0}, 1);
    for (int64_t i : sampler.shard()) {
      EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " in two shards";
      auto [it, inserted] = owner.emplace(labels[static_cast<size_t>(i)], r);
      EXPECT_EQ(it->second, r) << "source " << int{labels[static_cast<size_t>(i)]} << " split";
    }
    // The epoch order stays within the shard.
    for (int64_t i : sampler.EpochOrder(0)) {
      ASSERT_TRUE(std::binary_search(sampler.shard().begin(), sampler.shard().end(), i));
    }
  }
  EXPECT_EQ(seen.size(), labels.size());
}

TEST(SourceSplit, FedAvgClientsBySource) {
  auto corpus = LoadFortunes();
  ASSERT_TRUE(corpus.ok());
  const std::vector<uint8_t>& labels = corpus->data.train.labels;
  auto partition =
      PartitionClients(labels, 64, PartitionSpec{PartitionKind::kSource, 0}, 1, /*min_samples=*/4);
  ASSERT_TRUE(partition.ok()) << partition.status().ToString();
  EXPECT_EQ(partition->clients(), 64);
  size_t total = 0;
  for (const auto& shard : partition->shards) {
    total += shard.size();
    // More clients than sources: 64 pieces, one per client, each from one source.
    std::set<uint8_t> sources;
    for (int64_t i : shard) sources.insert(labels[static_cast<size_t>(i)]);
    EXPECT_EQ(sources.size(), 1u);
  }
  EXPECT_EQ(total, labels.size());
  auto too_many = PartitionClients(labels, 64, PartitionSpec{PartitionKind::kSource, 0}, 1,
                                   /*min_samples=*/100000);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("--partition source over 64 clients"),
            std::string::npos)
      << too_many.status().message();
  EXPECT_EQ(ParsePartition("source")->kind, PartitionKind::kSource);
  EXPECT_EQ(PartitionName(PartitionSpec{PartitionKind::kSource, 0}), "source");
}

}  // namespace
}  // namespace frugal_torch
