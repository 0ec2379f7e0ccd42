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
    return InvalidArgumentError(
        fmt::format("{} '{}': expected name[:key=value,...]", flag, spec));
  }
  return params;
}

Status Annotated(std::string_view flag, const Status& status) {
  if (status.ok()) return status;
  return Status(status.code(), fmt::format("{} {}", flag, status.message()));
}

}  // namespace

StatusOr<ArchSpec> ParseArchSpec(std::string_view spec) {
  const std::vector<std::string> algorithms = DenseReducerAlgorithms();
  const std::string accepted =
      fmt::format("allreduce[:ALGO] with ALGO one of {}", fmt::join(algorithms, ", "));
  ArchSpec arch;
  const size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  if (name != "allreduce") {
    return InvalidArgumentError(fmt::format("--arch '{}': unknown architecture (accepted: {})",
                                            spec, accepted));
  }
  if (colon != std::string_view::npos) {
    arch.algorithm = std::string(spec.substr(colon + 1));
    if (std::find(algorithms.begin(), algorithms.end(), arch.algorithm) == algorithms.end()) {
      return InvalidArgumentError(fmt::format(
          "--arch '{}': unknown all-reduce algorithm '{}' (accepted: {})", spec, arch.algorithm,
          accepted));
    }
  }
  return arch;
}

std::string ArchSpecName(const ArchSpec& spec) { return "allreduce:" + spec.algorithm; }

StatusOr<SyncSpec> ParseSyncSpec(std::string_view spec) {
  FRUGAL_ASSIGN_OR_RETURN(CompressorParams params, ParseItems("--sync", spec));
  SyncSpec sync;
  if (params.name() == "bsp") {
    sync.kind = SyncKind::kBsp;
  } else if (params.name() == "local") {
    sync.kind = SyncKind::kLocal;
    if (!params.Has("period")) {
      return InvalidArgumentError(fmt::format(
          "--sync '{}': local needs period=H (local:period=H[,start-epoch=E][,intra-period=h]"
          "[,buffers=0|1][,momenta=0|1])",
          spec));
    }
    StatusOr<int64_t> period = params.Int("period", 1, 1, kMaxInt);
    FRUGAL_RETURN_IF_ERROR(Annotated("--sync", period.status()));
    sync.period = *period;
    StatusOr<int64_t> start = params.Int("start-epoch", 0, 0, kMaxInt);
    FRUGAL_RETURN_IF_ERROR(Annotated("--sync", start.status()));
    sync.start_epoch = *start;
    StatusOr<int64_t> intra = params.Int("intra-period", 0, 0, kMaxInt);
    FRUGAL_RETURN_IF_ERROR(Annotated("--sync", intra.status()));
    sync.intra_period = *intra;
    StatusOr<bool> buffers = params.Bool("buffers", true);
    FRUGAL_RETURN_IF_ERROR(Annotated("--sync", buffers.status()));
    sync.average_buffers = *buffers;
    StatusOr<bool> momenta = params.Bool("momenta", false);
    FRUGAL_RETURN_IF_ERROR(Annotated("--sync", momenta.status()));
    sync.average_momenta = *momenta;
    if (sync.intra_period > 0 &&
        (sync.intra_period >= sync.period || sync.period % sync.intra_period != 0)) {
      return InvalidArgumentError(fmt::format(
          "--sync '{}': intra-period must divide period and be smaller than it", spec));
    }
  } else if (params.name() == "fedavg") {
    sync.kind = SyncKind::kFedAvg;
    if (!params.Has("clients")) {
      return InvalidArgumentError(fmt::format(
          "--sync '{}': fedavg needs clients=K (fedavg:clients=K[,fraction=C][,local-epochs=E])",
          spec));
    }
    StatusOr<int64_t> clients = params.Int("clients", 0, 1, 1 << 20);
    FRUGAL_RETURN_IF_ERROR(Annotated("--sync", clients.status()));
    sync.clients = *clients;
    StatusOr<double> fraction = params.Double("fraction", 1.0, 1e-9, 1.0);
    FRUGAL_RETURN_IF_ERROR(Annotated("--sync", fraction.status()));
    sync.fraction = *fraction;
    StatusOr<int64_t> local_epochs = params.Int("local-epochs", 1, 1, 1000);
    FRUGAL_RETURN_IF_ERROR(Annotated("--sync", local_epochs.status()));
    sync.local_epochs = *local_epochs;
  } else {
    return InvalidArgumentError(fmt::format(
        "--sync '{}': unknown synchronization (accepted: bsp, local:period=H[,...], "
        "fedavg:clients=K[,...])",
        spec));
  }
  FRUGAL_RETURN_IF_ERROR(Annotated("--sync", params.Finish()));
  return sync;
}

std::string SyncSpecName(const SyncSpec& spec) {
  switch (spec.kind) {
    case SyncKind::kBsp:
      return "bsp";
    case SyncKind::kLocal: {
      std::string name = fmt::format("local:period={}", spec.period);
      if (spec.start_epoch > 0) name += fmt::format(",start-epoch={}", spec.start_epoch);
      if (spec.intra_period > 0) name += fmt::format(",intra-period={}", spec.intra_period);
      if (!spec.average_buffers) name += ",buffers=0";
      if (spec.average_momenta) name += ",momenta=1";
      return name;
    }
    case SyncKind::kFedAvg:
      return fmt::format("fedavg:clients={},fraction={},local-epochs={}", spec.clients,
                         spec.fraction, spec.local_epochs);
  }
  return "?";
}

}  // namespace frugal
