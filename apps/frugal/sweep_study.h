// The study table of a sweep, in the layout of the survey's comparisons: one row per method x
// workers (the axes that are neither columns nor seeds, in grid order), one column per
// combination of the column axes (model x learning rate, the first axis slowest), and in each
// cell the final test accuracy (%) as mean ± sample standard deviation over the values of the
// seeds axis whose runs completed. A cell with fewer completed seeds than the axis has says how
// many ("88.10 ± 0.20 (2/3)"); one with none says "failed" when a run failed, "–" otherwise.
//
// RenderMarkdownTable (sweep_report.h) renders this table when the sweep's [report] names seeds
// or several column axes.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "sweep_grid.h"
#include "sweep_spec.h"

namespace frugal::apps {

// Mean and sample standard deviation (n - 1; 0 for fewer than two values).
struct MeanStd {
  size_t count = 0;
  double mean = 0;
  double std = 0;
};
MeanStd Summarize(const std::vector<double>& values);

// "mean ± std" with two decimals ("mean" alone for one value), plus " (k/m)" when k < m.
std::string FormatMeanStd(const MeanStd& stats, size_t expected);

bool UsesStudyTable(const SweepSpec& spec);

// One cell of the study: the runs of one row and column, by seed.
struct StudyCell {
  std::map<size_t, double> accuracy;  // position in the seeds axis -> percent (completed runs)
  std::set<size_t> failed;            // positions whose last run failed

  std::vector<double> Accuracies() const;  // in seed order
};

// The study's rows, columns and cells, gathered from the last record of each point.
struct StudyGrid {
  std::vector<std::string> row_axes;         // axes that are neither columns nor seeds, grid order
  std::vector<std::string> seed_words;       // values of the seeds axis ({""} without one)
  std::vector<std::string> row_keys;         // the row axes' words, in grid order
  std::vector<const SweepPoint*> row_first;  // a point of each row (for its words)
  std::vector<std::string> column_keys;      // "model=resnet20 lr=0.1", in grid order
  std::map<std::pair<size_t, size_t>, StudyCell> cells;  // (row, column)

  const StudyCell* Find(size_t row, size_t column) const;
  // The row axes' part of a Markdown table: "| variant | np |", its rule "| --- | --- |" and a
  // row's words "| bsp | 8 |" (the sweep's name in a column "sweep" when there is no row axis).
  std::string HeaderCells() const;
  std::string RuleCells() const;
  std::string RowCells(const SweepSpec& spec, size_t row) const;
};
StudyGrid GatherStudy(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                      const std::vector<nlohmann::json>& records);

std::string RenderStudyTable(const SweepSpec& spec, const StudyGrid& grid);

}  // namespace frugal::apps
