// `frugal bench pingpong`, `allreduce`, `exchange` and `round`: flags to
// options, then the benchmark (bench/) on every rank; rank 0 prints the table and writes the
// JSON lines. Also the helpers every `frugal bench` subcommand shares (commands.h).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "allreduce_bench.h"
#include "bench_util.h"
#include "commands.h"
#include "exchange_bench.h"
#include "pingpong.h"
#include "round_bench.h"

namespace frugal::apps {

Status CheckJsonPath(const std::string& path) {
  if (path.empty()) return Status::Ok();
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent)) {
    return InvalidArgumentError(
        fmt::format("--json {}: directory '{}' does not exist", path, parent.string()));
  }
  if (std::filesystem::is_directory(path)) {
    return InvalidArgumentError(fmt::format("--json {}: is a directory", path));
  }
  return Status::Ok();
}

Status PublishBench(const RankContext& context, const std::string& table,
                    const std::vector<nlohmann::json>& records, const std::string& json_path) {
  if (!context.is_root()) return Status::Ok();
  std::fputs(table.c_str(), stdout);
  std::fflush(stdout);
  if (!json_path.empty()) FRUGAL_RETURN_IF_ERROR(bench::WriteJsonLines(json_path, records));
  return Status::Ok();
}

namespace {

struct PingPongFlags {
  std::string sizes;
  int iters = 0;
  int warmup = 2;
  bool all_pairs = false;
  bool compare_mpi = false;
  int timeout_ms = 60000;
  std::string json;
};

struct AllreduceFlags {
  std::string sizes = "4K,64K,1M,16M,64M";
  std::string algorithms = "all";
  int iters = 10;
  int warmup = 2;
  int timeout_ms = 60000;
  std::string segment;  // empty: each algorithm's default segment
  int ranks_per_host = 0;
  int torus_rows = 0;
  std::string gloo_algorithm = "ring_chunked";
  std::string gloo_mode = std::string(GlooModeName(bench::GlooPeerOptions{}.mode));
  std::string gloo_store_dir;
  std::string gloo_iface;
  std::string json;
};

struct ExchangeFlags {
  std::string sizes = "1M,4M";
  std::string modes = "send,recv,both";
  int iters = 5;
  int warmup = 1;
  int timeout_ms = 60000;
  std::string json;
};

StatusOr<bench::ExchangeBenchOptions> ToOptions(const ExchangeFlags& flags) {
  bench::ExchangeBenchOptions options;
  FRUGAL_ASSIGN_OR_RETURN(options.sizes, bench::ParseByteSizeList(flags.sizes));
  FRUGAL_ASSIGN_OR_RETURN(std::vector<std::string> modes, bench::ParseNameList(flags.modes));
  options.modes.clear();
  for (const std::string& name : modes) {
    FRUGAL_ASSIGN_OR_RETURN(bench::ExchangeMode mode, bench::ParseExchangeMode(name));
    options.modes.push_back(mode);
  }
  if (flags.iters <= 0) return InvalidArgumentError("--iters must be positive");
  if (flags.warmup < 0) return InvalidArgumentError("--warmup must not be negative");
  if (flags.timeout_ms <= 0) return InvalidArgumentError("--timeout-ms must be positive");
  options.iters = flags.iters;
  options.warmup = flags.warmup;
  options.timeout = Duration(flags.timeout_ms);
  return options;
}

struct RoundFlags {
  std::string topology = "ring";
  std::string sizes = "1M,4M";
  int rounds = 20;
  int warmup = 2;
  uint64_t seed = 0;
  bool lockstep = false;
  int timeout_ms = 60000;
  std::string json;
};

StatusOr<bench::RoundBenchOptions> ToOptions(const RoundFlags& flags) {
  bench::RoundBenchOptions options;
  FRUGAL_ASSIGN_OR_RETURN(options.topology, ParseTopologySpec(flags.topology));
  FRUGAL_ASSIGN_OR_RETURN(options.sizes, bench::ParseByteSizeList(flags.sizes));
  if (flags.rounds <= 0) return InvalidArgumentError("--rounds must be positive");
  if (flags.warmup < 0) return InvalidArgumentError("--warmup must not be negative");
  if (flags.timeout_ms <= 0) return InvalidArgumentError("--timeout-ms must be positive");
  options.rounds = flags.rounds;
  options.warmup = flags.warmup;
  options.seed = flags.seed;
  options.lockstep = flags.lockstep;
  options.timeout = Duration(flags.timeout_ms);
  return options;
}

StatusOr<bench::PingPongOptions> ToOptions(const PingPongFlags& flags) {
  bench::PingPongOptions options;
  if (flags.sizes.empty()) {
    options.sizes = bench::DefaultPingPongSizes();
  } else {
    FRUGAL_ASSIGN_OR_RETURN(options.sizes, bench::ParseByteSizeList(flags.sizes));
  }
  if (flags.iters < 0) return InvalidArgumentError("--iters must not be negative");
  if (flags.warmup < 0) return InvalidArgumentError("--warmup must not be negative");
  if (flags.timeout_ms <= 0) return InvalidArgumentError("--timeout-ms must be positive");
  options.iters = flags.iters;
  options.warmup = flags.warmup;
  options.all_pairs = flags.all_pairs;
  options.compare_mpi = flags.compare_mpi;
  options.timeout = Duration(flags.timeout_ms);
  return options;
}

StatusOr<bench::AllreduceBenchOptions> ToOptions(const AllreduceFlags& flags) {
  bench::AllreduceBenchOptions options;
  FRUGAL_ASSIGN_OR_RETURN(options.sizes, bench::ParseByteSizeList(flags.sizes));
  if (flags.algorithms == "all") {
    options.algorithms = bench::DefaultAllreduceNames();
  } else {
    FRUGAL_ASSIGN_OR_RETURN(options.algorithms, bench::ParseNameList(flags.algorithms));
  }
  options.iters = flags.iters;
  options.warmup = flags.warmup;
  if (flags.timeout_ms <= 0) return InvalidArgumentError("--timeout-ms must be positive");
  options.timeout = Duration(flags.timeout_ms);
  if (!flags.segment.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(options.segment_bytes, bench::ParseByteSize(flags.segment));
  }
  options.ranks_per_host = flags.ranks_per_host;
  options.torus_rows = flags.torus_rows;
  FRUGAL_ASSIGN_OR_RETURN(options.gloo.algorithm, ParseGlooAlgorithm(flags.gloo_algorithm));
  options.gloo.store_dir = flags.gloo_store_dir;
  options.gloo.iface = flags.gloo_iface;
  FRUGAL_ASSIGN_OR_RETURN(options.gloo.mode, ParseGlooMode(flags.gloo_mode));
  FRUGAL_RETURN_IF_ERROR(bench::ValidateAllreduceBenchOptions(options));
  return options;
}

}  // namespace

