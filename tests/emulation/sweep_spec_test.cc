// Sweep files: TOML reading, strict validation of sweep files, grid expansion, and each point's
// command line and key.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "sweep_grid.h"
#include "sweep_test_util.h"
#include "toml_file.h"

namespace frugal::apps {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::kGoodSweep;
using testing::kVariantSweep;
using testing::Spec;

// ---------------------------------------------------------------------------------------------
// TOML files

TEST(TomlFile, WordsAndFileOrder) {
  auto doc = ParseToml(R"(# a sweep
name = "quick"   # trailing comment
count = 1_000
neg = -3
lr = 0.05
tiny = 1e-5
big = 2.5E+3
whole = 2.0
on = true
lit = 'C:\path'
esc = "a\"b\\c\u00e9"
[axes]
zeta = [0.01,
      0.1, # comment inside
      ]
alpha = []
)",
                       "t.toml");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto word = [&](const char* key) { return *TomlWord(*doc->get(key)); };
  EXPECT_EQ(word("name"), "quick");
  EXPECT_EQ(word("count"), "1000");
  EXPECT_EQ(word("neg"), "-3");
  EXPECT_EQ(word("lr"), "0.05");
  EXPECT_EQ(word("tiny"), "1e-05");
  EXPECT_EQ(word("big"), "2500.0");
  EXPECT_EQ(word("whole"), "2.0");
  EXPECT_EQ(word("on"), "true");
  EXPECT_EQ(word("lit"), "C:\\path");
  EXPECT_EQ(word("esc"), "a\"b\\c\xc3\xa9");
  std::vector<std::string> order;
  for (const auto& [key, node] : InFileOrder(*doc)) order.push_back(key);
  EXPECT_EQ(order, (std::vector<std::string>{"name", "count", "neg", "lr", "tiny", "big", "whole",
                                             "on", "lit", "esc", "axes"}));
  const toml::table* axes = doc->get("axes")->as_table();
  ASSERT_NE(axes, nullptr);
  EXPECT_EQ(InFileOrder(*axes).front().first, "zeta");
  EXPECT_EQ(TomlLine(*axes->get("zeta")), 13);
  EXPECT_FALSE(TomlWord(*axes->get("zeta")).ok());
}

