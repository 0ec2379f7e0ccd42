// `frugal simulate`: the step simulator (frugal/simulate.h) over grids of workers, bandwidths
// and methods. Layers come from --layers (a table) or --timeline (a `frugal train --timeline`
// trace, with --model for the tensors' sizes); the architecture from --arch and --sync (as
// `frugal train`'s); the network from --alpha-us, --host-gbit,
// --ranks-per-host, --hosts-per-rack, --rack-gbit and the --bandwidth-gbit list (the NICs);
// each --compress SPEC (repeatable; "none" is dense) is one method, its encode and decode rates
// from --bench-compress (the `frugal bench compress --json` records, matched by spec); over a
// parameter server --compress compresses the pushes and --compress-pull the answers. Prints a
// table; with --out DIR also writes simulate.jsonl and one PNG per bandwidth of the speed-up
// (n x scaling efficiency) against the workers, one line per method (gnuplot).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "commands.h"
#include "frugal/gossip_graph.h"
#include "frugal/simulate.h"
#include "frugal/strategy.h"
#include "frugal_torch/models.h"
#include "gnuplot.h"
#include "network_fit.h"
#include "simulate_profile.h"
#include "train_flags.h"

namespace frugal::apps {
namespace {

namespace fs = std::filesystem;

struct SimulateFlags {
  std::string layers;
  std::string timeline;
  std::string trace_rank = "0";  // a rank, or "slowest"
  std::string model = "cnn";
  std::vector<int> np = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  std::vector<double> bandwidth_gbit = {1, 10, 100};
  double alpha_us = 50;
  std::string fit;        // alpha and the NIC's rate from a `frugal bench allreduce --json` record
  std::string fit_round;  // gossip: the round rate from a `frugal bench round --json` record
  double duplex_share = 1;     // ps: each direction's share of the NIC when both are busy
  std::string fit_duplex;      // ps: the duplex share from a `frugal bench exchange --json` record
  double contention = 1;       // compute's slowdown while a message moves
  std::string fit_contention;  // the same from a `frugal bench contention --json` record
  double host_gbit = 40;
  int ranks_per_host = 1;
  int hosts_per_rack = 0;
  double rack_gbit = 0;
  std::string overlap = "priority";
  double partition_mb = 4;
  double fusion_threshold_mb = 64;
  double bucket_cap_mb = 25;
  std::string arch = "allreduce";
  std::string sync = "bsp";
  std::vector<std::string> compress = {"none"};
  std::string compress_pull;  // --arch ps: the answers, for every method
  bool ef = false;
  std::string aggregate = "auto";
  size_t compress_min_bytes = 65536;
  std::string bench_compress;
  double straggler = 1;
  int64_t client_samples = 0;  // FedAvg with local-epochs: an IID split of this many samples
  std::string fit_partition;   // the same from a `frugal train --json` FedAvg run's partition
  int64_t batch_size = 64;     // FedAvg with local-epochs: a client's batch
  int64_t rounds = 0;          // FedAvg: the rounds simulated (0: at least 64)
  std::string out;
};

StatusOr<std::string> ReadFile(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) return NotFoundError(fmt::format("{} {}: cannot read the file", flag, path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// --trace-rank: a rank, kSlowestRank for "slowest" or kLockstepRank for "lockstep".
StatusOr<int> TraceRank(const std::string& value) {
  if (value == "slowest") return kSlowestRank;
  if (value == "lockstep") return kLockstepRank;
  int rank = -1;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), rank);
  if (error != std::errc() || end != value.data() + value.size() || rank < 0) {
    return InvalidArgumentError(
        fmt::format("--trace-rank '{}': expected a rank (0, 1, ...), slowest or lockstep", value));
  }
  return rank;
}

// A value given on the command line, or the same read from a benchmark's record (FILE).
void AddValueOrRecord(CLI::App* cmd, const std::string& name, double* value,
                      const std::string& help, const std::string& fit_name, std::string* fit,
                      const std::string& fit_help) {
  CLI::Option* given = cmd->add_option(name, *value, help)->capture_default_str();
  cmd->add_option(fit_name, *fit, fit_help)->type_name("FILE")->excludes(given);
}

StatusOr<std::vector<SimLayer>> Layers(const SimulateFlags& flags) {
  if (flags.layers.empty() == flags.timeline.empty()) {
    return InvalidArgumentError("give one of --layers TABLE and --timeline TRACE");
  }
  std::vector<SimLayer> layers;
  if (!flags.layers.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(std::string text, ReadFile(flags.layers, "--layers"));
    FRUGAL_ASSIGN_OR_RETURN(auto table, ParseLayerTable(text, flags.layers));
    for (const ProfiledLayer& p : table) {
      layers.push_back(SimLayer{p.name, p.floats, {}, p.forward_s, p.backward_s});
    }
    return layers;
  }
  FRUGAL_ASSIGN_OR_RETURN(auto model, frugal_torch::MakeModel(flags.model, 1));
  std::vector<std::string> order;
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    order.push_back(item.key());
    std::vector<int64_t> shape(item.value().sizes().begin(), item.value().sizes().end());
    layers.push_back(SimLayer{item.key(), static_cast<size_t>(item.value().numel()), shape, 0, 0});
  }
  FRUGAL_ASSIGN_OR_RETURN(const int rank, TraceRank(flags.trace_rank));
  FRUGAL_ASSIGN_OR_RETURN(std::string text, ReadFile(flags.timeline, "--timeline"));
  FRUGAL_ASSIGN_OR_RETURN(auto profiled, LayersFromTrace(text, rank, order, flags.timeline));
  // profiled[0] is the optimizer's step, a layer without gradient.
  for (size_t i = 0; i < layers.size(); ++i) {
    layers[i].forward_s = profiled[i + 1].forward_s;
    layers[i].backward_s = profiled[i + 1].backward_s;
  }
  layers.insert(layers.begin(),
                SimLayer{profiled[0].name, 0, {}, profiled[0].forward_s, 0, /*optimizer=*/true});
  return layers;
}

// The first JSON object of the lines of `path` (given with `flag`) that `matches` accepts;
// nothing when none does.
StatusOr<std::optional<nlohmann::json>> FirstRecord(
    const std::string& path, const char* flag,
    const std::function<bool(const nlohmann::json&)>& matches) {
  FRUGAL_ASSIGN_OR_RETURN(std::string text, ReadFile(path, flag));
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && matches(j)) return std::optional<nlohmann::json>(std::move(j));
  }
  return std::optional<nlohmann::json>();
}

