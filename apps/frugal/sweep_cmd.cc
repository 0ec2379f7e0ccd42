// `frugal sweep FILE.toml`: flags, validation of every point with the frugal command line's own
// parser, then the harness (sweep_run.h) and the report (sweep_report.h).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "commands.h"
#include "emulate_job.h"
#include "launcher.h"
#include "sweep_report.h"
#include "sweep_results.h"
#include "sweep_run.h"

namespace frugal::apps {
namespace {

struct SweepFlags {
  std::string file;
  std::string out;
  bool dry_run = false;
  bool render_only = false;
  bool no_retry = false;
  std::vector<std::string> only;  // AXIS=VALUE terms; empty: every point
  // Filled by validate.
  std::shared_ptr<SweepSpec> spec;
  std::vector<SweepPoint> points;
};

// Parses `args` (the words after `frugal`) as the frugal command line would, without running
// anything: CLI11 checks names, types and ranges; the selected command's own validate checks the
// rest (names of compressors, models, combinations).
Status ValidateFrugalArgs(const std::vector<std::string>& args) {
  CLI::App app("frugal", "frugal");
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions global;
  AddLaunchOptions(app, global.launch);
  std::string log_level = "warning";
  app.add_option("--log-level", log_level);
  Dispatcher dispatcher;
  AddBenchCommand(app, dispatcher);
#ifdef FRUGAL_HAVE_TRAIN_COMMAND
  AddTrainCommand(app, dispatcher);
#endif
  // --json is set by the harness for every run; give it here so commands that require it agree.
  std::vector<std::string> words = {"frugal"};
  words.insert(words.end(), args.begin(), args.end());
  words.push_back("--json=/dev/null");
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return InvalidArgumentError(e.what());
  }
  if (!dispatcher.selected()) return InvalidArgumentError("no command selected");
  const Action& action = *dispatcher.selected();
  if (action.run_local) {
    return InvalidArgumentError(fmt::format("'{}' cannot be swept", action.name));
  }
  if (action.validate) FRUGAL_RETURN_IF_ERROR(action.validate());
  if (action.check_files) FRUGAL_RETURN_IF_ERROR(action.check_files());
  if (!global.launch.emulate.empty()) {
    FRUGAL_RETURN_IF_ERROR(ValidateEmulateFlag(global.launch.emulate, global.launch.np,
                                               !global.launch.hostfile.empty())
                               .status());
  }
  return Status::Ok();
}

// The points that have, for every axis the AXIS=VALUE terms name, one of that axis's values
// (values of one axis are alternatives, axes must all match); a term that matches no point is
// kInvalidArgument naming the values there are.
StatusOr<std::vector<SweepPoint>> SelectPoints(const std::vector<SweepPoint>& points,
                                               const std::vector<std::string>& terms) {
  auto has = [](const SweepPoint& p, const std::string& term) {
    const std::string words = fmt::format(" {} ", p.Describe());
    return words.find(fmt::format(" {} ", term)) != std::string::npos;
  };
  std::map<std::string, std::vector<std::string>> by_axis;
  for (const std::string& term : terms) {
    if (std::none_of(points.begin(), points.end(),
                     [&](const SweepPoint& p) { return has(p, term); })) {
      std::vector<std::string> known;
      for (const SweepPoint& p : points) known.push_back(p.Describe());
      return InvalidArgumentError(
          fmt::format("--only {}: no point has it (points: {})", term, fmt::join(known, "; ")));
    }
    by_axis[term.substr(0, term.find('='))].push_back(term);
  }
  std::vector<SweepPoint> kept;
  for (const SweepPoint& p : points) {
    if (std::all_of(by_axis.begin(), by_axis.end(), [&](const auto& axis) {
          return std::any_of(axis.second.begin(), axis.second.end(),
                             [&](const std::string& t) { return has(p, t); });
        })) {
      kept.push_back(p);
    }
  }
  return kept;
}

}  // namespace

