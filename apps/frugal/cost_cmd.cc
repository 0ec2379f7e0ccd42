// `frugal cost`: the architecture cost model (frugal/step_cost.h) for a model, a number of
// workers and a network: bytes per worker (and per parameter server) and step from the
// compressors' exact wire sizes and the message patterns, and the communication time of a step in
// the alpha-beta-gamma model. The strategy flags are `frugal train`'s (--arch, --sync, --compress,
// --ef, --compress-pull, --aggregate, --compress-min-bytes, --overlap, --partition-mb,
// --bucket-cap-mb, --seed), planned by the same
// factory; the model is built from frugal_torch to list its tensors. The network is given as
// --alpha-us, --bandwidth-gbit and --gamma-ns, or --fit FILE, a `frugal bench allreduce --json`
// record (its alpha_us, beta_s_per_byte, gamma_s_per_byte).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "frugal/engine.h"
#include "frugal/step_cost.h"
#include "frugal/strategy.h"
#include "frugal_torch/models.h"
#include "network_fit.h"
#include "train_flags.h"
#include "train_report.h"

namespace frugal::apps {
namespace {

struct CostFlags {
  TrainFlags train;  // the strategy flags and --model
  int64_t steps = 1;
  double alpha_us = 50;
  double bandwidth_gbit = 1;
  double gamma_ns = 0.1;
  std::string fit;
  std::string json;
};

StatusOr<CostParams> Network(const CostFlags& flags) {
  CostParams p;
  if (!flags.fit.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(NetworkFit fit, ReadNetworkFit(flags.fit));
    p.alpha = fit.alpha_s;
    p.beta = fit.beta_s_per_byte;
    p.gamma = fit.gamma_s_per_byte;
    return p;
  }
  if (!(flags.alpha_us >= 0) || !(flags.bandwidth_gbit > 0) || !(flags.gamma_ns >= 0)) {
    return InvalidArgumentError("--alpha-us and --gamma-ns must be >= 0, --bandwidth-gbit > 0");
  }
  p.alpha = flags.alpha_us * 1e-6;
  p.beta = 8.0 / (flags.bandwidth_gbit * 1e9);
  p.gamma = flags.gamma_ns * 1e-9;
  return p;
}

StatusOr<StepCostInput> Input(const CostFlags& flags, int workers) {
  StepCostInput in;
  FRUGAL_ASSIGN_OR_RETURN(StrategyOptions options, ToStrategyOptions(flags.train));
  FRUGAL_ASSIGN_OR_RETURN(in.plan, PlanStrategy(options));
  FRUGAL_ASSIGN_OR_RETURN(frugal_torch::TrainOptions train, ToTrainOptions(flags.train, in.plan));
  FRUGAL_ASSIGN_OR_RETURN(auto model, frugal_torch::MakeModel(flags.train.model, 1));
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    CostTensor t;
    t.name = item.key();
    t.numel = static_cast<size_t>(item.value().numel());
    for (int64_t d : item.value().sizes()) t.shape.push_back(d);
    in.parameters.push_back(std::move(t));
  }
  for (const auto& item : model->named_buffers(/*recurse=*/true)) {
    if (item.value().scalar_type() == torch::kFloat) {
      in.buffer_floats += static_cast<size_t>(item.value().numel());
      in.buffers.push_back(CostTensor{item.key(), static_cast<size_t>(item.value().numel()), {}});
    }
  }
  in.workers = workers;
  in.rounds = flags.steps;
  in.bucket_cap_bytes = train.bucket_cap_bytes;
  if (train.overlap && train.overlap->mode == OverlapMode::kPriority) {
    in.partition_bytes = train.overlap->engine.partition_bytes;
  }
  FRUGAL_ASSIGN_OR_RETURN(in.network, Network(flags));
  return in;
}

// A whole number as it is, else to one decimal.
std::string Bytes(double value) {
  return value == std::round(value) ? fmt::format("{:.0f}", value) : fmt::format("{:.1f}", value);
}

Status RunCost(const CostFlags& flags, int workers) {
  FRUGAL_ASSIGN_OR_RETURN(StepCostInput in, Input(flags, workers));
  FRUGAL_ASSIGN_OR_RETURN(StepCost cost, ComputeStepCost(in, DefaultCompressorRegistry()));
  uint64_t floats = 0;
  for (const CostTensor& t : in.parameters) floats += t.numel;
  const bool fedavg = in.plan.sync.kind == SyncKind::kFedAvg;
  const char* unit = fedavg ? "round" : "step";
  const double steps = static_cast<double>(flags.steps);
  std::printf(
      "frugal cost: %s (%llu parameters in %zu tensors, %zu buffer floats), %d workers, "
      "%s, %s\n",
      flags.train.model.c_str(), static_cast<unsigned long long>(floats), in.parameters.size(),
      in.buffer_floats, workers, ArchSpecName(in.plan.arch).c_str(),
      SyncSpecName(in.plan.sync).c_str());
  std::printf("  %-26s %s\n", "pattern", cost.pattern.c_str());
  std::printf("  %-26s %s%.1f B per %s (%s over %lld %ss)\n", "sent per worker",
              cost.exact ? "" : "at most ", cost.bytes_per_worker, unit,
              FormatBytes(cost.bytes_per_worker * steps).c_str(),
              static_cast<long long>(flags.steps), unit);
  if (in.plan.arch.kind == ArchKind::kAllreduce) {
    std::printf("  %-26s the same (every message stays among the workers)\n",
                "received per worker");
  } else {
    std::printf("  %-26s %.1f B per %s\n", "received per worker", cost.received_per_worker, unit);
  }
  for (size_t s = 0; s < cost.server_bytes_in.size(); ++s) {
    std::printf("  %-26s %s B in, %s B out per %s\n", fmt::format("server {}", s).c_str(),
                Bytes(cost.server_bytes_in[s]).c_str(), Bytes(cost.server_bytes_out[s]).c_str(),
                unit);
  }
  if (fedavg && in.plan.arch.kind == ArchKind::kParameterServer) {
    std::printf("  %-26s %s of %d workers per round (over %lld rounds); the others push %llu B\n",
                "uploading", Bytes(cost.uploading_workers).c_str(), workers,
                static_cast<long long>(flags.steps),
                static_cast<unsigned long long>(cost.idle_bytes_per_worker));
  }
  if (cost.bytes_sum > 0 && !fedavg) {
    const double ratio =
        static_cast<double>(cost.dense_ring_bytes_sum) / (cost.bytes_per_worker * workers);
    if (in.plan.arch.kind == ArchKind::kAllreduce) {
      std::printf("  %-26s %.2fx fewer bytes than a dense ring all-reduce of the gradients\n",
                  "compression", ratio);
    } else {
      std::printf("  %-26s a worker sends %.3gx the bytes of a dense ring all-reduce\n",
                  "against all-reduce", 1 / ratio);
    }
  }
  if (fedavg) {
    std::printf("  %-26s %s up, %s down per round (a server and the sampled clients)\n",
                "client traffic", FormatBytes(double(cost.client_bytes_up)).c_str(),
                FormatBytes(double(cost.client_bytes_down)).c_str());
  }
  std::printf(
      "  %-26s %.3f ms per %s (%.1f alpha + %.0f B beta + %.0f B gamma; alpha %.1f us, "
      "%.3g Gbit/s, gamma %.3g ns/B)\n",
      "communication time", cost.seconds * 1e3, unit, cost.terms.latency_terms,
      cost.terms.bandwidth_bytes, cost.terms.compute_bytes, in.network.alpha * 1e6,
      in.network.beta > 0 ? 8e-9 / in.network.beta : 0.0, in.network.gamma * 1e9);
  if (!flags.json.empty()) {
    nlohmann::json j = {{"model", flags.train.model},
                        {"parameters", floats},
                        {"buffer_floats", in.buffer_floats},
                        {"workers", workers},
                        {"arch", ArchSpecName(in.plan.arch)},
                        {"sync", SyncSpecName(in.plan.sync)},
                        {"compressor", in.plan.compressed ? nlohmann::json(in.plan.compressed->spec)
                                                          : nlohmann::json(nullptr)},
                        {"pattern", cost.pattern},
                        {"per", unit},
                        {"bytes_sum", cost.bytes_sum},
                        {"bytes_per_worker", cost.bytes_per_worker},
                        {"exact", cost.exact},
                        {"steps", flags.steps},
                        {"bytes_per_worker_total", std::llround(cost.bytes_per_worker * steps)},
                        {"average_bytes_sum", cost.average_bytes_sum},
                        {"client_bytes_up", cost.client_bytes_up},
                        {"client_bytes_down", cost.client_bytes_down},
                        {"dense_ring_bytes_sum", cost.dense_ring_bytes_sum},
                        {"received_per_worker", cost.received_per_worker},
                        {"server_bytes_in", cost.server_bytes_in},
                        {"server_bytes_out", cost.server_bytes_out},
                        {"uploading_workers", cost.uploading_workers},
                        {"idle_bytes_per_worker", cost.idle_bytes_per_worker},
                        {"latency_terms", cost.terms.latency_terms},
                        {"bandwidth_bytes", cost.terms.bandwidth_bytes},
                        {"compute_bytes", cost.terms.compute_bytes},
                        {"seconds", cost.seconds}};
    std::ofstream out(flags.json, std::ios::trunc);
    out << j.dump() << "\n";
    if (!out) return IoError(fmt::format("cannot write {}", flags.json));
  }
  return Status::Ok();
}

}  // namespace

