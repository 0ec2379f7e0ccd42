// The study table: seeds as an axis rendered as mean ± std, model x learning-rate columns, rows
// method x workers; incomplete and failed cells; the spec's checks of [report] seeds/columns.
#include "sweep_study.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sweep_grid.h"
#include "sweep_report.h"
#include "sweep_test_util.h"

namespace frugal::apps {
namespace {

using ::testing::HasSubstr;
using testing::kStudySweep;
using testing::Spec;

TEST(MeanStd, SampleStandardDeviation) {
  const MeanStd s = Summarize({86.0, 88.0, 90.0});
  EXPECT_EQ(s.count, 3u);
  EXPECT_DOUBLE_EQ(s.mean, 88.0);
  EXPECT_DOUBLE_EQ(s.std, 2.0);  // sqrt((4 + 0 + 4) / 2)
  EXPECT_EQ(FormatMeanStd(s, 3), "88.00 ± 2.00");
  EXPECT_EQ(FormatMeanStd(Summarize({70.125, 71.875}), 3), "71.00 ± 1.24 (2/3)");
  EXPECT_EQ(FormatMeanStd(Summarize({50.0}), 1), "50.00");
}

TEST(StudyTable, RowsMethodTimesWorkersColumnsModelTimesLr) {
  auto spec = Spec(kStudySweep);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->report.column_axes, (std::vector<std::string>{"model", "lr"}));
  EXPECT_EQ(spec->report.seeds, "seed");
  EXPECT_EQ(spec->report.methods, std::vector<std::string>{"variant"});
  EXPECT_TRUE(UsesStudyTable(*spec));
  const std::vector<SweepPoint> points = ExpandSweep(*spec);
  ASSERT_EQ(points.size(), 2u * 2 * 2 * 2 * 3);
  // Accuracy of a completed run: 80 + seed for bsp, 70 + seed for local_4, plus 0.5 for np=4;
  // cnn at lr 0.1 with local_4 on 2 workers: seed 3 failed, seed 2 not run.
  std::vector<nlohmann::json> records;
  for (const SweepPoint& p : points) {
    const bool bsp = p.Find("variant")->AsWord() == "bsp";
    const int64_t seed = p.Find("seed")->integer;
    const bool np4 = p.Find("np")->integer == 4;
    const bool odd_cell =
        !bsp && !np4 && p.Find("model")->AsWord() == "cnn" && p.Find("lr")->AsWord() == "0.1";
    nlohmann::json r = {{"key", p.key}, {"exit_code", 0}};
    if (odd_cell && seed == 2) continue;
    if (odd_cell && seed == 3) {
      r["exit_code"] = 1;
      r["error"] = "diverged";
    } else {
      r["summary"] = {{"test_accuracy", ((bsp ? 80.0 : 70.0) + seed + (np4 ? 0.5 : 0)) / 100}};
    }
    records.push_back(r);
  }
  const std::string table = RenderStudyTable(*spec, GatherStudy(*spec, points, records));
  EXPECT_THAT(table, HasSubstr("mean ± std over seed 1, 2, 3"));
  EXPECT_THAT(table, HasSubstr("| variant | np | model=mlp lr=0.05 | model=mlp lr=0.1 | "
                               "model=cnn lr=0.05 | model=cnn lr=0.1 |"));
  EXPECT_THAT(table, HasSubstr("| bsp | 2 | 82.00 ± 1.00 | 82.00 ± 1.00 | 82.00 ± 1.00 | "
                               "82.00 ± 1.00 |"));
  EXPECT_THAT(table, HasSubstr("| bsp | 4 | 82.50 ± 1.00 |"));
  EXPECT_THAT(table, HasSubstr("| local_4 | 2 | 72.00 ± 1.00 | 72.00 ± 1.00 | 72.00 ± 1.00 | "
                               "71.00 (1/3) |"));
  // Four rows: bsp and local_4, each on 2 and 4 workers.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 4 + 6);
  // The table file starts with it (the per-seed tables follow).
  EXPECT_EQ(RenderMarkdownTable(*spec, points, records).rfind(table, 0), 0u);
  // Nothing recorded: dashes; only failures: "failed".
  std::vector<nlohmann::json> failed;
  for (const SweepPoint& p : points) failed.push_back({{"key", p.key}, {"exit_code", 1}});
  EXPECT_THAT(RenderMarkdownTable(*spec, points, {}), HasSubstr("| bsp | 2 | – | – |"));
  EXPECT_THAT(RenderMarkdownTable(*spec, points, failed), HasSubstr("| bsp | 2 | failed |"));
}

TEST(StudyTable, SpecChecksSeedsAndColumns) {
  std::string text = kStudySweep;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return Spec(t);
  };
  auto not_axis = with("seeds = \"seed\"", "seeds = \"epochs\"");
  ASSERT_FALSE(not_axis.ok());
  EXPECT_THAT(not_axis.status().message(), HasSubstr("[report] seeds: 'epochs' is not an axis"));
  auto both = with("columns = [\"model\", \"lr\"]", "columns = [\"seed\", \"lr\"]");
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("cannot be the seeds and a column"));
  auto bad_column = with("columns = [\"model\", \"lr\"]", "columns = [\"model\", \"momentum\"]");
  ASSERT_FALSE(bad_column.ok());
  EXPECT_THAT(bad_column.status().message(), HasSubstr("'momentum' is not an axis"));
}

}  // namespace
}  // namespace frugal::apps
