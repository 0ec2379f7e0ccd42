// The Python API's collectives on torch tensors: see collective_ops.h.
//
// Allreduce of a dtype other than float32 gathers every rank's tensor (Allgatherv) and sums the
// contributions in rank order, so that every rank computes the same result from the same bytes:
// floating types accumulate in double (then round once to the dtype), integers in int64. It moves
// n times the tensor, against about twice for the ring: meant for metrics and counters, the
// tensors of training being float32.
#include "collective_ops.h"

#include <fmt/format.h>

#include <cstring>
#include <span>
#include <vector>

#include "frugal/collectives.h"

namespace frugal_py {
namespace {

using frugal::Status;

bool Reducible(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat:
    case c10::kDouble:
    case c10::kHalf:
    case c10::kBFloat16:
    case c10::kByte:
    case c10::kChar:
    case c10::kShort:
    case c10::kInt:
    case c10::kLong:
      return true;
    default:
      return false;
  }
}

std::string ShapeText(const torch::Tensor& t, bool any_first) {
  std::string text = "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d > 0) text += ", ";
    text += d == 0 && any_first ? "*" : std::to_string(t.size(d));
  }
  return text + "]";
}

std::span<std::byte> Bytes(torch::Tensor& t) {
  return {static_cast<std::byte*>(t.data_ptr()), static_cast<size_t>(t.nbytes())};
}

// Every rank's tensor, gathered in rank order (same length on every rank: checked by the
// negotiated descriptor).
Status GatherAll(frugal::Transport& t, torch::Tensor& tensor, std::vector<std::byte>& out,
                 frugal::Duration timeout) {
  std::vector<size_t> sizes;
  frugal::CollectiveOptions options;
  options.timeout = timeout;
  return frugal::Allgatherv(t, Bytes(tensor), out, sizes, options);
}

Status AllreduceGathered(frugal::Transport& t, Op& op, frugal::Duration timeout) {
  std::vector<std::byte> gathered;
  FRUGAL_RETURN_IF_ERROR(GatherAll(t, op.tensor, gathered, timeout));
  const int n = t.size();
  const auto dtype = op.tensor.scalar_type();
  const size_t bytes = static_cast<size_t>(op.tensor.nbytes());
  const bool floating = c10::isFloatingType(dtype);
  torch::Tensor sum = torch::zeros(op.tensor.sizes(), floating ? torch::kDouble : torch::kLong);
  for (int r = 0; r < n; ++r) {
    torch::Tensor part = torch::from_blob(gathered.data() + static_cast<size_t>(r) * bytes,
                                          op.tensor.sizes(), op.tensor.options());
    sum.add_(part.to(sum.scalar_type()));
  }
  if (op.reduce == ReduceKind::kAverage) sum.div_(static_cast<double>(n));
  if (op.postscale != 1.0) {
    if (floating) {
      sum.mul_(op.postscale);
    } else {
      sum = sum.to(torch::kDouble).mul_(op.postscale);
    }
  }
  op.tensor.copy_(sum);
  return Status::Ok();
}

}  // namespace

Status ValidateOp(const Op& op, int world_size) {
  if (!op.tensor.defined()) return frugal::InvalidArgumentError("no tensor given");
  if (!op.tensor.device().is_cpu()) {
    return frugal::InvalidArgumentError(fmt::format("'{}': frugal works on CPU tensors, not {}",
                                                    op.name, op.tensor.device().str()));
  }
  if (op.kind == OpKind::kAllreduce) {
    if (!Reducible(op.tensor.scalar_type())) {
      return frugal::InvalidArgumentError(fmt::format(
          "'{}': allreduce takes float32, float64, float16, bfloat16, uint8, int8, int16, int32 "
          "or int64 tensors, not {}",
          op.name, c10::toString(op.tensor.scalar_type())));
    }
    if (op.reduce == ReduceKind::kAverage && !c10::isFloatingType(op.tensor.scalar_type())) {
      return frugal::InvalidArgumentError(
          fmt::format("'{}': op=Average needs a floating-point tensor ({}); use op=Sum", op.name,
                      c10::toString(op.tensor.scalar_type())));
    }
  }
  if (op.kind == OpKind::kBroadcast && (op.root < 0 || op.root >= world_size)) {
    return frugal::InvalidArgumentError(fmt::format(
        "'{}': root_rank {} is not a rank of a job of {}", op.name, op.root, world_size));
  }
  return Status::Ok();
}

