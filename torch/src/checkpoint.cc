// Checkpoints of a training run (see checkpoint.h).
//
// SaveCheckpoint: each rank writes its file, then one Allgatherv spreads every rank's outcome
// (a byte ok/failed, the file's size and CRC, or the failure's message), so that every rank knows
// whether all files are on disk; rank 0 then writes the manifest (the commit) and a second
// Allgatherv spreads its outcome. Every rank thus returns the same Status.
#include "frugal_torch/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/string_utils.h>
#include <fmt/format.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "frugal/collectives.h"

namespace frugal_torch {
namespace {

using frugal::StateVisitor;
using frugal::Status;

std::span<float> FloatSpan(const torch::Tensor& t) {
  FRUGAL_CHECK(t.scalar_type() == torch::kFloat && t.is_contiguous(),
               "checkpoint: not a contiguous float32 tensor");
  return {t.data_ptr<float>(), static_cast<size_t>(t.numel())};
}

// A tensor of any type as its raw bytes, and back (the size must match).
void RawTensor(StateVisitor& v, const std::string& name, torch::Tensor t) {
  FRUGAL_CHECK(t.is_contiguous(), "checkpoint: buffer '", name, "' is not contiguous");
  const size_t n = t.nbytes();
  std::vector<std::byte> raw(n);
  if (!v.loading()) {
    if (n > 0) std::memcpy(raw.data(), t.data_ptr(), n);
    v.Bytes(frugal::EscapeStateName(name), raw);
    return;
  }
  v.Bytes(frugal::EscapeStateName(name), raw);
  if (!v.ok()) return;
  if (raw.size() != n) {
    v.Reject(fmt::format("buffer '{}' holds {} bytes in the checkpoint, this run has {}", name,
                         raw.size(), n));
    return;
  }
  if (n > 0) std::memcpy(t.data_ptr(), raw.data(), n);
}

std::vector<std::byte> Record(bool ok, uint64_t bytes, uint32_t crc, const std::string& message) {
  std::vector<std::byte> out(13 + message.size());
  out[0] = std::byte{ok ? uint8_t{1} : uint8_t{0}};
  std::memcpy(out.data() + 1, &bytes, 8);
  std::memcpy(out.data() + 9, &crc, 4);
  if (!message.empty()) std::memcpy(out.data() + 13, message.data(), message.size());
  return out;
}

}  // namespace

Status ValidateCheckpointOptions(const CheckpointOptions& options) {
  if (options.keep < 1) return frugal::InvalidArgumentError("--keep must be >= 1");
  if (options.every_steps < 0) {
    return frugal::InvalidArgumentError("--checkpoint-every must be a step count >= 1 or 'epoch'");
  }
  if (options.dir.empty() && (options.every_steps > 0 || options.every_epoch)) {
    return frugal::InvalidArgumentError("--checkpoint-every needs --checkpoint-dir");
  }
  return Status::Ok();
}

void VisitModelState(torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                     StateVisitor& v) {
  torch::NoGradGuard no_grad;
  const auto parameters = module.named_parameters(/*recurse=*/true);
  {
    StateVisitor::Scope model(v, "model");
    {
      StateVisitor::Scope scope(v, "param");
      for (const auto& item : parameters) {
        v.Floats(frugal::EscapeStateName(item.key()), FloatSpan(item.value()));
      }
    }
    StateVisitor::Scope scope(v, "buffer");
    for (const auto& item : module.named_buffers(/*recurse=*/true)) {
      if (item.value().scalar_type() == torch::kFloat) {
        v.Floats(frugal::EscapeStateName(item.key()), FloatSpan(item.value()));
      } else {
        RawTensor(v, item.key(), item.value());
      }
    }
  }
  StateVisitor::Scope scope(v, "optimizer");
  auto& states = optimizer.state();
  for (const auto& item : parameters) {
    const torch::Tensor& p = item.value();
    const std::string key = c10::guts::to_string(p.unsafeGetTensorImpl());
    auto it = states.find(key);
    auto* sgd =
        it == states.end() ? nullptr : dynamic_cast<torch::optim::SGDParamState*>(it->second.get());
    if (!v.loading()) {
      if (sgd == nullptr || !sgd->momentum_buffer().defined()) continue;
      StateVisitor::Scope param(v, item.key());
      v.Floats("momentum", FloatSpan(sgd->momentum_buffer()));
      continue;
    }
    if (!v.Has(item.key())) continue;
    if (sgd == nullptr) {
      auto made = std::make_unique<torch::optim::SGDParamState>();
      sgd = made.get();
      states[key] = std::move(made);
    }
    if (!sgd->momentum_buffer().defined()) {
      sgd->momentum_buffer(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    }
    StateVisitor::Scope param(v, item.key());
    v.Floats("momentum", FloatSpan(sgd->momentum_buffer()));
  }
}

void VisitTorchRng(StateVisitor& v) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  StateVisitor::Scope scope(v, "rng");
  std::vector<std::byte> bytes;
  if (!v.loading()) {
    const torch::Tensor state = generator.get_state().contiguous();
    bytes.resize(state.nbytes());
    std::memcpy(bytes.data(), state.data_ptr(), bytes.size());
    v.Bytes("torch", bytes);
    return;
  }
  v.Bytes("torch", bytes);
  if (!v.ok()) return;
  torch::Tensor state = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  if (!bytes.empty()) std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  try {
    generator.set_state(state);
  } catch (const c10::Error& e) {
    v.Reject(fmt::format("torch's generator refuses the state: {}", e.what_without_backtrace()));
  }
}

Status SaveCheckpoint(frugal::Transport& t, const CheckpointOptions& options, uint64_t step,
                      const frugal::StateRecords& state, uint64_t* bytes,
                      frugal::Duration timeout) {
  frugal::CollectiveOptions collective;
  collective.timeout = timeout;
  auto file = frugal::WriteRankState(options.dir, step, t.rank(), t.size(), state);
  if (bytes != nullptr) *bytes = file.ok() ? file->bytes : 0;
  const std::vector<std::byte> mine = file.ok() ? Record(true, file->bytes, file->crc, "")
                                                : Record(false, 0, 0, file.status().message());
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  FRUGAL_RETURN_IF_ERROR(frugal::Allgatherv(t, mine, all, sizes, collective)
                             .Annotate(fmt::format("checkpoint at step {}", step)));
  frugal::CheckpointManifest manifest;
  manifest.step = step;
  manifest.world_size = t.size();
  manifest.identity = options.identity;
  size_t at = 0;
  for (int r = 0; r < t.size(); ++r) {
    const size_t size = sizes[static_cast<size_t>(r)];
    if (size < 13) {
      return frugal::MalformedError(
          fmt::format("checkpoint at step {}: rank {} sent a {}-byte report", step, r, size));
    }
    const std::byte* p = all.data() + at;
    at += size;
    if (p[0] == std::byte{0}) {
      return frugal::IoError(fmt::format(
          "checkpoint at step {} failed on rank {}: {}; the previous checkpoint is untouched", step,
          r, std::string(reinterpret_cast<const char*>(p + 13), size - 13)));
    }
    frugal::CheckpointFile f;
    f.rank = r;
    f.name = fmt::format("rank-{:05d}.state", r);
    std::memcpy(&f.bytes, p + 1, 8);
    std::memcpy(&f.crc, p + 9, 4);
    manifest.files.push_back(std::move(f));
  }
  std::vector<std::byte> verdict;
  if (t.rank() == 0) {
    const Status committed = frugal::CommitCheckpoint(options.dir, manifest, options.keep);
    const std::string message = committed.ok() ? "" : committed.message();
    verdict = Record(committed.ok(), 0, 0, message);
  }
  FRUGAL_RETURN_IF_ERROR(frugal::Allgatherv(t, verdict, all, sizes, collective)
                             .Annotate(fmt::format("checkpoint at step {}", step)));
  if (sizes[0] < 13) {
    return frugal::MalformedError(
        fmt::format("checkpoint at step {}: rank 0 sent no verdict", step));
  }
  if (all[0] == std::byte{0}) {
    return frugal::IoError(
        fmt::format("checkpoint at step {}: rank 0 could not commit it: {}", step,
                    std::string(reinterpret_cast<const char*>(all.data() + 13), sizes[0] - 13)));
  }
  return Status::Ok();
}

Status SaveRankCheckpoint(frugal::Transport& t, const CheckpointOptions& options, uint64_t step,
                          const std::function<void(StateVisitor&)>& visit, uint64_t* bytes,
                          frugal::Duration timeout) {
  frugal::StateSaver saver;
  visit(saver);
  FRUGAL_RETURN_IF_ERROR(saver.status());
  return SaveCheckpoint(t, options, step, saver.records(), bytes, timeout);
}

frugal::StatusOr<uint64_t> LoadRankCheckpoint(const CheckpointOptions& options, int rank,
                                              int world_size,
                                              const std::function<void(StateVisitor&)>& visit) {
  FRUGAL_ASSIGN_OR_RETURN(
      frugal::OpenedCheckpoint opened,
      frugal::OpenCheckpoint(options.resume, rank, world_size, options.identity));
  frugal::StateLoader loader(opened.state);
  visit(loader);
  FRUGAL_RETURN_IF_ERROR(loader.Finish().Annotate(
      fmt::format("checkpoint {}/rank-{:05d}.state", opened.checkpoint.path, rank)));
  return opened.checkpoint.manifest.step;
}

frugal::ServerCheckpointHooks ServerCheckpointHooksOf(const CheckpointOptions& options, int rank,
                                                      int world_size, frugal::Duration timeout) {
  frugal::ServerCheckpointHooks hooks;
  if (options.saves()) {
    hooks.save = [&options, timeout](frugal::Transport& t, uint64_t step,
                                     const std::function<void(StateVisitor&)>& visit) {
      return SaveRankCheckpoint(t, options, step, visit, nullptr, timeout);
    };
  }
  if (!options.resume.empty()) {
    hooks.resume = [&options, rank, world_size](const std::function<void(StateVisitor&)>& visit) {
      return LoadRankCheckpoint(options, rank, world_size, visit).status();
    };
  }
  return hooks;
}

}  // namespace frugal_torch