// Encode and decode rates (bytes/s) of `spec` from `frugal bench compress --json` records: the
// record of the same compressor with the same options (as the registry spells them out) when the
// file has one, else the first of the same kind.
StatusOr<std::pair<double, double>> Rates(const SimulateFlags& flags, const std::string& spec) {
  if (flags.bench_compress.empty() || spec == "none") return std::pair<double, double>{0, 0};
  auto made = DefaultCompressorRegistry().Create(spec);
  const std::string full = made.ok() ? (*made)->spec() : spec;
  const std::string kind = spec.substr(0, spec.find(':'));
  std::optional<nlohmann::json> record;
  for (const bool exact : {true, false}) {
    FRUGAL_ASSIGN_OR_RETURN(
        record, FirstRecord(flags.bench_compress, "--bench-compress", [&](const nlohmann::json& j) {
          const std::string name = j.value("compressor", "");
          return j.value("bench", "") == "compress" &&
                 (exact ? name == full || name == spec : name.substr(0, name.find(':')) == kind);
        }));
    if (record) break;
  }
  if (!record) {
    return InvalidArgumentError(
        fmt::format("--bench-compress {}: no record of {}", flags.bench_compress, spec));
  }
  return std::pair<double, double>{record->value("encode_gbps", 0.0) * 1e9,
                                   record->value("decode_gbps", 0.0) * 1e9};
}

