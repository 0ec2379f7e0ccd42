// The record of a sweep: results.jsonl, one JSON object per finished run, appended and flushed
// one at a time so that a sweep killed at any moment loses at most the run in progress.
//
// A record: {key, id, sweep, index, point, command, exit_code, wall_seconds, finished, log, and
// either epochs + summary (the run's own `--json` lines, FoldRunJson) or error}.
//
// Thread safety: free functions; one writer per file.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "frugal/logging.h"
#include "frugal/status.h"

namespace frugal::apps {

// Results file: one JSON object per line. Lines that do not parse (a run killed while writing)
// are skipped with a warning.
StatusOr<std::vector<nlohmann::json>> ReadResults(const std::filesystem::path& path,
                                                  const Logger& logger);
// Appends one line and flushes it to disk.
Status AppendResult(const std::filesystem::path& path, const nlohmann::json& record);
// The last record of each point, by key (a point run again keeps its latest).
std::map<std::string, const nlohmann::json*> LastByKey(const std::vector<nlohmann::json>& records);
// True when `record` is a finished, successful run (exit code 0 and a summary).
bool IsCompleted(const nlohmann::json& record);

// Folds the JSON lines a `frugal train --json` run wrote into `record`: "epochs" (the lines with
// an epoch) and "summary" (the line with "event":"summary"). kIoError when the file cannot be
// read, kMalformed for a line that is not a JSON object or a run without a summary.
Status FoldRunJson(const std::filesystem::path& path, nlohmann::json& record);

}  // namespace frugal::apps