void AddCostCommand(CLI::App& app, Dispatcher& dispatcher) {
  auto flags = std::make_shared<CostFlags>();
  CLI::App* cmd = app.add_subcommand(
      "cost",
      "Bytes per worker and step, and the communication time in the alpha-beta-gamma model, of "
      "a training strategy for a model and --np workers");
  TrainFlags& t = flags->train;
  cmd->add_option("--model", t.model, "mlp, cnn, resnet20, vgg or charlstm")->capture_default_str();
  cmd->add_option("--arch", t.arch,
                  "allreduce[:ALGO], ps:servers=S[,shard-mb=M] or gossip[:...] (as frugal train); "
                  "--np counts the workers")
      ->capture_default_str();
  cmd->add_option("--sync", t.sync,
                  "bsp, local:period=H, fedavg:clients=K,..., and over ps ssp:staleness=S, asp, "
                  "backup:workers=B, lag (as frugal train; fedavg follows --seed's sampling)")
      ->capture_default_str();
  cmd->add_option("--compress", t.compress, "Compressor SPEC (as frugal train)")->type_name("SPEC");
  cmd->add_flag("--ef", t.ef, "--compress: with error feedback");
  cmd->add_option("--compress-pull", t.compress_pull,
                  "--arch ps: compressor SPEC of the servers' answers (as frugal train)")
      ->type_name("SPEC");
  cmd->add_option("--seed", t.seed, "fedavg: the seed of the clients' sampling")
      ->capture_default_str();
  cmd->add_option("--aggregate", t.aggregate, "--compress: auto, allreduce, allgather, twophase")
      ->capture_default_str();
  cmd->add_option("--compress-min-bytes", t.compress_min_bytes,
                  "--compress: tensors smaller than this stay dense")
      ->capture_default_str();
  cmd->add_option("--overlap", t.overlap, "none, wfbp, fusion or priority (priority partitions)")
      ->capture_default_str();
  cmd->add_option("--partition-mb", t.partition_mb, "--overlap priority: partition size")
      ->capture_default_str();
  cmd->add_option("--bucket-cap-mb", t.bucket_cap_mb, "Fusion bucket cap (time model)")
      ->capture_default_str();
  cmd->add_option("--steps", flags->steps,
                  "Also give the bytes of this many steps (or rounds: fedavg over ps gives the "
                  "mean of rounds 0 .. steps - 1)")
      ->capture_default_str();
  cmd->add_option("--alpha-us", flags->alpha_us, "Network: latency per message (us)")
      ->capture_default_str();
  cmd->add_option("--bandwidth-gbit", flags->bandwidth_gbit, "Network: bandwidth (Gbit/s)")
      ->capture_default_str();
  cmd->add_option("--gamma-ns", flags->gamma_ns, "Reduction: ns per byte")->capture_default_str();
  cmd->add_option("--fit", flags->fit,
                  "Network from a `frugal bench allreduce --json` record (alpha, beta, gamma)")
      ->type_name("FILE");
  cmd->add_option("--json", flags->json, "Also write the result as one JSON object")
      ->type_name("FILE");
  cmd->callback([flags, &dispatcher] {
    Action action;
    action.name = "cost";
    action.validate = [flags]() -> Status {
      if (flags->steps < 1) return InvalidArgumentError("--steps must be >= 1");
      return Input(*flags, 2).status();
    };
    action.check_files = [flags]() -> Status { return CheckJsonPath(flags->json); };
    action.run_local = [flags](const GlobalOptions& global) -> StatusOr<int> {
      const int workers = global.launch.np > 0 ? global.launch.np : 1;
      Status status = RunCost(*flags, workers);
      if (!status.ok()) return status;
      return 0;
    };
    dispatcher.Select(std::move(action));
  });
}

}  // namespace frugal::apps