// FedAvg with local-epochs: each of the `clients` clients' samples, from --client-samples (the
// IID split: client c gets N / K, one more for c < N mod K) or --fit-partition (the counts of the
// first partition record of a `frugal train --json` FedAvg run); empty when neither is given.
StatusOr<std::vector<int64_t>> ClientSamples(const SimulateFlags& flags, int64_t clients) {
  std::vector<int64_t> counts;
  if (flags.client_samples < 0) return InvalidArgumentError("--client-samples must be >= 1");
  if (flags.client_samples > 0) {
    for (int64_t c = 0; c < clients; ++c) {
      counts.push_back(flags.client_samples / clients +
                       (c < flags.client_samples % clients ? 1 : 0));
    }
  } else if (!flags.fit_partition.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(
        const std::optional<nlohmann::json> record,
        FirstRecord(flags.fit_partition, "--fit-partition",
                    [](const nlohmann::json& j) { return j.value("event", "") == "partition"; }));
    const nlohmann::json* given = record ? &(*record)["counts"] : nullptr;
    if (given && given->is_array()) {
      for (const nlohmann::json& c : *given) {
        if (!c.is_number_integer()) break;
        counts.push_back(c.get<int64_t>());
      }
      if (counts.size() == given->size()) return counts;
    }
    return InvalidArgumentError(fmt::format(
        "--fit-partition {}: no partition record with its clients' counts", flags.fit_partition));
  }
  return counts;
}

struct Point {
  std::string method;
  double bandwidth_gbit = 0;
  int workers = 0;
  double contention = 1;
  SimResult result;
};

StatusOr<std::vector<Point>> RunGrid(const SimulateFlags& flags) {
  FRUGAL_ASSIGN_OR_RETURN(std::vector<SimLayer> layers, Layers(flags));
  FRUGAL_ASSIGN_OR_RETURN(SimOverlap overlap, ParseSimOverlap(flags.overlap));
  if (!(flags.straggler >= 1)) return InvalidArgumentError("--straggler must be >= 1");
  double alpha_s = flags.alpha_us * 1e-6;
  std::vector<double> bandwidths_gbit = flags.bandwidth_gbit;
  if (!flags.fit.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(NetworkFit fit, ReadNetworkFit(flags.fit));
    alpha_s = fit.alpha_s;
    bandwidths_gbit = {8.0 / fit.beta_s_per_byte / 1e9};
  }
  std::vector<Point> points;
  for (const std::string& method : flags.compress) {
    SimOptions o;
    o.layers = layers;
    o.overlap = overlap;
    o.partition_bytes = static_cast<size_t>(flags.partition_mb * (1 << 20));
    o.fusion_bytes = static_cast<size_t>(flags.fusion_threshold_mb * (1 << 20));
    o.bucket_cap_bytes = static_cast<size_t>(flags.bucket_cap_mb * (1 << 20));
    o.straggler_factor = flags.straggler;
    TrainFlags train;
    train.arch = flags.arch;
    train.sync = flags.sync;
    train.compress_pull = flags.compress_pull;
    if (method != "none") {
      train.compress = method;
      train.ef = flags.ef;
      train.aggregate = flags.aggregate;
      train.compress_min_bytes = flags.compress_min_bytes;
    }
    FRUGAL_ASSIGN_OR_RETURN(StrategyOptions strategy, ToStrategyOptions(train));
    FRUGAL_ASSIGN_OR_RETURN(StrategyPlan plan, PlanStrategy(strategy));
    o.compressed = plan.compressed;
    o.arch = plan.arch;
    o.sync = plan.sync;
    o.seed = plan.seed;
    o.push_compress = plan.push_compress;
    o.pull_compress = plan.pull_compress;
    if (o.sync.kind == SyncKind::kFedAvg) {
      FRUGAL_ASSIGN_OR_RETURN(o.client_samples, ClientSamples(flags, o.sync.clients));
      o.batch_size = flags.batch_size;
      if (flags.rounds < 0) return InvalidArgumentError("--rounds must be >= 1");
      o.rounds = flags.rounds;
    } else if (flags.client_samples != 0 || !flags.fit_partition.empty() || flags.rounds != 0) {
      return InvalidArgumentError(
          "--client-samples, --fit-partition and --rounds apply to --sync fedavg");
    }
    if ((flags.duplex_share != 1 || !flags.fit_duplex.empty()) &&
        o.arch.kind != ArchKind::kParameterServer) {
      return InvalidArgumentError("--duplex-share and --fit-duplex apply to --arch ps only");
    }
    o.network.duplex_share = flags.duplex_share;
    if (!flags.fit_duplex.empty()) {
      FRUGAL_ASSIGN_OR_RETURN(o.network.duplex_by_bytes, ReadDuplexFit(flags.fit_duplex));
    }
    o.contention = flags.contention;
    if (!flags.fit_contention.empty()) {
      FRUGAL_ASSIGN_OR_RETURN(
          o.contention,
          ReadContentionFit(flags.fit_contention, o.arch.kind == ArchKind::kGossip
                                                      ? TopologySpecName(o.arch.gossip.topology)
                                                      : std::string()));
    }
    FRUGAL_ASSIGN_OR_RETURN(auto rates, Rates(flags, method));
    o.encode_bytes_per_s = rates.first;
    o.decode_bytes_per_s = rates.second;
    if (!o.pull_compress.empty()) {
      FRUGAL_ASSIGN_OR_RETURN(auto pull_rates, Rates(flags, o.pull_compress));
      o.pull_encode_bytes_per_s = pull_rates.first;
      o.pull_decode_bytes_per_s = pull_rates.second;
    }
    for (double gbit : bandwidths_gbit) {
      for (int n : flags.np) {
        if (n < 1 || !(gbit > 0)) {
          return InvalidArgumentError("--np values must be >= 1 and --bandwidth-gbit > 0");
        }
        o.workers = n;
        o.network.alpha_s = alpha_s;
        o.network.nic_bytes_per_s = gbit * 1e9 / 8;
        o.network.host_bytes_per_s = flags.host_gbit * 1e9 / 8;
        o.network.ranks_per_host = flags.ranks_per_host;
        o.network.hosts_per_rack = flags.hosts_per_rack;
        o.network.rack_bytes_per_s = flags.rack_gbit * 1e9 / 8;
        if (!flags.fit_round.empty()) {
          if (o.arch.kind != ArchKind::kGossip) {
            return InvalidArgumentError("--fit-round applies to --arch gossip only");
          }
          FRUGAL_ASSIGN_OR_RETURN(
              const RoundFit round,
              ReadRoundFit(flags.fit_round, TopologySpecName(o.arch.gossip.topology), n));
          o.network.round_bytes_per_s = round.round_bytes_per_s;
          o.copy_bytes_per_s = round.copy_bytes_per_s;
        }
        FRUGAL_ASSIGN_OR_RETURN(SimResult r, Simulate(o, DefaultCompressorRegistry()));
        points.push_back(Point{method, gbit, n, o.contention, r});
      }
    }
  }
  return points;
}

