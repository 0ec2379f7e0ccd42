// `frugal bench compress`: flags to options, then the compressor benchmark (bench/) on one rank,
// which prints the table and writes the JSON lines.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "bench_util.h"
#include "commands.h"
#include "compress_bench.h"

namespace frugal::apps {
namespace {

struct CompressFlags {
  size_t numel = 25'000'000;
  std::vector<std::string> compressors;
  int iters = 5;
  int warmup = 1;
  uint64_t seed = 1;
  size_t rows = 0;
  int memcpy_copies = 3;
  double max_baseline_spread = bench::kDefaultMaxBaselineSpread;
  std::string json;
};

StatusOr<bench::CompressBenchOptions> ToOptions(const CompressFlags& flags) {
  bench::CompressBenchOptions options;
  options.numel = flags.numel;
  options.compressors =
      flags.compressors.empty() ? bench::DefaultCompressBenchSpecs() : flags.compressors;
  options.iters = flags.iters;
  options.warmup = flags.warmup;
  options.seed = flags.seed;
  options.rows = flags.rows;
  options.memcpy_copies = flags.memcpy_copies;
  options.max_baseline_spread = flags.max_baseline_spread;
  FRUGAL_RETURN_IF_ERROR(bench::ValidateCompressBenchOptions(options));
  if (!flags.json.empty()) {
    std::filesystem::path parent = std::filesystem::path(flags.json).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent)) {
      return InvalidArgumentError(
          fmt::format("--json {}: directory '{}' does not exist", flags.json, parent.string()));
    }
  }
  return options;
}

}  // namespace

void AddBenchCompressCommand(CLI::App& bench, Dispatcher& dispatcher) {
  auto flags = std::make_shared<CompressFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "compress", "Encode/decode throughput of compressors against memcpy, and wire sizes");
  cmd->add_option("--numel", flags->numel, "Elements of the float32 input")->capture_default_str();
  cmd->add_option("--compressors", flags->compressors,
                  "Compressor specs separated by spaces, e.g. fp16 qsgd:levels=15,bucket=512 "
                  "(default: every quantizer)")
      ->type_name("SPEC ...");
  cmd->add_option("--iters", flags->iters, "Timed encodes and decodes per compressor")
      ->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "Untimed rounds before them")->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the input and of the compressors' streams")
      ->capture_default_str();
  cmd->add_option("--rows", flags->rows,
                  "Shape the input as a rows x (numel/rows) matrix, as a layer's weight (0: the "
                  "largest divisor of numel up to its square root; 1: a flat vector)")
      ->capture_default_str();
  cmd->add_option("--memcpy-copies", flags->memcpy_copies,
                  "Timed memcpy copies of the input before each timed encode (the baseline)")
      ->capture_default_str();
  cmd->add_option("--max-baseline-spread", flags->max_baseline_spread,
                  "Largest (p90 - p10) / median of the baseline's copy times for which ratios "
                  "are printed")
      ->capture_default_str();
  cmd->add_option("--json", flags->json, "Write one JSON object per compressor to FILE")
      ->type_name("FILE");
  cmd->callback([flags, &dispatcher] {
    Action action;
    action.name = "bench compress";
    action.validate = [flags] { return ToOptions(*flags).status(); };
    action.check_world = [](const Transport& world) {
      if (world.size() != 1) {
        return InvalidArgumentError("bench compress measures one process: run it without --np");
      }
      return Status::Ok();
    };
    action.run = [flags](RankContext& context) -> Status {
      FRUGAL_ASSIGN_OR_RETURN(bench::CompressBenchOptions options, ToOptions(*flags));
      FRUGAL_ASSIGN_OR_RETURN(bench::CompressBenchResult result, bench::RunCompressBench(options));
      std::fputs(bench::CompressTable(result).c_str(), stdout);
      std::fflush(stdout);
      if (!flags->json.empty()) {
        FRUGAL_RETURN_IF_ERROR(bench::WriteJsonLines(flags->json, bench::CompressJson(result)));
      }
      return Status::Ok();
    };
    dispatcher.Select(std::move(action));
  });
}

}  // namespace frugal::apps
