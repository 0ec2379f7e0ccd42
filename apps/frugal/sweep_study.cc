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

std::string Words(const SweepPoint& p, const std::vector<std::string>& axes, const char* sep,
                  bool with_names) {
  std::vector<std::string> parts;
  for (const std::string& a : axes) {
    const std::string& word = p.Find(a)->AsWord();
    parts.push_back(with_names ? a + "=" + word : word);
  }
  return fmt::format("{}", fmt::join(parts, sep));
}

struct StudyCell {
  std::vector<double> accuracies;  // percent, completed runs
  size_t failed = 0;
};

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

std::string RenderStudyTable(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                             const std::vector<nlohmann::json>& records) {
  const std::vector<std::string>& columns = spec.report.column_axes;
  std::vector<std::string> row_axes;
  size_t seeds = 1;
  std::vector<std::string> seed_words;
  for (const SweepAxis& a : spec.axes) {
    if (a.name == spec.report.seeds) {
      seeds = a.values.size();
      for (const FlagValue& v : a.values) seed_words.push_back(v.AsWord());
    } else if (!Contains(columns, a.name)) {
      row_axes.push_back(a.name);
    }
  }
  std::map<std::string, const nlohmann::json*> last;
  for (const nlohmann::json& r : records) {
    if (r.contains("key") && r["key"].is_string()) last[r["key"].get<std::string>()] = &r;
  }
  std::vector<std::string> row_keys;
  std::vector<const SweepPoint*> row_first;
  std::vector<std::string> column_keys;
  std::map<std::pair<std::string, std::string>, StudyCell> cells;
  for (const SweepPoint& p : points) {
    const std::string row = Words(p, row_axes, " ", false);
    const std::string column = Words(p, columns, " ", true);
    if (!Contains(row_keys, row)) {
      row_keys.push_back(row);
      row_first.push_back(&p);
    }
    if (!Contains(column_keys, column)) column_keys.push_back(column);
    StudyCell& cell = cells[{row, column}];
    auto it = last.find(p.key);
    if (it == last.end()) continue;
    if (!IsCompleted(*it->second)) {
      ++cell.failed;
      continue;
    }
    const RunMetrics m = ExtractMetrics(*it->second);
    if (m.test_accuracy) cell.accuracies.push_back(*m.test_accuracy);
  }

  std::string out = fmt::format("### {}: final test accuracy (%)", spec.name);
  if (!spec.report.seeds.empty()) {
    out += fmt::format(", mean ± std over {} {}", spec.report.seeds, fmt::join(seed_words, ", "));
  }
  out += "\n\n";
  if (!spec.description.empty()) out += spec.description + "\n\n";
  std::vector<std::string> fixed;
  for (const std::string& word : FlagWords(spec.base)) fixed.push_back("`" + word + "`");
  if (!fixed.empty()) out += fmt::format("Common flags: {}.\n\n", fmt::join(fixed, " "));
  out += "|";
  for (const std::string& a : row_axes) out += fmt::format(" {} |", a);
  if (row_axes.empty()) out += " sweep |";
  for (const std::string& c : column_keys) out += fmt::format(" {} |", MarkdownCell(c));
  out += "\n|";
  for (size_t i = 0; i < std::max<size_t>(row_axes.size(), 1); ++i) out += " --- |";
  for (size_t i = 0; i < column_keys.size(); ++i) out += " ---: |";
  out += "\n";
  for (size_t r = 0; r < row_keys.size(); ++r) {
    out += "|";
    for (const std::string& a : row_axes) {
      out += fmt::format(" {} |", MarkdownCell(row_first[r]->Find(a)->AsWord()));
    }
    if (row_axes.empty()) out += fmt::format(" {} |", MarkdownCell(spec.name));
    for (const std::string& c : column_keys) {
      const StudyCell& cell = cells[{row_keys[r], c}];
      std::string text = "–";
      if (!cell.accuracies.empty()) {
        text = FormatMeanStd(Summarize(cell.accuracies), seeds);
      } else if (cell.failed > 0) {
        text = "failed";
      }
      out += " " + text + " |";
    }
    out += "\n";
  }
  return out;
}

}  // namespace frugal::apps
