// Parsing of --arch and --sync specifications ("name" or "name:key=value,..."), with the
// registry's own key=value parser (CompressorParams), so that every spec of frugal has one syntax.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "frugal/compressor.h"
#include "frugal/strategy.h"

namespace frugal {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

StatusOr<CompressorParams> ParseItems(std::string_view flag, std::string_view spec) {
  StatusOr<CompressorParams> params = CompressorParams::Parse(spec);
  if (!params.ok()) {
    return InvalidArgumentError(fmt::format("{} '{}': expected name[:key=value,...]", flag, spec));
  }
  return params;
}

Status Annotated(std::string_view flag, const Status& status) {
  if (status.ok()) return status;
  return Status(status.code(), fmt::format("{} {}", flag, status.message()));
}

// `out` = the value of a --sync parameter, or its error naming the flag.
// "--FLAG 'SPEC': NAME needs KEY=V (FORM)" when the spec lacks KEY (needed = "KEY=V").
Status Require(const CompressorParams& params, std::string_view flag, std::string_view spec,
               std::string_view needed, std::string_view form) {
  const std::string_view key = needed.substr(0, needed.find('='));
  if (params.Has(key)) return Status::Ok();
  return InvalidArgumentError(
      fmt::format("{} '{}': {} needs {} ({})", flag, spec, params.name(), needed, form));
}

template <typename T>
Status Assign(const StatusOr<T>& value, T& out) {
  FRUGAL_RETURN_IF_ERROR(Annotated("--sync", value.status()));
  out = *value;
  return Status::Ok();
}

// "ps:servers=S[,shard-mb=M]".
StatusOr<ArchSpec> ParseParameterServerSpec(std::string_view spec) {
  FRUGAL_ASSIGN_OR_RETURN(CompressorParams params, ParseItems("--arch", spec));
  FRUGAL_RETURN_IF_ERROR(Require(params, "--arch", spec, "servers=S", "ps:servers=S[,shard-mb=M]"));
  ArchSpec arch;
  arch.kind = ArchKind::kParameterServer;
  arch.algorithm.clear();
  StatusOr<int64_t> servers = params.Int("servers", 0, 1, 4096);
  FRUGAL_RETURN_IF_ERROR(Annotated("--arch", servers.status()));
  arch.servers = static_cast<int>(*servers);
  StatusOr<double> mb = params.Double("shard-mb", kDefaultShardMb, 1.0 / 1024, 1 << 20);
  FRUGAL_RETURN_IF_ERROR(Annotated("--arch", mb.status()));
  arch.shard_mb = *mb;
  FRUGAL_RETURN_IF_ERROR(Annotated("--arch", params.Finish()));
  return arch;
}

}  // namespace

StatusOr<ArchSpec> ParseArchSpec(std::string_view spec) {
  const std::vector<std::string> algorithms = DenseReducerAlgorithms();
  const std::string accepted = fmt::format(
      "allreduce[:ALGO] with ALGO one of {}; gossip[:topology=T,...]; "
      "ps:servers=S[,shard-mb=M]",
      fmt::join(algorithms, ", "));
  ArchSpec arch;
  const size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  if (name == "ps") return ParseParameterServerSpec(spec);
  if (name == "gossip") {
    arch.kind = ArchKind::kGossip;
    FRUGAL_ASSIGN_OR_RETURN(
        arch.gossip,
        ParseGossipSpec(colon == std::string_view::npos ? "" : spec.substr(colon + 1)));
    return arch;
  }
  if (name != "allreduce") {
    return InvalidArgumentError(
        fmt::format("--arch '{}': unknown architecture (accepted: {})", spec, accepted));
  }
  if (colon != std::string_view::npos) {
    arch.algorithm = std::string(spec.substr(colon + 1));
    if (std::find(algorithms.begin(), algorithms.end(), arch.algorithm) == algorithms.end()) {
      return InvalidArgumentError(
          fmt::format("--arch '{}': unknown all-reduce algorithm '{}' (accepted: {})", spec,
                      arch.algorithm, accepted));
    }
  }
  return arch;
}

std::string ExchangeName(const Strategy& strategy, const GradientReducer& reducer) {
  std::string exchange = strategy.traits().exchange;
  return exchange.empty() ? reducer.name() : exchange;
}

std::string ArchSpecName(const ArchSpec& spec) {
  if (spec.kind == ArchKind::kParameterServer) {
    return fmt::format("ps:servers={},shard-mb={}", spec.servers, spec.shard_mb);
  }
  if (spec.kind == ArchKind::kGossip) return "gossip:" + GossipSpecName(spec.gossip);
  return "allreduce:" + spec.algorithm;
}