Status Plot(const SimulateFlags& flags, const std::vector<Point>& points) {
  fs::create_directories(flags.out);
  std::ofstream json(fs::path(flags.out) / "simulate.jsonl", std::ios::trunc);
  const bool ps = flags.arch.rfind("ps", 0) == 0;
  for (const Point& p : points) {
    nlohmann::json record{{"method", p.method},
                          {"arch", flags.arch},
                          {"bandwidth_gbit", p.bandwidth_gbit},
                          {"workers", p.workers},
                          {"contention", p.contention},
                          {"step_s", p.result.step_s},
                          {"compute_s", p.result.compute_s},
                          {"comm_busy_s", p.result.comm_busy_s},
                          {"comm_share", p.result.comm_share},
                          {"scaling_efficiency", p.result.scaling_efficiency}};
    if (ps) {
      record["compress_pull"] = flags.compress_pull.empty() ? "none" : flags.compress_pull;
      record["server_out_busy_s"] = p.result.server_out_busy_s;
    }
    json << record.dump() << "\n";
  }
  std::vector<double> bandwidths;  // the grid's, in order (--fit gives its own)
  for (const Point& p : points) {
    if (std::find(bandwidths.begin(), bandwidths.end(), p.bandwidth_gbit) == bandwidths.end()) {
      bandwidths.push_back(p.bandwidth_gbit);
    }
  }
  for (double gbit : bandwidths) {
    const std::string tag = fmt::format("{:g}gbit", gbit);
    std::string script = fmt::format(
        "set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'\n"
        "set output {}\nset grid\nset key top left\nset logscale x 2\nset logscale y 2\n"
        "set xlabel 'workers'\nset ylabel 'speed-up (n x scaling efficiency)'\n"
        "set title 'frugal simulate: {}, {:g} Gbit/s NICs, --overlap {}'\nplot ",
        GnuplotQuote((fs::path(flags.out) / ("speedup_" + tag + ".png")).string()), flags.model,
        gbit, flags.overlap);
    for (size_t m = 0; m < flags.compress.size(); ++m) {
      const fs::path data = fs::path(flags.out) / fmt::format("speedup_{}_{}.dat", tag, m);
      std::ofstream out(data, std::ios::trunc);
      for (const Point& p : points) {
        if (p.method == flags.compress[m] && p.bandwidth_gbit == gbit) {
          out << p.workers << " " << p.workers * p.result.scaling_efficiency << "\n";
        }
      }
      script += fmt::format("{}{} using 1:2 with linespoints lw 2 title {}", m ? ", " : "",
                            GnuplotQuote(data.string()), GnuplotQuote(flags.compress[m]));
    }
    script += fmt::format(", x title 'linear' dt 2 lc rgb 'gray'\n");
    FRUGAL_RETURN_IF_ERROR(
        RunGnuplot(fs::path(flags.out) / ("speedup_" + tag + ".gp"), script).status());
  }
  return Status::Ok();
}

}  // namespace