std::string Descriptor(const Op& op) {
  const std::string dtype = c10::toString(op.tensor.scalar_type());
  switch (op.kind) {
    case OpKind::kAllreduce: {
      std::string scale;
      if (op.prescale != 1.0 || op.postscale != 1.0) {
        scale = fmt::format(", prescale {}, postscale {}", op.prescale, op.postscale);
      }
      return fmt::format("allreduce({}{}) {}{}", op.reduce == ReduceKind::kSum ? "sum" : "average",
                         scale, dtype, ShapeText(op.tensor, false));
    }
    case OpKind::kAllgather:
      return fmt::format("allgather {}{}", dtype, ShapeText(op.tensor, true));
    case OpKind::kBroadcast:
      return fmt::format("broadcast(root {}) {}{}", op.root, dtype, ShapeText(op.tensor, false));
  }
  return "";
}

Status RunOp(frugal::Transport& t, Op& op, frugal::Duration timeout) {
  switch (op.kind) {
    case OpKind::kAllreduce: {
      if (op.prescale != 1.0) op.tensor.mul_(op.prescale);
      if (op.tensor.scalar_type() != c10::kFloat) return AllreduceGathered(t, op, timeout);
      frugal::AllreduceOptions options;
      options.op =
          op.reduce == ReduceKind::kSum ? frugal::ReduceOp::kSum : frugal::ReduceOp::kAverage;
      options.timeout = timeout;
      std::span<float> data(op.tensor.data_ptr<float>(), static_cast<size_t>(op.tensor.numel()));
      FRUGAL_RETURN_IF_ERROR(frugal::Allreduce(t, data, options));
      if (op.postscale != 1.0) op.tensor.mul_(op.postscale);
      return Status::Ok();
    }
    case OpKind::kAllgather: {
      // A scalar is gathered as a tensor of one element per rank.
      torch::Tensor in = op.tensor.dim() == 0 ? op.tensor.reshape({1}) : op.tensor;
      std::vector<std::byte> gathered;
      std::vector<size_t> sizes;
      frugal::CollectiveOptions options;
      options.timeout = timeout;
      FRUGAL_RETURN_IF_ERROR(frugal::Allgatherv(t, Bytes(in), gathered, sizes, options));
      const int64_t row_elements = in.size(0) == 0 ? 0 : in.numel() / in.size(0);
      int64_t rows = 0;
      if (row_elements > 0) {
        const size_t row_bytes = static_cast<size_t>(row_elements) * in.element_size();
        for (size_t s : sizes) {
          if (s % row_bytes != 0) {
            return frugal::MalformedError(
                fmt::format("allgather '{}': a rank sent {} bytes, not whole rows of {} bytes",
                            op.name, s, row_bytes));
          }
          rows += static_cast<int64_t>(s / row_bytes);
        }
      }
      std::vector<int64_t> shape = in.sizes().vec();
      shape[0] = rows;
      op.output = torch::empty(shape, in.options());
      if (!gathered.empty()) std::memcpy(op.output.data_ptr(), gathered.data(), gathered.size());
      return Status::Ok();
    }
    case OpKind::kBroadcast: {
      frugal::CollectiveOptions options;
      options.timeout = timeout;
      return frugal::Broadcast(t, Bytes(op.tensor), op.root, options);
    }
  }
  return frugal::InternalError("unknown op kind");
}

}  // namespace frugal_py
