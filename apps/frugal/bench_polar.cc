// `frugal bench polar`: flags to options, the source's values (generated, a file of float32
// values, or a gradient of a model trained here), the benchmark (bench/polar_bench.h), then the
// table, the JSON lines and a PNG of distortion against rate with the bound (gnuplot).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "bench_util.h"
#include "commands.h"
#include "gnuplot.h"
#include "gradient_source.h"
#include "polar_bench.h"

namespace frugal::apps {
namespace {

struct PolarFlags {
  std::string source = "bss";
  std::vector<int> log_sizes = {8, 9, 10, 11};
  std::vector<double> rates = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
  size_t blocks = 1000;
  std::string mode;
  std::string construct = "pw";
  int list = 1;
  int iters = 3;
  uint64_t seed = 1;
  std::string json;
  std::string png;
};

Status CheckOutputPath(const std::string& flag, const std::string& path) {
  if (path.empty()) return Status::Ok();
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent)) {
    return InvalidArgumentError(
        fmt::format("{} {}: directory '{}' does not exist", flag, path, parent.string()));
  }
  return Status::Ok();
}

// The options without the source's values (validate must not read files or train).
StatusOr<bench::PolarBenchOptions> ToOptions(const PolarFlags& flags) {
  bench::PolarBenchOptions options;
  options.source = flags.source;
  options.log_sizes = flags.log_sizes;
  options.rates = flags.rates;
  options.blocks = flags.blocks;
  options.mode = flags.mode;
  options.construct = flags.construct;
  options.list = flags.list;
  options.iters = flags.iters;
  options.seed = flags.seed;
  if (!bench::IsGeneratedPolarSource(flags.source)) {
    if (flags.source.rfind("gradient:", 0) == 0) {
      FRUGAL_RETURN_IF_ERROR(ParseGradientSource(flags.source).status());
    } else if (flags.source.rfind("file:", 0) != 0 || flags.source.size() == 5) {
      return InvalidArgumentError(fmt::format(
          "--source {}: expected bss, gaussian, laplace, file:PATH or gradient:MODEL[:STEPS]",
          flags.source));
    }
    options.external = true;  // the values are read in LoadSource
  }
  FRUGAL_RETURN_IF_ERROR(bench::ValidatePolarBenchOptions(options));
  FRUGAL_RETURN_IF_ERROR(CheckOutputPath("--json", flags.json));
  FRUGAL_RETURN_IF_ERROR(CheckOutputPath("--png", flags.png));
  return options;
}

// Little-endian float32 values of a file.
StatusOr<std::vector<float>> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return NotFoundError(fmt::format("--source file:{}: cannot open it", path));
  const auto bytes = static_cast<size_t>(in.tellg());
  if (bytes % 4 != 0 || bytes == 0) {
    return InvalidArgumentError(fmt::format(
        "--source file:{}: {} bytes is not a whole number of float32 values", path, bytes));
  }
  std::vector<float> values(bytes / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(bytes));
  if (!in) return IoError(fmt::format("--source file:{}: read failed", path));
  return values;
}

Status LoadSource(const PolarFlags& flags, bench::PolarBenchOptions& options) {
  if (bench::IsGeneratedPolarSource(flags.source)) return Status::Ok();
  if (flags.source.rfind("file:", 0) == 0) {
    FRUGAL_ASSIGN_OR_RETURN(options.data, ReadFloats(flags.source.substr(5)));
  } else {
    FRUGAL_ASSIGN_OR_RETURN(GradientSourceOptions gradient, ParseGradientSource(flags.source));
    gradient.seed = flags.seed;
    FRUGAL_ASSIGN_OR_RETURN(options.data, TrainedGradient(gradient));
  }
  return bench::ValidatePolarBenchOptions(options);
}

