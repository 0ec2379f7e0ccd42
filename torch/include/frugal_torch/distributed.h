// The LibTorch adapter: data-parallel training in the manner of Horovod's DistributedOptimizer
// and PyTorch DDP, over frugal's transport and a GradientReducer (reducer.h).
//
// DistributedOptimizer maps the module's trainable parameters to named float buffers, plans the
// gradient buckets once (reverse registration order — the order backward produces gradients —
// and a cap of 25 MB by default, as DDP) and checks with VerifySamePlan that every rank has the
// same plan. After backward, SynchronizeGradients() packs each bucket, lets the reducer average
// it across ranks and unpacks the average into the gradients; Step() does that and then steps
// the wrapped torch optimizer. Bucket formation (PackBucket/UnpackBucket) is separate from the
// reduction (ReduceBucket) so that an engine can submit buckets from gradient hooks as they
// become ready. A parameter that got no gradient contributes zeros, like DDP's unused parameters.
//
// Every collective here blocks the calling thread, is bounded by the timeout given and returns
// its Status (kTimeout naming the peers that did not answer). All ranks call the same functions
// in the same order. Not thread safe: the thread that owns the transport uses these objects.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "frugal/reducer.h"
#include "frugal/state_visitor.h"
#include "frugal/status.h"
#include "frugal/timer.h"
#include "frugal/transport.h"

namespace frugal_torch {

// Copies every parameter and buffer of `module` from `root` to the other ranks (one message;
// the byte layout of each tensor must agree across ranks, kInvalidArgument otherwise).
frugal::Status BroadcastParameters(frugal::Transport& t, torch::nn::Module& module, int root,
                                   frugal::Duration timeout);

// Copies only the buffers (batch-norm running statistics) from `root`.
frugal::Status BroadcastBuffers(frugal::Transport& t, torch::nn::Module& module, int root,
                                frugal::Duration timeout);

// Copies the optimizer's state (momentum buffers, ...) and its parameter groups' options from
// `root`, through torch's own serialisation; the optimizers must hold the same parameters.
frugal::Status BroadcastOptimizerState(frugal::Transport& t, torch::optim::Optimizer& optimizer,
                                       int root, frugal::Duration timeout);

// Element-wise sum of `values` over all ranks, in rank order, in double precision: every rank
// gets bit-identical results. For metric averaging.
frugal::StatusOr<std::vector<double>> SumAcrossRanks(frugal::Transport& t,
                                                     std::span<const double> values,
                                                     frugal::Duration timeout);

// CRC-32 of the bytes of every parameter and buffer of `module`, in registration order.
uint32_t ParameterHash(const torch::nn::Module& module);

// Collective: true when every rank's ParameterHash equals rank 0's.
frugal::StatusOr<bool> ParametersConsistent(frugal::Transport& t, const torch::nn::Module& module,
                                            frugal::Duration timeout);

struct DistributedOptimizerOptions {
  size_t bucket_cap_bytes = frugal::kDefaultBucketCapBytes;
  frugal::Duration timeout = frugal::kDefaultTimeout;
};

class DistributedOptimizer {
 public:
  // `t`, `reducer`, `module` and `optimizer` must outlive the returned object. Collective (it
  // verifies the bucket plan with the peers).
  static frugal::StatusOr<std::unique_ptr<DistributedOptimizer>> Create(
      frugal::Transport& t, frugal::GradientReducer& reducer, torch::nn::Module& module,
      torch::optim::Optimizer& optimizer, DistributedOptimizerOptions options = {});

  // Averages every bucket's gradients across ranks, bucket 0 first.
  frugal::Status SynchronizeGradients();
  // SynchronizeGradients(), then the wrapped optimizer's step(); advances step().
  frugal::Status Step();
  void ZeroGrad() { optimizer_.zero_grad(); }

  // The pieces of SynchronizeGradients, for engines that overlap with backward.
  void PackBucket(int id);
  frugal::Status ReduceBucket(int id);
  void UnpackBucket(int id);

  const std::vector<frugal::BucketInfo>& buckets() const { return buckets_; }
  // Index into the module's trainable parameters of each entry of each bucket.
  const std::vector<std::vector<size_t>>& bucket_parameters() const { return bucket_params_; }
  uint64_t step() const { return step_; }
  // The step counter, for checkpoints (frugal/state_visitor.h).
  void VisitState(frugal::StateVisitor& visitor) { visitor.U64("step", step_); }
  // Seconds spent in ReduceBucket since construction.
  double comm_seconds() const { return comm_seconds_; }
  torch::optim::Optimizer& optimizer() { return optimizer_; }

 private:
  DistributedOptimizer(frugal::GradientReducer& reducer, torch::optim::Optimizer& optimizer)
      : reducer_(reducer), optimizer_(optimizer) {}

  frugal::GradientReducer& reducer_;
  torch::optim::Optimizer& optimizer_;
  std::vector<torch::Tensor> params_;
  std::vector<frugal::BucketInfo> buckets_;
  std::vector<std::vector<size_t>> bucket_params_;
  std::vector<std::vector<float>> buffers_;
  uint64_t step_ = 0;
  double comm_seconds_ = 0;
};

}  // namespace frugal_torch