TEST(TomlFile, BadTomlIsOneLineWithFileAndLine) {
  for (const char* text : {"a = 1\na = 2\n", "[x]\n[x]\n", "a = \"open\n", "a = [1, 2\n",
                           "a = 1 b = 2\n", "a = yes\n", "a = 007\n", "a =\n", "\n\nkey\n"}) {
    auto doc = ParseToml(text, "t.toml");
    ASSERT_FALSE(doc.ok()) << text;
    EXPECT_EQ(doc.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(doc.status().message(), ::testing::StartsWith("t.toml:")) << text;
    EXPECT_EQ(doc.status().message().find('\n'), std::string::npos) << doc.status().message();
  }
  auto third = ParseToml("\n\nkey\n", "t.toml");
  EXPECT_THAT(third.status().message(), ::testing::StartsWith("t.toml:3:"));
  EXPECT_EQ(ReadTomlFile("/nonexistent/x.toml").status().code(), StatusCode::kNotFound);
}

TEST(TomlFile, FlagFileReadsTheTopAndItsSection) {
  const fs::path path = fs::temp_directory_path() / fmt::format("frugal-flags-{}.toml", getpid());
  auto read = [&](const std::string& text) {
    std::ofstream(path) << text;
    return ReadFlagFile(path.string(), "train");
  };
  auto ok = read("epochs = 3\n[train]\nlr = 0.1\nfast = true\nsizes = [1, 2]\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 4u);
  EXPECT_EQ((*ok)[0].key, "epochs");
  EXPECT_EQ((*ok)[0].words, std::vector<std::string>{"3"});
  EXPECT_EQ((*ok)[1].words, std::vector<std::string>{"0.1"});
  EXPECT_EQ((*ok)[1].line, 3);
  EXPECT_EQ((*ok)[2].words, std::vector<std::string>{"true"});
  EXPECT_EQ((*ok)[3].words, (std::vector<std::string>{"1", "2"}));
  auto other = read("[bench]\nlr = 1\n");
  EXPECT_THAT(other.status().message(), HasSubstr(":1: unknown table [bench] (only [train])"));
  auto nested = read("[train]\nlr = [[1]]\n");
  EXPECT_THAT(nested.status().message(), HasSubstr(":2: lr: expected a string, number or boolean"));
  auto date = read("when = 2024-01-01\n");
  EXPECT_THAT(date.status().message(), HasSubstr("not a date"));
  fs::remove(path);
}

// ---------------------------------------------------------------------------------------------
// Sweep files

TEST(SweepSpec, ReadsAGoodFileWithReportDefaults) {
  auto spec = Spec(kGoodSweep);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "demo");
  EXPECT_EQ(spec->timeout, std::chrono::minutes(5));
  EXPECT_EQ(spec->command, std::vector<std::string>{"train"});
  ASSERT_EQ(spec->base.size(), 3u);
  ASSERT_EQ(spec->axes.size(), 3u);
  EXPECT_EQ(spec->report.columns, "lr");
  EXPECT_EQ(spec->report.workers, "np");
  EXPECT_EQ(spec->report.methods, std::vector<std::string>{"compressor"});
  EXPECT_DOUBLE_EQ(spec->report.target_accuracy, 0.34);
}

TEST(SweepSpec, RefusesBadFilesBeforeAnythingRuns) {
  struct Case {
    std::string text;
    const char* says;
  };
  const std::string axes = "[axes]\nlr = [0.1]\n";
  for (const Case& c : {
           Case{axes, "needs a name"},
           Case{"name = \"x\"\n", "no [axes]"},
           Case{"name = \"x y\"\n" + axes, "name may only hold"},
           Case{"name = \"x\"\nepochs = 3\n" + axes, "s.toml:2: unknown key 'epochs'"},
           Case{"name = \"x\"\n[axes]\nlr = []\n", "s.toml:3: [axes] lr is empty"},
           Case{"name = \"x\"\n[axes]\nlr = 0.1\n", "must be an array"},
           Case{"name = \"x\"\n[axes]\nlr = [0.1, 0.1]\n", "lists 0.1 twice"},
           Case{"name = \"x\"\n[base]\nlr = [0.1]\n" + axes, "belong in [axes]"},
           Case{"name = \"x\"\n[base]\nlr = 0.1\n" + axes, "in both [base] and [axes]"},
           Case{"name = \"x\"\n[base]\njson = \"a\"\n" + axes, "set by the sweep harness"},
           Case{"name = \"x\"\n[base]\nLR = 1\n" + axes, "not a long flag name"},
           Case{"name = \"x\"\n[grid]\n" + axes, "unknown table [grid]"},
           Case{"name = \"x\"\n" + axes + "[report]\ncolumns = \"np\"\n", "'np' is not an axis"},
           Case{"name = \"x\"\n" + axes + "[report]\nmethods = [\"model\"]\n", "not an axis"},
           Case{"name = \"x\"\n" + axes + "[report]\ntarget_accuracy = 88\n", "fraction"},
           Case{"name = \"x\"\n" + axes + "[report]\ncolour = \"red\"\n", "unknown key 'colour'"},
           Case{"name = \"x\"\n" + axes + "[report]\nmethods = [\"lr\"]\n", "cannot be a method"},
           Case{"name = \"x\"\ntimeout_minutes = 0\n" + axes, "timeout_minutes"},
           Case{"name = \"x\"\ncommand = []\n" + axes, "command must be"},
           Case{"name = 1\n" + axes, "s.toml:1: name must be a string"},
           Case{"name = \"x\"\n[base]\nopt = {a = 1}\n" + axes,
                "s.toml:3: [base] opt: expected a string, number or boolean, not a table"},
           Case{"name = \"x\"\n[axes]\nlr = [[0.1]]\n", "s.toml:3: [axes] lr: expected"},
           Case{"name = \"x\"\n[axes]\nstart = [2024-01-01]\n", "not a date"},
           Case{"name = \"x\"\n[axes]\nlr = [nan]\n", "not a finite number"},
           Case{"name = \"x\"\n[axes\nlr = [1]\n", "s.toml:2:"},
       }) {
    auto spec = Spec(c.text);
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(spec.status().message(), HasSubstr(c.says)) << c.text;
  }
}

TEST(ExpandSweep, CartesianProductLastAxisFastest) {
  auto spec = Spec(kGoodSweep);
  ASSERT_TRUE(spec.ok());
  auto points = ExpandSweep(*spec);
  ASSERT_EQ(points.size(), 8u);
  EXPECT_EQ(points[0].Describe(), "compressor=none np=2 lr=0.01");
  EXPECT_EQ(points[1].Describe(), "compressor=none np=2 lr=0.1");
  EXPECT_EQ(points[2].Describe(), "compressor=none np=4 lr=0.01");
  EXPECT_EQ(points[7].Describe(), "compressor=topk:ratio=0.01,ef=1 np=4 lr=0.1");
  EXPECT_EQ(points[7].args,
            (std::vector<std::string>{"train", "--model=mlp", "--epochs=3", "--fast",
                                      "--compressor=topk:ratio=0.01,ef=1", "--np=4", "--lr=0.1"}));
  std::set<std::string> keys, ids;
  for (const auto& p : points) {
    keys.insert(p.key);
    ids.insert(p.id);
  }
  EXPECT_EQ(keys.size(), 8u);
  EXPECT_EQ(ids.size(), 8u);
}

TEST(ExpandSweep, KeyDependsOnValuesNotOnTheOrderOfLines) {
  auto a = Spec("name = \"x\"\n[base]\nepochs = 3\nmodel = \"mlp\"\n[axes]\nlr = [0.1]\n");
  auto b = Spec("name = \"x\"\n[base]\nmodel = \"mlp\"\nepochs = 3\n[axes]\nlr = [0.1]\n");
  auto c = Spec("name = \"x\"\n[base]\nmodel = \"mlp\"\nepochs = 4\n[axes]\nlr = [0.1]\n");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(ExpandSweep(*a)[0].key, ExpandSweep(*b)[0].key);
  EXPECT_NE(ExpandSweep(*a)[0].key, ExpandSweep(*c)[0].key);
}

TEST(SweepVariants, AreTheFirstAxisAndAddTheirWords) {
  auto spec = Spec(kVariantSweep);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->axes.size(), 2u);
  EXPECT_EQ(spec->axes[0].name, "variant");
  EXPECT_EQ(spec->report.methods, std::vector<std::string>{"variant"});
  auto points = ExpandSweep(*spec);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].Describe(), "variant=dense lr=0.01");
  EXPECT_EQ(points[0].args, (std::vector<std::string>{"train", "--np=4", "--lr=0.01"}));
  EXPECT_EQ(points[3].Describe(), "variant=topk_ef lr=0.1");
  EXPECT_EQ(points[3].args, (std::vector<std::string>{"train", "--np=4", "--lr=0.1",
                                                      "--compressor=topk:ratio=0.01", "--ef"}));
  // The words are part of a run's identity.
  auto changed =
      Spec(std::string(kVariantSweep)
               .replace(std::string(kVariantSweep).find("\"--ef\""), 6, "\"--ef=false\""));
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_EQ(ExpandSweep(*changed)[1].key, points[1].key);  // dense, lr=0.1
  EXPECT_NE(ExpandSweep(*changed)[3].key, points[3].key);
}

