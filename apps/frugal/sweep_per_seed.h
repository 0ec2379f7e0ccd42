// The per-seed tables of a study sweep: what mean ± std hides. For each column of the study table
// (model x learning rate) that has a completed run, one table with the study table's rows and
//   - each seed's final test accuracy (%), then the mean ± std over the seeds;
//   - with `[report] baseline` (a method, e.g. "bsp"): against the baseline row of the same
//     non-method row axes (the same worker count), each seed's difference (this row minus the
//     baseline's run with the same seed), the mean ± std of those paired differences, and in how
//     many of the paired seeds this row ended below the baseline ("3/3").
// A run that failed reads "failed", one not run "–"; rows with no run in the column are left out.
//
// RenderMarkdownTable (sweep_report.h) appends these tables to the study table when the sweep's
// [report] names seeds.
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "sweep_spec.h"
#include "sweep_study.h"

namespace frugal::apps {

std::string RenderPerSeedTables(const SweepSpec& spec, const StudyGrid& grid);

}  // namespace frugal::apps
