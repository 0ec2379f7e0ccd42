// The per-seed tables (see sweep_per_seed.h).
#include "sweep_per_seed.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "sweep_report.h"
#include "sweep_study.h"

namespace frugal::apps {
namespace {

// The row of the baseline method with the same words on every other row axis.
std::optional<size_t> BaselineRow(const SweepSpec& spec, const StudyGrid& grid, size_t row) {
  if (spec.report.baseline.empty()) return std::nullopt;
  for (size_t b = 0; b < grid.row_keys.size(); ++b) {
    if (MethodLabel(spec, *grid.row_first[b]) == spec.report.baseline &&
        SameBesideMethods(spec, grid.row_axes, *grid.row_first[b], *grid.row_first[row])) {
      return b;
    }
  }
  return std::nullopt;
}

std::string Signed(double value) { return fmt::format("{:+.2f}", value); }

std::string SeedCell(const StudyCell& cell, size_t seed) {
  auto it = cell.accuracy.find(seed);
  if (it != cell.accuracy.end()) return fmt::format("{:.2f}", it->second);
  return cell.failed.count(seed) != 0 ? "failed" : "–";
}

// The three baseline columns of `cell` against `base` (the baseline row's cell, or null).
std::vector<std::string> AgainstBaseline(const StudyCell& cell, const StudyCell* base,
                                         size_t seeds) {
  std::vector<std::string> per_seed;
  std::vector<double> differences;
  size_t below = 0;
  for (size_t s = 0; s < seeds; ++s) {
    auto mine = cell.accuracy.find(s);
    std::optional<double> theirs;
    if (base != nullptr && base->accuracy.count(s) != 0) theirs = base->accuracy.at(s);
    if (mine == cell.accuracy.end() || !theirs) {
      per_seed.push_back("–");
      continue;
    }
    const double d = mine->second - *theirs;
    per_seed.push_back(Signed(d));
    differences.push_back(d);
    if (d < 0) ++below;
  }
  if (differences.empty()) return {"–", "–", "–"};
  const MeanStd stats = Summarize(differences);
  std::string mean = Signed(stats.mean);
  if (stats.count > 1) mean += fmt::format(" ± {:.2f}", stats.std);
  return {fmt::format("{}", fmt::join(per_seed, " / ")), mean,
          fmt::format("{}/{}", below, differences.size())};
}

}  // namespace

std::string RenderPerSeedTables(const SweepSpec& spec, const StudyGrid& grid) {
  if (spec.report.seeds.empty()) return "";
  const size_t seeds = grid.seed_words.size();
  const bool against = !spec.report.baseline.empty();
  const std::string& baseline = spec.report.baseline;
  std::string out =
      fmt::format("### {}: final test accuracy (%) per {}\n\n", spec.name, spec.report.seeds);
  if (against) {
    out += fmt::format(
        "Against {0}: this row minus the `{0}` row's run with the same {1}, for each {1}; then "
        "the mean ± std of those differences, and in how many of them this row ended below.\n",
        baseline, spec.report.seeds);
  }
  std::vector<std::optional<size_t>> baseline_rows;
  for (size_t r = 0; r < grid.row_keys.size(); ++r) {
    baseline_rows.push_back(BaselineRow(spec, grid, r));
  }
  bool any = false;
  for (size_t c = 0; c < grid.column_keys.size(); ++c) {
    std::vector<size_t> rows;
    bool completed = false;
    for (size_t r = 0; r < grid.row_keys.size(); ++r) {
      const StudyCell* cell = grid.Find(r, c);
      if (cell == nullptr || (cell->accuracy.empty() && cell->failed.empty())) continue;
      rows.push_back(r);
      completed = completed || !cell->accuracy.empty();
    }
    if (!completed) continue;
    any = true;
    out += fmt::format("\n#### {}\n\n", MarkdownCell(grid.column_keys[c])) + grid.HeaderCells();
    for (const std::string& s : grid.seed_words) {
      out += fmt::format(" {}={} |", spec.report.seeds, MarkdownCell(s));
    }
    out += " mean ± std |";
    if (against) {
      out += fmt::format(" against {0}, each {1} | against {0} | below {0} |",
                         MarkdownCell(baseline), spec.report.seeds);
    }
    out += "\n" + grid.RuleCells();
    for (size_t i = 0; i < seeds + 1 + (against ? 3 : 0); ++i) out += " ---: |";
    out += "\n";
    for (size_t r : rows) {
      const StudyCell& cell = *grid.Find(r, c);
      out += grid.RowCells(spec, r);
      for (size_t s = 0; s < seeds; ++s) out += " " + SeedCell(cell, s) + " |";
      out += " " +
             (cell.accuracy.empty() ? std::string("–")
                                    : FormatMeanStd(Summarize(cell.Accuracies()), seeds)) +
             " |";
      if (against) {
        const std::optional<size_t> b = baseline_rows[r];
        if (b == r) {
          out += " – | – | – |";
        } else {
          for (const std::string& text :
               AgainstBaseline(cell, b ? grid.Find(*b, c) : nullptr, seeds)) {
            out += " " + text + " |";
          }
        }
      }
      out += "\n";
    }
  }
  return any ? out : "";
}

}  // namespace frugal::apps