TEST(SweepVariants, AreCheckedLikeFlags) {
  struct Case {
    std::string text;
    const char* says;
  };
  const std::string head = "name = \"x\"\n[base]\nnp = 4\n[axes]\nlr = [0.1]\n";
  for (const Case& c : {
           Case{head + "[variants]\n", "[variants] is empty"},
           Case{head + "[variants]\na = \"--ef\"\n", "must be an array of flags"},
           Case{head + "[variants]\na = [1]\n", "must be an array of flags"},
           Case{head + "[variants]\na = [\"ef\"]\n", "'ef' is not a flag"},
           Case{head + "[variants]\na = [\"--np=8\"]\n", "sets --np, which [base] or [axes]"},
           Case{head + "[variants]\na = [\"--lr=1\"]\n", "sets --lr, which"},
           Case{head + "[variants]\na = [\"--ef\", \"--ef=false\"]\n", "sets --ef twice"},
           Case{head + "[variants]\na = [\"--json=x\"]\n", "set by the sweep harness"},
           Case{"name = \"x\"\n[axes]\nvariant = [1]\n", "names the axis of [variants]"},
       }) {
    auto spec = Spec(c.text);
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.says)) << c.text;
  }
  auto only_variants = Spec("name = \"x\"\n[variants]\na = []\nb = [\"--ef\"]\n");
  ASSERT_TRUE(only_variants.ok()) << only_variants.status().ToString();
  EXPECT_EQ(ExpandSweep(*only_variants).size(), 2u);
}

TEST(FlagWords, BooleansAndValues) {
  FlagValue yes, no, lr;
  yes.type = no.type = FlagValue::Type::kBool;
  yes.boolean = true;
  yes.word = "true";
  no.word = "false";
  lr.type = FlagValue::Type::kFloat;
  lr.word = "0.05";
  EXPECT_EQ(FlagWords({{"ef", yes}, {"ef2", no}, {"lr", lr}}),
            (std::vector<std::string>{"--ef", "--ef2=false", "--lr=0.05"}));
}

TEST(ValidateSweep, NamesTheRefusedPoint) {
  auto spec = Spec(kGoodSweep);
  ASSERT_TRUE(spec.ok());
  auto points = ExpandSweep(*spec);
  Status s = ValidateSweep(points, [](const std::vector<std::string>& args) {
    for (const auto& a : args) {
      if (a.rfind("--compressor=topk", 0) == 0) return InvalidArgumentError("unknown compressor");
    }
    return Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("point 4 (compressor=topk:ratio=0.01,ef=1 np=2 lr=0.01)"));
  EXPECT_THAT(s.message(), HasSubstr("unknown compressor"));
}

}  // namespace
}  // namespace frugal::apps
