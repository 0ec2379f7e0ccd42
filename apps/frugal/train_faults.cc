// --inject faults in `frugal train` (see train_faults.h).
#include "train_faults.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <csignal>
#include <cstdio>

#include "frugal/compress_wire.h"
#include "frugal_torch/models.h"

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

Status CheckNanTensors(const std::vector<FaultSpec>& faults, std::string_view model) {
  std::vector<std::string> trainable;  // the model's trainable parameters, built on first need
  for (const FaultSpec& f : faults) {
    if (f.kind != FaultKind::kNan || f.tensor.empty()) continue;
    if (trainable.empty()) {
      FRUGAL_ASSIGN_OR_RETURN(const auto net, frugal_torch::MakeModel(model, /*seed=*/0));
      for (const auto& item : net->named_parameters(/*recurse=*/true)) {
        if (item.value().requires_grad()) trainable.push_back(item.key());
      }
    }
    if (std::find(trainable.begin(), trainable.end(), f.tensor) != trainable.end()) continue;
    return InvalidArgumentError(
        fmt::format("--inject '{}': the model {} has no parameter '{}' (parameters: {})", f.text,
                    model, f.tensor, fmt::join(trainable, ", ")));
  }
  return Status::Ok();
}

Status AddTrainFaults(const std::vector<FaultSpec>& faults, frugal_torch::TrainOptions& options) {
  for (const FaultSpec& f : faults) {
    if (f.kind == FaultKind::kNan) {
      options.nan_faults.push_back({f.rank, f.step, f.epoch, f.tensor});
    }
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
      arm_ = f;
    }
    if (f.kind == FaultKind::kCorrupt) {
      // Byte 8 (the element count) of a compressed payload's header: its CRC no longer matches.
      transport_fault_ = std::make_shared<TransportFault>(
          TransportFault::Kind::kCorrupt,
          [](std::span<const std::byte> data) -> std::optional<uint64_t> {
            if (!ReadWireHeader(data).ok()) return std::nullopt;
            return 8 * 8;
          });
      arm_ = f;
    }
  }
}

Transport& RankFaults::Wrap(Transport& world) {
  if (!transport_fault_) return world;
  wrapped_ = WithTransportFault(world, transport_fault_);
  return *wrapped_;
}

namespace {

// Where fault `f` fires: "step S", or with epoch=E "step S of epoch E (step N of the run)".
std::string FaultPlace(const FaultSpec& f, int64_t step, int64_t epoch, int64_t step_in_epoch) {
  return f.epoch > 0
             ? fmt::format("step {} of epoch {} (step {} of the run)", step_in_epoch, epoch, step)
             : fmt::format("step {}", step);
}

}  // namespace

void RankFaults::BeforeStep(int64_t step, int64_t epoch, int64_t step_in_epoch) {
  notes_.Progress(step);
  if (transport_fault_ && arm_.FiresAt(step, epoch, step_in_epoch)) {
    const bool drop = arm_.kind == FaultKind::kDrop;
    std::fprintf(
        stderr, "frugal: rank %d: --inject %s: %s this rank sends from %s on\n", rank_,
        arm_.text.c_str(),
        drop ? "losing the first message" : "corrupting the header of the first compressed payload",
        FaultPlace(arm_, step, epoch, step_in_epoch).c_str());
    std::fflush(stderr);
    transport_fault_->Arm();
  }
  for (const FaultSpec& f : mine_) {
    if (!f.FiresAt(step, epoch, step_in_epoch)) continue;
    const bool kill = f.kind == FaultKind::kKill;
    const std::string line = fmt::format("rank {}: --inject {}: {} this rank at {}", rank_, f.text,
                                         kill ? "killing (SIGKILL)" : "freezing (SIGSTOP)",
                                         FaultPlace(f, step, epoch, step_in_epoch));
    notes_.Failure(line);
    std::fprintf(stderr, "frugal: %s\n", line.c_str());
    std::fflush(stderr);
    std::raise(kill ? SIGKILL : SIGSTOP);
  }
}

std::function<void(int64_t, int64_t, int64_t)> RankFaults::StepHook() {
  if (Idle()) return {};
  return [this](int64_t step, int64_t epoch, int64_t step_in_epoch) {
    BeforeStep(step, epoch, step_in_epoch);
  };
}

std::function<void(int64_t)> RankFaults::RoundHook() {
  if (Idle()) return {};
  return [this](int64_t round) { BeforeStep(round, 0, round); };
}

}  // namespace frugal::apps
