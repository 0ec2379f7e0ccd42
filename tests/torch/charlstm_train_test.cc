// The character-level LSTM on the fortunes corpus, ranks as threads: it learns (next-character
// accuracy well above always predicting the most frequent character) under the engine's default
// priority overlap, whose layer-wise updates must also gate the LSTM's weights (a list input of
// aten::lstm), and the replicas stay identical.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include "frugal/inproc_transport.h"
#include "frugal/strategy.h"
#include "frugal_torch/models.h"
#include "frugal_torch/text_corpus.h"
#include "frugal_torch/trainer.h"
#include "torch/torch_test_util.h"

namespace frugal_torch {
namespace {

using frugal::Status;
using frugal::Transport;
using testing_torch::ExpectAllOk;

TEST(CharLstm, ShapesAndSeededInitialisation) {
  auto a = MakeModel("charlstm", 3);
  auto b = MakeModel("charlstm", 3);
  auto c = MakeModel("charlstm", 4);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  // embedding 97x8; LSTM layer 1: 4*128 x (8 + 128) + 2 x 512 biases; layer 2: 4*128 x 256 +
  // 2 x 512; decoder 128 x 97 + 97.
  const int64_t expected = 97 * 8 + (512 * 136 + 1024) + (512 * 256 + 1024) + (128 * 97 + 97);
  EXPECT_EQ(CountParameters(**a), expected);
  const auto pa = (*a)->parameters();
  const auto pb = (*b)->parameters();
  const auto pc = (*c)->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::equal(pa[i], pb[i])) << i;
    EXPECT_FALSE(torch::equal(pa[i], pc[i])) << i;
  }
  torch::Tensor codes = torch::randint(0, kCharVocabulary, {3, 1, 1, 10}).to(torch::kFloat);
  const torch::Tensor logits = (*a)->forward(codes);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, kCharVocabulary, 10}));
}

TEST(CharLstm, LearnsFortunesWellAboveTheMostFrequentCharacter) {
  torch::set_num_threads(1);
  TextCorpusOptions corpus_options;
  corpus_options.sequence_length = 32;
  auto corpus = LoadFortunes(kFortunesDir, corpus_options);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  TrainOptions options;
  options.model = "charlstm";
  options.batch_size = 16;
  options.max_steps = 150;
  options.lr = 1.0;
  options.momentum = 0.9;
  options.seed = 2;
  options.timeout = std::chrono::seconds(120);
  options.test_samples = 400;
  options.overlap = OverlapOptions{};  // priority, as `frugal train`
  // The baseline: always the most frequent character of the evaluated targets.
  std::array<int64_t, kCharVocabulary> counts{};
  const size_t evaluated =
      static_cast<size_t>(options.test_samples * corpus_options.sequence_length);
  for (size_t i = 0; i < evaluated; ++i) ++counts[corpus->data.test.targets[i]];
  const double baseline = static_cast<double>(*std::max_element(counts.begin(), counts.end())) /
                          static_cast<double>(evaluated);

  const int n = 2;
  std::vector<TrainSummary> summaries(n);
  const frugal::StrategyPlan plan = frugal::PlanStrategy({}).value();
  ExpectAllOk(frugal::RunRanks(n, [&](Transport& t) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(
        auto reducer, frugal::MakeStrategyReducer(plan, t, 0, frugal::DefaultCompressorRegistry()));
    FRUGAL_ASSIGN_OR_RETURN(auto strategy, frugal::MakeStrategy(plan, t, *reducer));
    FRUGAL_ASSIGN_OR_RETURN(summaries[t.rank()],
                            Train(t, *reducer, *strategy, corpus->data, options));
    return Status::Ok();
  }));
  const TrainSummary& s = summaries[0];
  std::printf("charlstm, 2 ranks x 150 steps of 16 windows: next-character accuracy %.3f, most "
              "frequent character %.3f\n",
              s.test_accuracy, baseline);
  EXPECT_TRUE(s.params_consistent);
  EXPECT_EQ(s.steps, 150);
  EXPECT_GT(baseline, 0.1);
  EXPECT_GT(s.test_accuracy, baseline + 0.1)
      << "accuracy " << s.test_accuracy << ", most frequent character " << baseline;
}

}  // namespace
}  // namespace frugal_torch
