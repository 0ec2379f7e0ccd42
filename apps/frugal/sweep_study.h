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

#include <nlohmann/json.hpp>
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

std::string RenderStudyTable(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                             const std::vector<nlohmann::json>& records);

}  // namespace frugal::apps
