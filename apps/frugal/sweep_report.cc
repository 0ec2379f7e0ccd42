#include "sweep_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "gnuplot.h"
#include "sweep_per_seed.h"
#include "sweep_results.h"
#include "sweep_study.h"

namespace frugal::apps {
namespace fs = std::filesystem;

/*
 * Report rendering.
 *
 * Table (RenderMarkdownTable): the axes other than `report.columns` define the rows, in the
 * order the grid visits them (methods x workers in the shipped sweeps); the values of the
 * columns axis (the learning rates) are the columns; a cell is the final test accuracy of the
 * point's last completed record ("failed" / "–" otherwise), and the best cell of a row is bold.
 * The extra columns describe the run of the best cell: bytes sent per worker, compression ratio
 * (the run's own `compression_ratio`, else the baseline method's bytes in the same row position
 * divided by this run's bytes), wall time, and time to the target accuracy (first epoch record
 * at or above the target).
 *
 * Plots (RenderReport): the tuned axis is the last column axis (the learning rate; with
 * `columns = ["model", "lr"]` the model is not tuned over, so each model has plots of its own).
 * The axes that are neither methods nor the tuned axis define groups (e.g. one per worker count
 * and model); within a group each method contributes one line, taken from its run with the best
 * final accuracy over the tuned axis's values, as the survey plots each method at its best
 * learning rate. For every group three PNGs are drawn by gnuplot from one data file per line
 * (epoch, accuracy %, wall s, MB per worker): accuracy against epoch, wall time and bytes (log
 * scale when the bytes of the lines span more than 20x).
 */

namespace {

std::optional<double> NumberField(const nlohmann::json& j,
                                  std::initializer_list<const char*> names) {
  if (!j.is_object()) return std::nullopt;
  for (const char* name : names) {
    auto it = j.find(name);
    if (it != j.end() && it->is_number()) return it->get<double>();
  }
  return std::nullopt;
}

std::optional<double> Percent(std::optional<double> v) {
  if (v && *v <= 1.0) return *v * 100.0;
  return v;
}

std::optional<double> Accuracy(const nlohmann::json& j) {
  return Percent(NumberField(j, {"test_accuracy", "test_acc", "accuracy"}));
}
std::optional<double> Wall(const nlohmann::json& j) {
  return NumberField(j, {"wall_seconds", "elapsed_seconds", "time_seconds"});
}
std::optional<double> Bytes(const nlohmann::json& j) {
  return NumberField(j, {"bytes_per_worker", "bytes_sent_per_worker", "bytes_sent"});
}

std::string FormatSeconds(std::optional<double> s) {
  if (!s) return "–";
  return *s < 100 ? fmt::format("{:.1f}", *s) : fmt::format("{:.0f}", *s);
}

std::string FormatRatio(std::optional<double> r) {
  if (!r) return "–";
  return *r < 10 ? fmt::format("{:.2f}x", *r) : fmt::format("{:.0f}x", *r);
}

std::string FormatMegabytes(std::optional<double> b) {
  if (!b) return "–";
  double mb = *b / 1e6;
  if (mb >= 100) return fmt::format("{:.0f}", mb);
  if (mb >= 1) return fmt::format("{:.2f}", mb);
  return fmt::format("{:.3g}", mb);
}

struct Cell {
  const SweepPoint* point = nullptr;
  const nlohmann::json* record = nullptr;
  std::optional<RunMetrics> metrics;  // when completed
};

struct Row {
  std::string label_key;
  const SweepPoint* first = nullptr;
  std::vector<Cell> cells;  // one per column value
  int Best() const {
    int best = -1;
    for (size_t i = 0; i < cells.size(); ++i) {
      const auto& m = cells[i].metrics;
      if (!m || !m->test_accuracy) continue;
      if (best < 0 || *m->test_accuracy > *cells[best].metrics->test_accuracy) {
        best = static_cast<int>(i);
      }
    }
    return best;
  }
};

struct Layout {
  std::vector<std::string> row_axes;
  std::vector<std::string> column_values;  // words
  std::vector<Row> rows;
};

// Rows over the axes other than `column_axis`, cells over its values ("": one cell per row).
Layout MakeLayout(const SweepSpec& spec, const std::string& column_axis,
                  const std::vector<SweepPoint>& points,
                  const std::vector<nlohmann::json>& records) {
  Layout layout;
  for (const auto& a : spec.axes) {
    if (a.name == column_axis) {
      for (const auto& v : a.values) layout.column_values.push_back(v.AsWord());
    } else {
      layout.row_axes.push_back(a.name);
    }
  }
  if (layout.column_values.empty()) layout.column_values.push_back("");
  auto by_key = LastByKey(records);
  std::map<std::string, size_t> row_of;
  for (const auto& p : points) {
    std::string row_key = AxisWords(p, layout.row_axes);
    auto [it, inserted] = row_of.emplace(row_key, layout.rows.size());
    if (inserted) {
      Row row;
      row.label_key = row_key;
      row.first = &p;
      row.cells.resize(layout.column_values.size());
      layout.rows.push_back(std::move(row));
    }
    size_t column = 0;
    if (!column_axis.empty()) {
      std::string word = p.Find(column_axis)->AsWord();
      column = static_cast<size_t>(
          std::find(layout.column_values.begin(), layout.column_values.end(), word) -
          layout.column_values.begin());
    }
    Cell& cell = layout.rows[it->second].cells[column];
    cell.point = &p;
    auto r = by_key.find(p.key);
    if (r != by_key.end()) {
      cell.record = r->second;
      if (IsCompleted(*r->second)) cell.metrics = ExtractMetrics(*r->second);
    }
  }
  return layout;
}

// The same row position with the method axes set to the baseline label.
const Cell* BaselineCell(const SweepSpec& spec, const Layout& layout, const Row& row,
                         size_t column) {
  if (spec.report.baseline.empty()) return nullptr;
  for (const auto& other : layout.rows) {
    if (MethodLabel(spec, *other.first) == spec.report.baseline &&
        SameBesideMethods(spec, layout.row_axes, *other.first, *row.first)) {
      return &other.cells[column];
    }
  }
  return nullptr;
}

std::string Sanitize(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out.empty() ? "all" : out;
}

}  // namespace

std::string AxisWords(const SweepPoint& p, const std::vector<std::string>& axes, bool with_names) {
  std::vector<std::string> parts;
  for (const std::string& a : axes) {
    const std::string& word = p.Find(a)->AsWord();
    parts.push_back(with_names ? a + "=" + word : word);
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string MethodLabel(const SweepSpec& spec, const SweepPoint& p) {
  if (spec.report.methods.empty()) return spec.name;
  return AxisWords(p, spec.report.methods);
}

bool SameBesideMethods(const SweepSpec& spec, const std::vector<std::string>& axes,
                       const SweepPoint& a, const SweepPoint& b) {
  const std::vector<std::string>& methods = spec.report.methods;
  return std::all_of(axes.begin(), axes.end(), [&](const std::string& axis) {
    return std::find(methods.begin(), methods.end(), axis) != methods.end() ||
           a.Find(axis)->AsWord() == b.Find(axis)->AsWord();
  });
}

std::optional<double> RunMetrics::TimeTo(double target_percent) const {
  for (const auto& e : epochs) {
    if (e.test_accuracy && e.wall_seconds && *e.test_accuracy >= target_percent) {
      return e.wall_seconds;
    }
  }
  return std::nullopt;
}

RunMetrics ExtractMetrics(const nlohmann::json& record) {
  RunMetrics m;
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& summary = record.contains("summary") ? record["summary"] : empty;
  if (record.contains("epochs") && record["epochs"].is_array()) {
    for (const auto& e : record["epochs"]) {
      EpochMetrics em;
      em.epoch = NumberField(e, {"epoch"}).value_or(static_cast<double>(m.epochs.size() + 1));
      em.test_accuracy = Accuracy(e);
      em.wall_seconds = Wall(e);
      em.bytes_per_worker = Bytes(e);
      m.epochs.push_back(em);
    }
  }
  m.test_accuracy = Accuracy(summary);
  if (!m.test_accuracy && !m.epochs.empty()) m.test_accuracy = m.epochs.back().test_accuracy;
  m.wall_seconds = Wall(summary);
  if (!m.wall_seconds) m.wall_seconds = NumberField(record, {"wall_seconds"});
  m.bytes_per_worker = Bytes(summary);
  if (!m.bytes_per_worker && !m.epochs.empty())
    m.bytes_per_worker = m.epochs.back().bytes_per_worker;
  m.compression_ratio = NumberField(summary, {"compression_ratio"});
  return m;
}

std::string RenderMarkdownTable(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                const std::vector<nlohmann::json>& records) {
  if (UsesStudyTable(spec)) {
    const StudyGrid grid = GatherStudy(spec, points, records);
    const std::string per_seed = RenderPerSeedTables(spec, grid);
    return RenderStudyTable(spec, grid) + (per_seed.empty() ? "" : "\n" + per_seed);
  }
  Layout layout = MakeLayout(spec, spec.report.columns, points, records);
  const double target = spec.report.target_accuracy * 100.0;
  std::string out = fmt::format("### {}: final test accuracy (%)\n\n", spec.name);
  if (!spec.description.empty()) out += spec.description + "\n\n";
  std::vector<std::string> fixed;
  for (const auto& word : FlagWords(spec.base)) fixed.push_back("`" + word + "`");
  if (!fixed.empty()) out += fmt::format("Common flags: {}.\n", fmt::join(fixed, " "));
  bool has_columns = !spec.report.columns.empty();
  if (has_columns) {
    out +=
        fmt::format("Bold: the best `{}` of each row; the columns right of it describe that run.\n",
                    spec.report.columns);
  }
  // Without row axes the rows (one) are labelled by the sweep's name.
  const bool name_rows = layout.row_axes.empty();
  out += "\n|";
  if (name_rows) out += " sweep |";
  for (const auto& a : layout.row_axes) out += fmt::format(" {} |", a);
  for (const auto& c : layout.column_values) {
    out += has_columns ? fmt::format(" {}={} |", spec.report.columns, c) : " test acc. (%) |";
  }
  out += " MB/worker | compression | wall (s) |";
  if (target > 0) out += fmt::format(" time to {:g}% (s) |", target);
  out += "\n|";
  size_t label_cols = name_rows ? 1 : layout.row_axes.size();
  size_t ncols = label_cols + layout.column_values.size() + 3 + (target > 0 ? 1 : 0);
  for (size_t i = 0; i < ncols; ++i) out += i < label_cols ? " --- |" : " ---: |";
  out += "\n";
  for (const auto& row : layout.rows) {
    out += "|";
    if (name_rows) out += fmt::format(" {} |", MarkdownCell(spec.name));
    for (const auto& a : layout.row_axes) {
      out += fmt::format(" {} |", MarkdownCell(row.first->Find(a)->AsWord()));
    }
    int best = row.Best();
    for (size_t i = 0; i < row.cells.size(); ++i) {
      const Cell& cell = row.cells[i];
      std::string text = "–";
      if (cell.metrics && cell.metrics->test_accuracy) {
        text = fmt::format("{:.2f}", *cell.metrics->test_accuracy);
        if (static_cast<int>(i) == best && has_columns) text = "**" + text + "**";
      } else if (cell.record != nullptr && !IsCompleted(*cell.record)) {
        text = "failed";
      }
      out += " " + text + " |";
    }
    if (best >= 0) {
      const RunMetrics& m = *row.cells[best].metrics;
      std::optional<double> ratio = m.compression_ratio;
      if (!ratio) {
        const Cell* base = BaselineCell(spec, layout, row, static_cast<size_t>(best));
        if (base != nullptr && base->metrics && base->metrics->bytes_per_worker &&
            m.bytes_per_worker && *m.bytes_per_worker > 0) {
          ratio = *base->metrics->bytes_per_worker / *m.bytes_per_worker;
        }
      }
      out += fmt::format(" {} | {} | {} |", FormatMegabytes(m.bytes_per_worker), FormatRatio(ratio),
                         FormatSeconds(m.wall_seconds));
      if (target > 0) {
        auto t = m.TimeTo(target);
        out += t ? fmt::format(" {} |", FormatSeconds(t)) : " not reached |";
      }
    } else {
      out += " – | – | – |";
      if (target > 0) out += " – |";
    }
    out += "\n";
  }
  return out;
}

StatusOr<ReportFiles> RenderReport(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                   const std::vector<nlohmann::json>& records,
                                   const fs::path& out_dir, const Logger& logger) {
  ReportFiles files;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  files.table = out_dir / "table.md";
  {
    std::ofstream out(files.table, std::ios::trunc);
    out << RenderMarkdownTable(spec, points, records);
    if (!out) return IoError(fmt::format("cannot write {}", files.table.string()));
  }

  const std::string tuned =
      spec.report.column_axes.empty() ? std::string() : spec.report.column_axes.back();
  Layout layout = MakeLayout(spec, tuned, points, records);
  // Group axes: neither a method nor the tuned axis.
  std::vector<std::string> group_axes;
  for (const auto& a : spec.axes) {
    bool is_method = std::find(spec.report.methods.begin(), spec.report.methods.end(), a.name) !=
                     spec.report.methods.end();
    if (!is_method && a.name != tuned) group_axes.push_back(a.name);
  }
  struct Line {
    std::string method;
    const RunMetrics* metrics;
  };
  std::vector<std::pair<std::string, std::vector<Line>>> groups;
  for (const auto& row : layout.rows) {
    int best = row.Best();
    if (best < 0 || row.cells[best].metrics->epochs.empty()) continue;
    std::string group;
    std::vector<std::string> parts;
    for (const auto& g : group_axes) {
      parts.push_back(fmt::format("{}={}", g, row.first->Find(g)->AsWord()));
    }
    group = fmt::format("{}", fmt::join(parts, " "));
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == group; });
    if (it == groups.end()) {
      groups.emplace_back(group, std::vector<Line>{});
      it = groups.end() - 1;
    }
    it->second.push_back(Line{MethodLabel(spec, *row.first), &*row.cells[best].metrics});
  }
  if (groups.empty()) return files;

  fs::path plot_dir = out_dir / "plots";
  fs::create_directories(plot_dir, ec);
  if (ec) return IoError(fmt::format("cannot create {}: {}", plot_dir.string(), ec.message()));
  for (const auto& [group, lines] : groups) {
    std::string tag = Sanitize(group);
    std::vector<fs::path> data;
    double min_bytes = 0, max_bytes = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      fs::path path = plot_dir / fmt::format("{}_{}.dat", tag, i);
      std::ofstream out(path, std::ios::trunc);
      out << "# epoch test_accuracy_percent wall_seconds megabytes_per_worker  method: "
          << lines[i].method << "\n";
      auto opt = [](std::optional<double> v, double scale = 1) {
        return v ? fmt::format("{:.6g}", *v * scale) : std::string("?");
      };
      for (const auto& e : lines[i].metrics->epochs) {
        out << fmt::format("{:g} {} {} {}\n", e.epoch, opt(e.test_accuracy), opt(e.wall_seconds),
                           opt(e.bytes_per_worker, 1e-6));
        if (e.bytes_per_worker && *e.bytes_per_worker > 0) {
          double mb = *e.bytes_per_worker * 1e-6;
          min_bytes = min_bytes == 0 ? mb : std::min(min_bytes, mb);
          max_bytes = std::max(max_bytes, mb);
        }
      }
      if (!out) return IoError(fmt::format("cannot write {}", path.string()));
      data.push_back(path);
    }
    struct Figure {
      std::string name, xlabel;
      int column;
    };
    const Figure figures[] = {
        {"epoch", "epoch", 1}, {"time", "wall time (s)", 3}, {"bytes", "MB sent per worker", 4}};
    std::string script =
        "set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'\n"
        "set datafile missing '?'\nset grid\nset key bottom right\n"
        "set ylabel 'test accuracy (%)'\n";
    for (const auto& f : figures) {
      fs::path png = out_dir / fmt::format("accuracy_vs_{}_{}.png", f.name, tag);
      script += fmt::format("set output {}\n", GnuplotQuote(png.string()));
      std::string title = spec.name + (group.empty() ? "" : ", " + group);
      if (!tuned.empty()) title += ", each at its best " + tuned;
      script +=
          fmt::format("set title {}\nset xlabel {}\n", GnuplotQuote(title), GnuplotQuote(f.xlabel));
      bool log_x = f.column == 4 && min_bytes > 0 && max_bytes / min_bytes > 20;
      script += log_x ? "set logscale x\n" : "unset logscale x\n";
      script += "plot ";
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) script += ", \\\n     ";
        script += fmt::format("{} using {}:2 with linespoints lw 2 pt {} title {}",
                              GnuplotQuote(data[i].string()), f.column, (i % 12) + 1,
                              GnuplotQuote(lines[i].method));
      }
      script += "\n";
      files.plots.push_back(png);
    }
    FRUGAL_ASSIGN_OR_RETURN(std::string output, RunGnuplot(plot_dir / (tag + ".gp"), script));
    if (!output.empty()) logger.Debug(output);
  }
  return files;
}

std::string MarkdownCell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else
      out += c;
  }
  return out;
}

}  // namespace frugal::apps
