// The collectives of the Python API (frugal.torch: allreduce, allgather, broadcast) on torch
// tensors of any common dtype, run over a Transport on the thread that owns it.
//
// An Op is what one call asked for. Its Descriptor() is the text the engine negotiates as the
// carrier's dtype (dispatch_reducer.h), so that two ranks that call the same name with another
// kind, dtype, shape, reduction or root fail on every rank naming the difference.
//
// Run():
//   allreduce  float32: frugal's all-reduce (ring) in place, Sum or Average, bit-identical on
//              every rank. Other dtypes (float64, float16, bfloat16, integers): the ranks'
//              tensors are gathered and summed in rank order (floating types in double,
//              integers in int64), the same result on every rank. prescale multiplies the input,
//              postscale the result (after the division by the ranks for Average).
//   allgather  the ranks' tensors concatenated along dimension 0 in rank order (first
//              dimensions may differ, the others must agree): a new tensor in `output`.
//   broadcast  the root's bytes copied into `tensor` on every rank.
// Every wait is bounded by the timeout; errors are Status, nothing throws.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal_py {

enum class OpKind { kAllreduce, kAllgather, kBroadcast };
enum class ReduceKind { kSum, kAverage };

struct Op {
  OpKind kind = OpKind::kAllreduce;
  std::string name;
  torch::Tensor tensor;  // contiguous, CPU; reduced or broadcast in place, gathered from
  ReduceKind reduce = ReduceKind::kAverage;
  double prescale = 1.0;
  double postscale = 1.0;
  int root = 0;
  torch::Tensor output;  // allgather's result, set by Run
};

// kInvalidArgument when the tensor cannot take part (not on the CPU, a dtype frugal does not
// reduce, Average of an integer tensor, a root outside [0, size)).
frugal::Status ValidateOp(const Op& op, int world_size);

// "allreduce(sum) int64[3, 4]", "allgather float32[*, 4]", "broadcast(root 1) uint8[12]".
std::string Descriptor(const Op& op);

frugal::Status RunOp(frugal::Transport& t, Op& op, frugal::Duration timeout);

}  // namespace frugal_py