void AddBenchCommand(CLI::App& app, Dispatcher& dispatcher) {
  CLI::App* bench = app.add_subcommand("bench", "Measure the transport and the collectives");
  bench->require_subcommand(1);
  AddBenchPingPongCommand(*bench, dispatcher);
  AddBenchAllreduceCommand(*bench, dispatcher);
  AddBenchExchangeCommand(*bench, dispatcher);
  AddBenchRoundCommand(*bench, dispatcher);
  AddBenchCompressCommand(*bench, dispatcher);
  AddBenchPolarCommand(*bench, dispatcher);
#ifdef FRUGAL_HAVE_TRAIN_COMMAND
  AddBenchContentionCommand(*bench, dispatcher);
#endif
}

void AddBenchPingPongCommand(CLI::App& bench, Dispatcher& dispatcher) {
  auto flags = std::make_shared<PingPongFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "pingpong", "Ping-pong latency and bandwidth between ranks, with an alpha-beta fit");
  cmd->add_option("--sizes", flags->sizes,
                  "Message sizes, e.g. 1,1K,64K,1M (default: powers of two from 1 B to 64M)")
      ->type_name("LIST");
  cmd->add_option("--iters", flags->iters, "Round trips timed per size (0: about 0.2 s worth)")
      ->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "Untimed round trips per size")->capture_default_str();
  cmd->add_flag("--compare-mpi", flags->compare_mpi,
                "Also time raw MPI round trips, interleaved with the transport's");
  cmd->add_flag("--all-pairs", flags->all_pairs,
                "Every pair of ranks, not only rank 0 with others");
  cmd->add_option("--timeout-ms", flags->timeout_ms, "Timeout of every wait")
      ->capture_default_str();
  cmd->add_option("--json", flags->json, "Write one JSON object per line to FILE")
      ->type_name("FILE");
  cmd->callback([flags, &dispatcher] {
    Action action;
    action.name = "bench pingpong";
    action.validate = [flags] { return ToOptions(*flags).status(); };
    action.check_files = [flags] { return CheckJsonPath(flags->json); };
    action.min_ranks = 2;
    action.run = [flags](RankContext& context) -> Status {
      FRUGAL_ASSIGN_OR_RETURN(bench::PingPongOptions options, ToOptions(*flags));
      FRUGAL_ASSIGN_OR_RETURN(std::vector<bench::PingPongPair> pairs,
                              bench::RunPingPong(context.world, options));
      return PublishBench(context, bench::PingPongTable(pairs), bench::PingPongJson(pairs),
                          flags->json);
    };
    dispatcher.Select(std::move(action));
  });
}