void AddSimulateCommand(CLI::App& app, Dispatcher& dispatcher) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Simulate data-parallel steps (all-reduce, parameter server or gossip) from per-layer "
      "times over a network of hosts and racks: step time, communication share, scaling efficiency "
      "for 1 to 4096 workers");
  cmd->add_option("--layers", flags->layers, "Per-layer table: name,floats,forward_ms,backward_ms")
      ->type_name("FILE");
  cmd->add_option("--timeline", flags->timeline,
                  "Per-layer times from a `frugal train --timeline` trace (with --model)")
      ->type_name("FILE");
  cmd->add_option(
         "--trace-rank", flags->trace_rank,
         "The rank of the trace to read; slowest: the rank with the largest compute; lockstep: "
         "its layers scaled to the median of each step's largest compute of any rank")
      ->capture_default_str();
  cmd->add_option("--model", flags->model, "The model of --timeline (its tensors' sizes)")
      ->capture_default_str();
  cmd->add_option("--workers", flags->np, "Worker counts")->delimiter(',')->type_name("N1,N2,...");
  CLI::Option* bandwidth =
      cmd->add_option("--bandwidth-gbit", flags->bandwidth_gbit, "NIC rates (Gbit/s)")
          ->delimiter(',')
          ->type_name("B1,B2,...");
  CLI::Option* alpha = cmd->add_option("--alpha-us", flags->alpha_us, "Latency per message (us)")
                           ->capture_default_str();
  cmd->add_option("--fit", flags->fit,
                  "The latency and the NIC's rate from a `frugal bench allreduce --json` record "
                  "(its alpha and beta) instead of --alpha-us and --bandwidth-gbit")
      ->type_name("FILE")
      ->excludes(bandwidth)
      ->excludes(alpha);
  cmd->add_option("--fit-round", flags->fit_round,
                  "Gossip: the rate of a round's flows through a host's NIC from a `frugal bench "
                  "round --json` record of the same graph and worker count, instead of the NIC's, "
                  "and its copy rate for the model's copies on the training thread")
      ->type_name("FILE");
  AddValueOrRecord(cmd, "--duplex-share", &flags->duplex_share,
                   "Parameter server: the share of the NIC's rate each direction of a NIC carries "
                   "while it sends and receives at once, for every push and answer",
                   "--fit-duplex", &flags->fit_duplex,
                   "Parameter server: the duplex shares from `frugal bench exchange --json` "
                   "records (one way against both ways at once), each push and answer at the "
                   "share of its size, instead of --duplex-share");
  AddValueOrRecord(cmd, "--contention", &flags->contention,
                   "All-reduce: how many times slower the compute runs while a message moves (the "
                   "CPU communication takes from the training thread), >= 1",
                   "--fit-contention", &flags->fit_contention,
                   "The contention from a `frugal bench contention --json` record taken on the "
                   "hosts (its largest all-reduce; gossip: its largest round on the graph when "
                   "there is one) instead of --contention");
  cmd->add_option("--host-gbit", flags->host_gbit, "Rate between ranks of one host (Gbit/s)")
      ->capture_default_str();
  cmd->add_option("--ranks-per-host", flags->ranks_per_host, "Workers per host")
      ->capture_default_str();
  cmd->add_option("--hosts-per-rack", flags->hosts_per_rack, "Hosts per rack (0: one rack)")
      ->capture_default_str();
  cmd->add_option("--rack-gbit", flags->rack_gbit, "A rack's uplink (Gbit/s; 0: as a NIC)")
      ->capture_default_str();
  cmd->add_option("--overlap", flags->overlap, "none, wfbp, fusion or priority")
      ->capture_default_str();
  cmd->add_option("--partition-mb", flags->partition_mb, "--overlap priority: partitions")
      ->capture_default_str();
  cmd->add_option("--fusion-threshold-mb", flags->fusion_threshold_mb, "--overlap fusion: cap")
      ->capture_default_str();
  cmd->add_option("--bucket-cap-mb", flags->bucket_cap_mb, "--overlap none: buckets")
      ->capture_default_str();
  cmd->add_option("--arch", flags->arch,
                  "allreduce (its ring), ps:servers=S[,shard-mb=M] or gossip[:...] (as frugal "
                  "train)")
      ->capture_default_str();
  cmd->add_option("--sync", flags->sync,
                  "bsp, local:period=H[,overlap=1] (over all-reduce or gossip), or "
                  "fedavg:clients=K,fraction=C,local-steps=S|local-epochs=E (over all-reduce)")
      ->capture_default_str();
  cmd->add_option("--compress", flags->compress,
                  "A method: compressor SPEC, or none (dense); repeatable")
      ->type_name("SPEC");
  cmd->add_option("--compress-pull", flags->compress_pull,
                  "--arch ps: the servers' answers compressed with SPEC, for every method "
                  "(--compress compresses the pushes)")
      ->type_name("SPEC");
  cmd->add_flag("--ef", flags->ef, "The compressors with error feedback");
  cmd->add_option("--aggregate", flags->aggregate, "auto, allreduce, allgather or twophase")
      ->capture_default_str();
  cmd->add_option("--compress-min-bytes", flags->compress_min_bytes,
                  "Tensors smaller than this stay dense")
      ->capture_default_str();
  cmd->add_option("--bench-compress", flags->bench_compress,
                  "Encode and decode rates from `frugal bench compress --json` records")
      ->type_name("FILE");
  cmd->add_option("--straggler", flags->straggler,
                  "The slowest worker's compute, relative (BSP waits for it)")
      ->capture_default_str();
  CLI::Option* samples =
      cmd->add_option("--client-samples", flags->client_samples,
                      "FedAvg with local-epochs: the training set's samples, shared out over the "
                      "clients as an IID split does")
          ->type_name("N");
  cmd->add_option("--fit-partition", flags->fit_partition,
                  "FedAvg with local-epochs: each client's samples from the partition record of "
                  "a `frugal train --sync fedavg:... --json` run, instead of --client-samples")
      ->type_name("FILE")
      ->excludes(samples);
  cmd->add_option("--batch-size", flags->batch_size, "FedAvg with local-epochs: a client's batch")
      ->capture_default_str();
  cmd->add_option("--rounds", flags->rounds,
                  "FedAvg: the rounds simulated, the run's draws of clients from the first round "
                  "on (default: 64)")
      ->type_name("R");
  cmd->add_option("--out", flags->out, "Write simulate.jsonl and speed-up plots (PNG) here")
      ->type_name("DIR");
  cmd->callback([flags, &dispatcher] {
    Action action;
    action.name = "simulate";
    action.validate = [flags]() -> Status { return ParseSimOverlap(flags->overlap).status(); };
    action.run_local = [flags](const GlobalOptions&) -> StatusOr<int> {
      FRUGAL_ASSIGN_OR_RETURN(std::vector<Point> points, RunGrid(*flags));
      std::printf("%-24s %10s %8s %12s %12s %10s %10s\n", "method", "Gbit/s", "workers",
                  "step (ms)", "compute (ms)", "comm share", "efficiency");
      for (const Point& p : points) {
        std::printf("%-24s %10g %8d %12.3f %12.3f %10.3f %10.3f\n", p.method.c_str(),
                    p.bandwidth_gbit, p.workers, p.result.step_s * 1e3, p.result.compute_s * 1e3,
                    p.result.comm_share, p.result.scaling_efficiency);
      }
      if (!flags->out.empty()) FRUGAL_RETURN_IF_ERROR(Plot(*flags, points));
      return 0;
    };
    dispatcher.Select(std::move(action));
  });
}

}  // namespace frugal::apps