void AddSweepCommand(CLI::App& app, Dispatcher& dispatcher) {
  auto flags = std::make_shared<SweepFlags>();
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "Run a grid of configurations from a sweep file (resumable), then render a markdown table "
      "and PNG plots");
  sweep->add_option("file", flags->file, "Sweep file (TOML): name, [base], [axes], [report]")
      ->required()
      ->check(CLI::ExistingFile)
      ->type_name("FILE.toml");
  sweep
      ->add_option("--out", flags->out,
                   "Directory for results.jsonl, runs/, logs/, table.md and plots "
                   "(default: out/sweeps/NAME)")
      ->type_name("DIR");
  sweep->add_flag("--dry-run", flags->dry_run, "Print the command of every point and stop");
  sweep->add_flag("--render-only", flags->render_only,
                  "Render the table and plots from the results already there; run nothing");
  sweep->add_flag("--no-retry", flags->no_retry,
                  "Do not run again the points whose earlier run failed");
  sweep
      ->add_option("--only", flags->only,
                   "Run (and report) only the points with this axis value, e.g. "
                   "variant=dense or lr=0.1; repeat for several (values of one axis are "
                   "alternatives; every axis named must match)")
      ->type_name("AXIS=VALUE");
  sweep->callback([flags, &dispatcher]() {
    Action action;
    action.name = "sweep";
    action.validate = [flags]() -> Status {
      if (flags->dry_run && flags->render_only) {
        return InvalidArgumentError("--dry-run and --render-only exclude each other");
      }
      return Status::Ok();
    };
    // Reads the sweep file and checks every point (paths, root for --emulate): the machine's
    // view, so check_files rather than validate.
    action.check_files = [flags]() -> Status {
      FRUGAL_ASSIGN_OR_RETURN(SweepSpec spec, LoadSweepSpec(flags->file));
      flags->points = ExpandSweep(spec);
      if (!flags->only.empty()) {
        FRUGAL_ASSIGN_OR_RETURN(flags->points, SelectPoints(flags->points, flags->only));
      }
      flags->spec = std::make_shared<SweepSpec>(std::move(spec));
      if (flags->out.empty()) flags->out = "out/sweeps/" + flags->spec->name;
      // Every point must pass the command's own parser before anything runs.
      if (!flags->render_only) {
        FRUGAL_RETURN_IF_ERROR(
            ValidateSweep(flags->points, ValidateFrugalArgs).Annotate(flags->spec->source));
      }
      return Status::Ok();
    };
    action.run_local = [flags](const GlobalOptions& global) -> StatusOr<int> {
      Logger logger(global.log_level);
      if (flags->render_only) {
        FRUGAL_ASSIGN_OR_RETURN(auto records, ReadResults(flags->out + "/results.jsonl", logger));
        FRUGAL_ASSIGN_OR_RETURN(ReportFiles files, RenderReport(*flags->spec, flags->points,
                                                                records, flags->out, logger));
        std::fputs(RenderMarkdownTable(*flags->spec, flags->points, records).c_str(), stdout);
        for (const auto& plot : files.plots) std::fprintf(stderr, "plot: %s\n", plot.c_str());
        return 0;
      }
      SweepRunOptions options;
      FRUGAL_ASSIGN_OR_RETURN(std::vector<std::string> self, SelfCommand(1, nullptr));
      options.self = {self.front()};
      options.out_dir = flags->out;
      options.dry_run = flags->dry_run;
      options.retry_failed = !flags->no_retry;
      FRUGAL_ASSIGN_OR_RETURN(int code, RunSweep(*flags->spec, flags->points, options, logger));
      if (!flags->dry_run) {
        auto records = ReadResults(options.out_dir / "results.jsonl", logger);
        if (records.ok()) {
          std::fputs(RenderMarkdownTable(*flags->spec, flags->points, *records).c_str(), stdout);
        }
      }
      return code;
    };
    dispatcher.Select(std::move(action));
  });
}

}  // namespace frugal::apps