StatusOr<SyncSpec> ParseSyncSpec(std::string_view spec) {
  FRUGAL_ASSIGN_OR_RETURN(CompressorParams params, ParseItems("--sync", spec));
  SyncSpec sync;
  if (params.name() == "bsp") {
    sync.kind = SyncKind::kBsp;
  } else if (params.name() == "asp") {
    sync.kind = SyncKind::kAsp;
  } else if (params.name() == "local") {
    sync.kind = SyncKind::kLocal;
    FRUGAL_RETURN_IF_ERROR(Require(params, "--sync", spec, "period=H",
                                   "local:period=H[,start-epoch=E][,intra-period=h]"
                                   "[,buffers=0|1][,momenta=0|1][,overlap=0|1]"));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Int("period", 1, 1, kMaxInt), sync.period));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Int("start-epoch", 0, 0, kMaxInt), sync.start_epoch));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Int("intra-period", 0, 0, kMaxInt), sync.intra_period));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Bool("buffers", true), sync.average_buffers));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Bool("momenta", false), sync.average_momenta));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Bool("overlap", false), sync.overlap));
    if (sync.intra_period > 0 &&
        (sync.intra_period >= sync.period || sync.period % sync.intra_period != 0)) {
      return InvalidArgumentError(
          fmt::format("--sync '{}': intra-period must divide period and be smaller than it", spec));
    }
    if (sync.overlap && sync.intra_period > 0) {
      return InvalidArgumentError(fmt::format(
          "--sync '{}': overlap=1 overlaps the global average only; it does not combine with "
          "intra-period",
          spec));
    }
  } else if (params.name() == "fedavg") {
    sync.kind = SyncKind::kFedAvg;
    constexpr std::string_view kForm =
        "fedavg:clients=K[,fraction=C][,local-epochs=E|,local-steps=S][,min-samples=M]";
    FRUGAL_RETURN_IF_ERROR(Require(params, "--sync", spec, "clients=K", kForm));
    if (params.Has("local-epochs") && params.Has("local-steps")) {
      return InvalidArgumentError(fmt::format(
          "--sync '{}': give local-epochs=E or local-steps=S, not both ({})", spec, kForm));
    }
    FRUGAL_RETURN_IF_ERROR(Assign(params.Int("clients", 0, 1, 1 << 20), sync.clients));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Double("fraction", 1.0, 1e-9, 1.0), sync.fraction));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Int("local-epochs", 1, 1, 1000), sync.local_epochs));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Int("local-steps", 0, 1, kMaxInt), sync.local_steps));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Int("min-samples", 0, 1, kMaxInt), sync.min_samples));
  } else if (params.name() == "ssp") {
    sync.kind = SyncKind::kSsp;
    FRUGAL_RETURN_IF_ERROR(Require(params, "--sync", spec, "staleness=S", "ssp:staleness=S"));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Int("staleness", 0, 0, 1 << 20), sync.staleness));
  } else if (params.name() == "backup") {
    sync.kind = SyncKind::kBackup;
    FRUGAL_RETURN_IF_ERROR(Require(params, "--sync", spec, "workers=B", "backup:workers=B"));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Int("workers", 0, 1, 1 << 20), sync.backup_workers));
  } else if (params.name() == "lag") {
    sync.kind = SyncKind::kLag;
    int64_t window = 0;
    int64_t max_skip = 0;
    FRUGAL_RETURN_IF_ERROR(Assign(params.Int("window", 10, 1, 1 << 16), window));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Double("xi", 1.0, 0.0, 1e6), sync.lag.xi));
    FRUGAL_RETURN_IF_ERROR(Assign(params.Int("max-skip", 10, 0, 1 << 20), max_skip));
    sync.lag.window = static_cast<int>(window);
    sync.lag.max_skip = static_cast<int>(max_skip);
  } else {
    return InvalidArgumentError(
        fmt::format("--sync '{}': unknown synchronization (accepted: bsp, asp, "
                    "local:period=H[,...], fedavg:clients=K[,...], ssp:staleness=S, "
                    "backup:workers=B, lag[:window=D][,xi=X][,max-skip=C])",
                    spec));
  }
  FRUGAL_RETURN_IF_ERROR(Annotated("--sync", params.Finish()));
  return sync;
}

std::string SyncSpecName(const SyncSpec& spec) {
  switch (spec.kind) {
    case SyncKind::kBsp:
      return "bsp";
    case SyncKind::kAsp:
      return "asp";
    case SyncKind::kSsp:
      return fmt::format("ssp:staleness={}", spec.staleness);
    case SyncKind::kBackup:
      return fmt::format("backup:workers={}", spec.backup_workers);
    case SyncKind::kLag:
      return fmt::format("lag:window={},xi={},max-skip={}", spec.lag.window, spec.lag.xi,
                         spec.lag.max_skip);
    case SyncKind::kLocal: {
      std::string name = fmt::format("local:period={}", spec.period);
      if (spec.start_epoch > 0) name += fmt::format(",start-epoch={}", spec.start_epoch);
      if (spec.intra_period > 0) name += fmt::format(",intra-period={}", spec.intra_period);
      if (!spec.average_buffers) name += ",buffers=0";
      if (spec.average_momenta) name += ",momenta=1";
      if (spec.overlap) name += ",overlap=1";
      return name;
    }
    case SyncKind::kFedAvg: {
      std::string name = fmt::format("fedavg:clients={},fraction={}", spec.clients, spec.fraction);
      name += spec.local_steps > 0 ? fmt::format(",local-steps={}", spec.local_steps)
                                   : fmt::format(",local-epochs={}", spec.local_epochs);
      if (spec.min_samples > 0) name += fmt::format(",min-samples={}", spec.min_samples);
      return name;
    }
  }
  return "?";
}

}  // namespace frugal
