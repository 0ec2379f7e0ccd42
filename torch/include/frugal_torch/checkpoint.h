// Checkpoints of a training run (frugal/checkpoint.h for the directory, frugal/state_visitor.h
// for the state): what the training loops save and how a run resumes.
//
// A rank's state is visited under these scopes:
//   model/param/<name>        every parameter (f32)
//   model/buffer/<name>       every buffer: float ones as f32, others (batch-norm's
//                             num_batches_tracked) as their raw bytes
//   optimizer/<name>/momentum SGD's momentum buffer of a parameter, once it exists
//   rng/torch                 the state of torch's default CPU generator
//   loop/...                  the training loop's position and the epoch's running sums
//   driver/...                the step counters of the step driver (trainer.cc only)
//   strategy/...              Strategy::VisitState (FederatedAveraging::VisitState for FedAvg)
//   reducer/...               GradientReducer::VisitState (compressor state, worker momentum)
// Every random stream of frugal derives from (seed, rank, step, tensor), so restoring the step
// counters restores the streams' positions.
//
// Thread safety: the functions are called by the training loop; the collective ones on the thread
// that owns the transport.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>

#include "frugal/checkpoint.h"
#include "frugal/parameter_server.h"
#include "frugal/state_visitor.h"
#include "frugal/status.h"
#include "frugal/transport.h"
#include "frugal_torch/checkpoint_options.h"

namespace frugal_torch {

// The model's parameters and buffers and the SGD optimizer's momentum buffers (scopes model/ and
// optimizer/ above). Loading copies into the existing tensors and creates missing momentum
// buffers.
void VisitModelState(torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                     frugal::StateVisitor& visitor);

// torch's default CPU generator (scope rng/).
void VisitTorchRng(frugal::StateVisitor& visitor);

// Collective over `t`: every rank writes its file of checkpoint `step` (WriteRankState), the
// ranks exchange how that went, and rank 0 commits (CommitCheckpoint, keeping options.keep).
// Every rank returns the same Status: OK, or the first failure naming its rank (the previous
// checkpoint is then untouched). `bytes` receives the size of this rank's file.
frugal::Status SaveCheckpoint(frugal::Transport& t, const CheckpointOptions& options, uint64_t step,
                              const frugal::StateRecords& state, uint64_t* bytes,
                              frugal::Duration timeout);

// Collective over `t`: the state `visit` saves (StateSaver), as SaveCheckpoint saves it.
frugal::Status SaveRankCheckpoint(frugal::Transport& t, const CheckpointOptions& options,
                                  uint64_t step,
                                  const std::function<void(frugal::StateVisitor&)>& visit,
                                  uint64_t* bytes, frugal::Duration timeout);

// Rank `rank`'s file of the checkpoint options.resume names, in a job of `world_size` ranks
// (OpenCheckpoint: the identity and world size checked), restored through `visit`
// (StateLoader); returns the checkpoint's step. kInvalidArgument / kMalformed / kNotFound naming
// the file and the field.
frugal::StatusOr<uint64_t> LoadRankCheckpoint(
    const CheckpointOptions& options, int rank, int world_size,
    const std::function<void(frugal::StateVisitor&)>& visit);

// A parameter server's part of the run's checkpoints: with options.dir, `save` writes its file
// into the set of the workers' checkpoint (SaveRankCheckpoint over the whole job); with
// options.resume, `resume` restores rank `rank`'s file of a job of `world_size` ranks
// (LoadRankCheckpoint). `options` must outlive the hooks.
frugal::ServerCheckpointHooks ServerCheckpointHooksOf(const CheckpointOptions& options, int rank,
                                                      int world_size, frugal::Duration timeout);

}  // namespace frugal_torch