// Distortion against rate, one line per block length, and the bound (of the first block length's
// sample; the bound of the sign source does not depend on it).
Status Plot(const std::vector<bench::PolarBenchRow>& rows, const std::string& png) {
  if (rows.empty()) return Status::Ok();
  const std::filesystem::path data_path = png + ".dat";
  std::map<int, std::vector<const bench::PolarBenchRow*>> by_n;
  for (const auto& r : rows) by_n[r.n].push_back(&r);
  {
    std::ofstream out(data_path);
    for (const auto& [n, list] : by_n) {
      out << "# N = " << (1 << n) << "\n";
      for (const auto* r : list) {
        out << fmt::format("{} {} {} {}\n", r->rate, r->distortion, r->stderr_mean, r->bound);
      }
      out << "\n\n";
    }
    if (!out) return IoError(fmt::format("cannot write {}", data_path.string()));
  }
  const bool hamming = rows[0].mode == "sign";
  std::string script =
      "set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'\n"
      "set output " +
      GnuplotQuote(png) + "\n" +
      fmt::format("set title {}\n", GnuplotQuote(fmt::format(
                                        "polar codes, source {}, mode {}: distortion against rate",
                                        rows[0].source, rows[0].mode))) +
      "set xlabel 'rate R (information bits per element)'\n" +
      fmt::format("set ylabel {}\n", GnuplotQuote(hamming ? "Hamming distortion (sign flips)"
                                                          : "normalized squared error")) +
      "set grid\nset key top right\nset xrange [0:1]\nset yrange [0:*]\nplot ";
  int index = 0;
  for (const auto& [n, list] : by_n) {
    script +=
        fmt::format("{} index {} using 1:2 with linespoints title {}, ", GnuplotQuote(data_path),
                    index++, GnuplotQuote(fmt::format("N = {}", 1 << n)));
  }
  script += fmt::format("{} index 0 using 1:4 with lines dashtype 2 lw 2 title {}\n",
                        GnuplotQuote(data_path),
                        GnuplotQuote(hamming ? "bound h^-1(1-R)" : "bound of +-alpha codes"));
  return RunGnuplot(png + ".gp", script).status();
}

}  // namespace

void AddBenchPolarCommand(CLI::App& bench, Dispatcher& dispatcher) {
  auto flags = std::make_shared<PolarFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "polar", "Polar-code distortion against rate with its bound, and encode/decode throughput");
  cmd->add_option("--source", flags->source,
                  "bss, gaussian, laplace, file:PATH (float32 values) or gradient:MODEL[:STEPS] "
                  "(a gradient of MODEL after STEPS steps of SGD, default 100)")
      ->capture_default_str();
  cmd->add_option("--n", flags->log_sizes, "Block lengths N = 2^n, comma separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--rates", flags->rates, "Rates in [0, 1], comma separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--blocks", flags->blocks, "Blocks averaged per row")->capture_default_str();
  cmd->add_option("--mode", flags->mode, "sign or soft (default: sign for bss, soft otherwise)");
  cmd->add_option("--construct", flags->construct, "pw, bb or ga")->capture_default_str();
  cmd->add_option("--list", flags->list, "SC list size")->capture_default_str();
  cmd->add_option("--iters", flags->iters, "Timed encodes and decodes per row")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the generated source")->capture_default_str();
  cmd->add_option("--json", flags->json, "Write one JSON object per row to FILE")
      ->type_name("FILE");
  cmd->add_option("--png", flags->png, "Plot distortion against rate to FILE (gnuplot)")
      ->type_name("FILE");
  cmd->callback([flags, &dispatcher] {
    Action action;
    action.name = "bench polar";
    action.validate = [flags] { return ToOptions(*flags).status(); };
    action.check_world = [](const Transport& world) {
      if (world.size() != 1) {
        return InvalidArgumentError("bench polar measures one process: run it without --np");
      }
      return Status::Ok();
    };
    action.run = [flags](RankContext& context) -> Status {
      FRUGAL_ASSIGN_OR_RETURN(bench::PolarBenchOptions options, ToOptions(*flags));
      FRUGAL_RETURN_IF_ERROR(LoadSource(*flags, options));
      FRUGAL_ASSIGN_OR_RETURN(std::vector<bench::PolarBenchRow> rows,
                              bench::RunPolarBench(options));
      std::fputs(bench::PolarTable(rows).c_str(), stdout);
      std::fflush(stdout);
      if (!flags->json.empty()) {
        FRUGAL_RETURN_IF_ERROR(bench::WriteJsonLines(flags->json, bench::PolarJson(rows)));
      }
      if (!flags->png.empty()) FRUGAL_RETURN_IF_ERROR(Plot(rows, flags->png));
      return Status::Ok();
    };
    dispatcher.Select(std::move(action));
  });
}

}  // namespace frugal::apps