void AddBenchAllreduceCommand(CLI::App& bench, Dispatcher& dispatcher) {
  auto flags = std::make_shared<AllreduceFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "allreduce", "frugal's all-reduce algorithms against MPI_Allreduce and Gloo");
  cmd->add_option("--sizes", flags->sizes, "Buffer sizes in bytes (K, M, G suffixes)")
      ->type_name("LIST")
      ->capture_default_str();
  cmd->add_option(
         "--algorithms", flags->algorithms,
         "ring, rd, rabenseifner, tree, dbtree, hier, torus, direct, mpi, gloo, or all; ALGO@SIZE "
         "runs one of frugal's with segments of SIZE, ALGO:staged through the transport's "
         "staging copies, ALGO:fused as AllreduceFused of the buffer cut into ResNet-20's tensor "
         "sizes")
      ->type_name("LIST")
      ->capture_default_str();
  cmd->add_option("--iters", flags->iters, "Timed iterations per size and algorithm")
      ->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "Untimed iterations before them")
      ->capture_default_str();
  cmd->add_option("--timeout-ms", flags->timeout_ms, "Timeout of every wait")
      ->capture_default_str();
  cmd->add_option("--segment-bytes", flags->segment,
                  "Pipelining segment of frugal's algorithms (default: each algorithm's own; "
                  "ALGO@SIZE in --algorithms sets one case's)")
      ->type_name("SIZE");
  cmd->add_option("--ranks-per-host", flags->ranks_per_host,
                  "hier: ranks per host (0: group by host name)")
      ->capture_default_str();
  cmd->add_option("--torus-rows", flags->torus_rows, "torus: rows (0: closest to a square)")
      ->capture_default_str();
  cmd->add_option("--gloo-algorithm", flags->gloo_algorithm, "ring_chunked or halving_doubling")
      ->capture_default_str();
  cmd->add_option("--gloo-mode", flags->gloo_mode,
                  "Where Gloo's pairs send and receive: async (its I/O thread), sync or busypoll "
                  "(the calling thread; faster for small messages, but ranks sending each other "
                  "more than the socket buffers hold wait until the timeout)")
      ->capture_default_str();
  cmd->add_option("--gloo-store-dir", flags->gloo_store_dir,
                  "Directory for Gloo's rendezvous files, shared by all hosts (default: /tmp)")
      ->type_name("DIR");
  cmd->add_option("--gloo-iface", flags->gloo_iface, "Network interface for Gloo's TCP transport")
      ->type_name("IFACE");
  cmd->add_option("--json", flags->json, "Write one JSON object per (algorithm, size) to FILE")
      ->type_name("FILE");
  cmd->callback([flags, &dispatcher] {
    Action action;
    action.name = "bench allreduce";
    action.validate = [flags] { return ToOptions(*flags).status(); };
    action.check_files = [flags] { return CheckJsonPath(flags->json); };
    action.run = [flags](RankContext& context) -> Status {
      FRUGAL_ASSIGN_OR_RETURN(bench::AllreduceBenchOptions options, ToOptions(*flags));
      FRUGAL_ASSIGN_OR_RETURN(bench::AllreduceBenchReport report,
                              bench::RunAllreduceBench(context.world, options, context.logger));
      return PublishBench(context, bench::AllreduceTable(report), bench::AllreduceJson(report),
                          flags->json);
    };
    dispatcher.Select(std::move(action));
  });
}

