// The study table (see sweep_study.h).
#include "sweep_study.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "sweep_report.h"
#include "sweep_results.h"

namespace frugal::apps {
namespace {

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

MeanStd Summarize(const std::vector<double>& values) {
  MeanStd s;
  s.count = values.size();
  if (values.empty()) return s;
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  if (values.size() > 1) {
    double squares = 0;
    for (double v : values) squares += (v - s.mean) * (v - s.mean);
    s.std = std::sqrt(squares / static_cast<double>(values.size() - 1));
  }
  return s;
}

std::string FormatMeanStd(const MeanStd& stats, size_t expected) {
  std::string text = stats.count > 1 ? fmt::format("{:.2f} ± {:.2f}", stats.mean, stats.std)
                                     : fmt::format("{:.2f}", stats.mean);
  if (stats.count < expected) text += fmt::format(" ({}/{})", stats.count, expected);
  return text;
}

bool UsesStudyTable(const SweepSpec& spec) {
  return !spec.report.seeds.empty() || spec.report.column_axes.size() > 1;
}

std::vector<double> StudyCell::Accuracies() const {
  std::vector<double> values;
  for (const auto& [seed, percent] : accuracy) values.push_back(percent);
  return values;
}

const StudyCell* StudyGrid::Find(size_t row, size_t column) const {
  auto it = cells.find({row, column});
  return it == cells.end() ? nullptr : &it->second;
}

std::string StudyGrid::HeaderCells() const {
  std::string out = "|";
  for (const std::string& a : row_axes) out += fmt::format(" {} |", a);
  return row_axes.empty() ? out + " sweep |" : out;
}

std::string StudyGrid::RuleCells() const {
  std::string out = "|";
  for (size_t i = 0; i < std::max<size_t>(row_axes.size(), 1); ++i) out += " --- |";
  return out;
}

std::string StudyGrid::RowCells(const SweepSpec& spec, size_t row) const {
  std::string out = "|";
  for (const std::string& a : row_axes) {
    out += fmt::format(" {} |", MarkdownCell(row_first[row]->Find(a)->AsWord()));
  }
  return row_axes.empty() ? out + fmt::format(" {} |", MarkdownCell(spec.name)) : out;
}

StudyGrid GatherStudy(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                      const std::vector<nlohmann::json>& records) {
  const std::vector<std::string>& columns = spec.report.column_axes;
  StudyGrid grid;
  for (const SweepAxis& a : spec.axes) {
    if (a.name == spec.report.seeds) {
      for (const FlagValue& v : a.values) grid.seed_words.push_back(v.AsWord());
    } else if (!Contains(columns, a.name)) {
      grid.row_axes.push_back(a.name);
    }
  }
  if (grid.seed_words.empty()) grid.seed_words.push_back("");
  const std::map<std::string, const nlohmann::json*> last = LastByKey(records);
  for (const SweepPoint& p : points) {
    const std::string row = AxisWords(p, grid.row_axes);
    const std::string column = AxisWords(p, columns, true);
    auto row_it = std::find(grid.row_keys.begin(), grid.row_keys.end(), row);
    if (row_it == grid.row_keys.end()) {
      grid.row_keys.push_back(row);
      grid.row_first.push_back(&p);
      row_it = grid.row_keys.end() - 1;
    }
    auto column_it = std::find(grid.column_keys.begin(), grid.column_keys.end(), column);
    if (column_it == grid.column_keys.end()) {
      grid.column_keys.push_back(column);
      column_it = grid.column_keys.end() - 1;
    }
    StudyCell& cell = grid.cells[{static_cast<size_t>(row_it - grid.row_keys.begin()),
                                  static_cast<size_t>(column_it - grid.column_keys.begin())}];
    size_t seed = 0;
    if (!spec.report.seeds.empty()) {
      const std::string& word = p.Find(spec.report.seeds)->AsWord();
      seed = static_cast<size_t>(std::find(grid.seed_words.begin(), grid.seed_words.end(), word) -
                                 grid.seed_words.begin());
    }
    auto it = last.find(p.key);
    if (it == last.end()) continue;
    if (!IsCompleted(*it->second)) {
      cell.failed.insert(seed);
      continue;
    }
    const RunMetrics m = ExtractMetrics(*it->second);
    if (m.test_accuracy) cell.accuracy[seed] = *m.test_accuracy;
  }
  return grid;
}

std::string RenderStudyTable(const SweepSpec& spec, const StudyGrid& grid) {
  const size_t seeds = grid.seed_words.size();
  std::string out = fmt::format("### {}: final test accuracy (%)", spec.name);
  if (!spec.report.seeds.empty()) {
    out +=
        fmt::format(", mean ± std over {} {}", spec.report.seeds, fmt::join(grid.seed_words, ", "));
  }
  out += "\n\n";
  if (!spec.description.empty()) out += spec.description + "\n\n";
  std::vector<std::string> fixed;
  for (const std::string& word : FlagWords(spec.base)) fixed.push_back("`" + word + "`");
  if (!fixed.empty()) out += fmt::format("Common flags: {}.\n\n", fmt::join(fixed, " "));
  out += grid.HeaderCells();
  for (const std::string& c : grid.column_keys) out += fmt::format(" {} |", MarkdownCell(c));
  out += "\n" + grid.RuleCells();
  for (size_t i = 0; i < grid.column_keys.size(); ++i) out += " ---: |";
  out += "\n";
  for (size_t r = 0; r < grid.row_keys.size(); ++r) {
    out += grid.RowCells(spec, r);
    for (size_t c = 0; c < grid.column_keys.size(); ++c) {
      const StudyCell* cell = grid.Find(r, c);
      std::string text = "–";
      if (cell != nullptr && !cell->accuracy.empty()) {
        text = FormatMeanStd(Summarize(cell->Accuracies()), seeds);
      } else if (cell != nullptr && !cell->failed.empty()) {
        text = "failed";
      }
      out += " " + text + " |";
    }
    out += "\n";
  }
  return out;
}

}  // namespace frugal::apps
