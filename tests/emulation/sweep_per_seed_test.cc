// The per-seed tables of a study sweep: each seed's accuracy, differences against the baseline
// row paired by seed and worker count, failed and missing seeds, columns without runs left out;
// the spec's check that [report] baseline names a method.
#include "sweep_per_seed.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sweep_grid.h"
#include "sweep_report.h"
#include "sweep_test_util.h"

namespace frugal::apps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Spec;

const std::string kSeeded = std::string(testing::kStudySweep) + "baseline = \"bsp\"\n";

// bsp: 80 + seed (+0.5 on 4 workers); local_4: 77 + 2 seed (+0.25 on 4 workers), so against bsp
// on 2 workers -2, -1, 0 and on 4 workers -2.25, -1.25, -0.25. model=cnn lr=0.1 has no runs;
// model=mlp lr=0.1 with local_4 on 2 workers: seed 2 failed, seed 3 not run.
std::vector<nlohmann::json> Records(const std::vector<SweepPoint>& points) {
  std::vector<nlohmann::json> records;
  for (const SweepPoint& p : points) {
    const bool bsp = p.Find("variant")->AsWord() == "bsp";
    const double seed = static_cast<double>(p.Find("seed")->integer);
    const bool np4 = p.Find("np")->integer == 4;
    const std::string column = p.Find("model")->AsWord() + p.Find("lr")->AsWord();
    if (column == "cnn0.1") continue;
    const bool odd = !bsp && !np4 && column == "mlp0.1";
    if (odd && seed == 3) continue;
    nlohmann::json r = {{"key", p.key}, {"exit_code", 0}};
    if (odd && seed == 2) {
      r["exit_code"] = 1;
      r["error"] = "diverged";
    } else {
      const double accuracy = bsp ? 80 + seed + (np4 ? 0.5 : 0) : 77 + 2 * seed + (np4 ? 0.25 : 0);
      r["summary"] = {{"test_accuracy", accuracy / 100}};
    }
    records.push_back(r);
  }
  return records;
}

TEST(PerSeedTables, EachSeedAndPairedDifferencesAgainstTheBaseline) {
  auto spec = Spec(kSeeded);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const std::vector<SweepPoint> points = ExpandSweep(*spec);
  const std::string tables =
      RenderPerSeedTables(*spec, GatherStudy(*spec, points, Records(points)));
  EXPECT_THAT(tables, HasSubstr("### study: final test accuracy (%) per seed\n"));
  EXPECT_THAT(tables, HasSubstr("#### model=mlp lr=0.05\n\n| variant | np | seed=1 | seed=2 | "
                                "seed=3 | mean ± std | against bsp, each seed | against bsp | "
                                "below bsp |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | "
                                "---: | ---: |\n"));
  EXPECT_THAT(tables, HasSubstr("| bsp | 2 | 81.00 | 82.00 | 83.00 | 82.00 ± 1.00 | – | – | – |\n"
                                "| bsp | 4 | 81.50 | 82.50 | 83.50 | 82.50 ± 1.00 | – | – | – |\n"
                                "| local_4 | 2 | 79.00 | 81.00 | 83.00 | 81.00 ± 2.00 | -2.00 / "
                                "-1.00 / +0.00 | -1.00 ± 1.00 | 2/3 |\n"
                                "| local_4 | 4 | 79.25 | 81.25 | 83.25 | 81.25 ± 2.00 | -2.25 / "
                                "-1.25 / -0.25 | -1.25 ± 1.00 | 3/3 |\n"));
  // A failed seed and one not run: only seed 1 pairs.
  EXPECT_THAT(tables, HasSubstr("| local_4 | 2 | 79.00 | failed | – | 79.00 (1/3) | -2.00 / – / – "
                                "| -2.00 | 1/1 |\n"));
  EXPECT_THAT(tables, HasSubstr("#### model=cnn lr=0.05\n"));
  EXPECT_THAT(tables, Not(HasSubstr("model=cnn lr=0.1")));
  // Three tables of four rows each: title, note, then per table a heading, header and rule.
  EXPECT_EQ(std::count(tables.begin(), tables.end(), '\n'), 3 + 3 * (5 + 4));
  // The table file carries the study table, then these.
  const std::string file = RenderMarkdownTable(*spec, points, Records(points));
  EXPECT_LT(file.find("mean ± std over seed 1, 2, 3"), file.find(tables));
}

TEST(PerSeedTables, WithoutABaselineOnlyTheSeeds) {
  std::string text = kSeeded;
  text.erase(text.find("baseline = \"bsp\"\n"));
  auto spec = Spec(text);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const std::vector<SweepPoint> points = ExpandSweep(*spec);
  const std::string tables =
      RenderPerSeedTables(*spec, GatherStudy(*spec, points, Records(points)));
  EXPECT_THAT(tables, HasSubstr("| variant | np | seed=1 | seed=2 | seed=3 | mean ± std |\n"));
  EXPECT_THAT(tables, HasSubstr("| local_4 | 4 | 79.25 | 81.25 | 83.25 | 81.25 ± 2.00 |\n"));
  EXPECT_THAT(tables, Not(HasSubstr("against")));
  // Nothing completed anywhere: no tables.
  EXPECT_EQ(RenderPerSeedTables(*spec, GatherStudy(*spec, points, {})), "");
}

TEST(PerSeedTables, WithoutSeedsNothing) {
  std::string text = kSeeded;
  text.erase(text.find("seeds = \"seed\"\n"));  // and the baseline: seed becomes a method
  auto spec = Spec(text);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const std::vector<SweepPoint> points = ExpandSweep(*spec);
  EXPECT_EQ(RenderPerSeedTables(*spec, GatherStudy(*spec, points, Records(points))), "");
}

TEST(PerSeedTables, BaselineMustBeAMethod) {
  std::string text = kSeeded;
  text.replace(text.find("baseline = \"bsp\""), 16, "baseline = \"bsq\"");
  auto typo = Spec(text);
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().message(),
            "s.toml:15: [report] baseline: 'bsq' is not a method of the sweep (a value of "
            "variant: bsp, local_4)");
  // Two method axes: the label is one value of each, joined by a space.
  const std::string two = kSeeded + "workers = \"\"\nmethods = [\"variant\", \"np\"]\n";
  auto one_word = Spec(two);
  ASSERT_FALSE(one_word.ok());
  EXPECT_THAT(one_word.status().message(),
              HasSubstr("'bsp' is not a method of the sweep (a value of variant and the other "
                        "method axes: bsp, local_4)"));
  std::string both = two;
  both.replace(both.find("baseline = \"bsp\""), 16, "baseline = \"bsp 4\"");
  EXPECT_TRUE(Spec(both).ok()) << Spec(both).status().ToString();
  both.replace(both.find("baseline = \"bsp 4\""), 18, "baseline = \"bsp 8\"");
  EXPECT_FALSE(Spec(both).ok());
}

}  // namespace
}  // namespace frugal::apps