void AddBenchExchangeCommand(CLI::App& bench, Dispatcher& dispatcher) {
  auto flags = std::make_shared<ExchangeFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "exchange",
      "Rank 0 against the other ranks: messages sent only, received only, or both at once (a "
      "gossip round; a parameter server's NIC with more than 2 ranks)");
  cmd->add_option("--sizes", flags->sizes, "Message sizes in bytes (K, M, G suffixes)")
      ->type_name("LIST")
      ->capture_default_str();
  cmd->add_option("--modes", flags->modes, "send, recv, both (as seen from rank 0)")
      ->type_name("LIST")
      ->capture_default_str();
  cmd->add_option("--iters", flags->iters, "Timed exchanges per size and mode")
      ->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "Untimed exchanges before them")
      ->capture_default_str();
  cmd->add_option("--timeout-ms", flags->timeout_ms, "Timeout of every wait")
      ->capture_default_str();
  cmd->add_option("--json", flags->json, "Write one JSON object per (size, mode) to FILE")
      ->type_name("FILE");
  cmd->callback([flags, &dispatcher] {
    Action action;
    action.name = "bench exchange";
    action.validate = [flags] { return ToOptions(*flags).status(); };
    action.check_files = [flags] { return CheckJsonPath(flags->json); };
    action.min_ranks = 2;
    action.run = [flags](RankContext& context) -> Status {
      FRUGAL_ASSIGN_OR_RETURN(bench::ExchangeBenchOptions options, ToOptions(*flags));
      FRUGAL_ASSIGN_OR_RETURN(std::vector<bench::ExchangeSample> samples,
                              bench::RunExchangeBench(context.world, options));
      return PublishBench(context, bench::ExchangeTable(samples), bench::ExchangeJson(samples),
                          flags->json);
    };
    dispatcher.Select(std::move(action));
  });
}

void AddBenchRoundCommand(CLI::App& bench, Dispatcher& dispatcher) {
  auto flags = std::make_shared<RoundFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "round", "Gossip rounds on a graph, back to back: the per-host rate of a round");
  cmd->add_option("--topology", flags->topology,
                  "ring, torus, exp, onepeer-exp, random-regular:degree=D, complete, file:PATH, "
                  "edges:U-V/...")
      ->capture_default_str();
  cmd->add_option("--sizes", flags->sizes, "Message sizes in bytes (K, M, G suffixes)")
      ->type_name("LIST")
      ->capture_default_str();
  cmd->add_option("--rounds", flags->rounds, "Timed rounds per size")->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "Untimed rounds before them")->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of random-regular graphs")->capture_default_str();
  cmd->add_flag("--lockstep", flags->lockstep,
                "A barrier before every round (its time left out) instead of rounds back to back");
  cmd->add_option("--timeout-ms", flags->timeout_ms, "Timeout of every wait")
      ->capture_default_str();
  cmd->add_option("--json", flags->json, "Write one JSON object per size to FILE")
      ->type_name("FILE");
  cmd->callback([flags, &dispatcher] {
    Action action;
    action.name = "bench round";
    action.validate = [flags] { return ToOptions(*flags).status(); };
    action.check_files = [flags] { return CheckJsonPath(flags->json); };
    action.min_ranks = 2;
    action.run = [flags](RankContext& context) -> Status {
      FRUGAL_ASSIGN_OR_RETURN(bench::RoundBenchOptions options, ToOptions(*flags));
      FRUGAL_ASSIGN_OR_RETURN(std::vector<bench::RoundSample> samples,
                              bench::RunRoundBench(context.world, options));
      return PublishBench(context, bench::RoundTable(samples), bench::RoundJson(samples),
                          flags->json);
    };
    dispatcher.Select(std::move(action));
  });
}

}  // namespace frugal::apps
