// --inject faults in `frugal train` (see train_faults.h).
#include "train_faults.h"

#include <fmt/format.h>

#include <csignal>
#include <cstdio>

#include "frugal/compress_wire.h"

namespace frugal::apps {

Status CheckFaultRanks(const std::vector<FaultSpec>& faults, int world_size) {
  for (const FaultSpec& f : faults) {
    if (f.rank >= world_size) {
      return InvalidArgumentError(
          fmt::format("--inject '{}': there are only {} ranks", f.text, world_size));
    }
  }
  return Status::Ok();
}

Status AddTrainFaults(const std::vector<FaultSpec>& faults, frugal_torch::TrainOptions& options) {
  for (const FaultSpec& f : faults) {
    if (f.kind == FaultKind::kNan) options.nan_faults.push_back({f.rank, f.step, f.tensor});
    if (f.kind != FaultKind::kSlow) continue;
    for (const frugal_torch::Straggler& s : options.stragglers) {
      if (s.rank == f.rank) {
        return InvalidArgumentError(
            fmt::format("--inject '{}' and --straggler both slow rank {}", f.text, f.rank));
      }
    }
    options.stragglers.push_back({f.rank, f.factor});
  }
  return Status::Ok();
}

RankFaults::RankFaults(const std::vector<FaultSpec>& faults, int rank, const RestartNotes& notes)
    : rank_(rank), notes_(notes) {
  for (const FaultSpec& f : faults) {
    if (f.rank != rank) continue;
    if (f.kind == FaultKind::kKill || f.kind == FaultKind::kStop) mine_.push_back(f);
    if (f.kind == FaultKind::kDrop) {
      transport_fault_ = std::make_shared<TransportFault>(TransportFault::Kind::kDrop, nullptr);
      arm_at_ = f.step;
    }
    if (f.kind == FaultKind::kCorrupt) {
      // Byte 8 (the element count) of a compressed payload's header: its CRC no longer matches.
      transport_fault_ = std::make_shared<TransportFault>(
          TransportFault::Kind::kCorrupt,
          [](std::span<const std::byte> data) -> std::optional<uint64_t> {
            if (!ReadWireHeader(data).ok()) return std::nullopt;
            return 8 * 8;
          });
      arm_at_ = f.step;
    }
  }
}

Transport& RankFaults::Wrap(Transport& world) {
  if (!transport_fault_) return world;
  wrapped_ = WithTransportFault(world, transport_fault_);
  return *wrapped_;
}

void RankFaults::BeforeStep(int64_t step) {
  notes_.Progress(step);
  if (transport_fault_ && step == arm_at_) transport_fault_->Arm();
  for (const FaultSpec& f : mine_) {
    if (f.step != step) continue;
    const bool kill = f.kind == FaultKind::kKill;
    const std::string line =
        fmt::format("rank {}: --inject {}: {} this rank at step {}", rank_, f.text,
                    kill ? "killing (SIGKILL)" : "freezing (SIGSTOP)", step);
    notes_.Failure(line);
    std::fprintf(stderr, "frugal: %s\n", line.c_str());
    std::fflush(stderr);
    std::raise(kill ? SIGKILL : SIGSTOP);
  }
}

std::function<void(int64_t)> RankFaults::Hook() {
  if (mine_.empty() && !transport_fault_ && !notes_.active()) return {};
  return [this](int64_t step) { BeforeStep(step); };
}

}  // namespace frugal::apps
