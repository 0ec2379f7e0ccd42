// The LibTorch adapter's collectives and the distributed optimizer.
//
// BroadcastParameters / BroadcastBuffers pack the bytes of the tensors, in registration order,
// into one contiguous byte vector, Broadcast it from `root` (Broadcast checks that every rank
// passes the same length) and copy the bytes back into the tensors on the other ranks.
//
// BroadcastOptimizerState serialises the optimizer with torch's OutputArchive on `root`, sends
// the length (8 bytes) and then the archive, and loads it with InputArchive elsewhere; torch maps
// saved state to parameters by position, so equal models on different ranks line up.
//
// SumAcrossRanks gathers every rank's doubles with Allgatherv and adds them in rank order, so the
// sums are the same bits on every rank (a float all-reduce would round and reorder).
//
// DistributedOptimizer::Create lists the trainable parameters in reverse registration order and
// plans buckets over them with PlanBuckets (names from named_parameters()), then VerifySamePlan.
// SynchronizeGradients runs, for each bucket in id order, PackBucket (copy each parameter's
// gradient, or zeros if it has none, to its offset in the bucket's float buffer), ReduceBucket
// (the reducer averages the buffer across ranks; the time is added to comm_seconds_) and
// UnpackBucket (copy the averaged values back into the gradients, creating them if absent).
#include "frugal_torch/distributed.h"

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/crc.h"
#include "frugal/fingerprint.h"

namespace frugal_torch {
namespace {

using frugal::Status;
using frugal::StatusOr;

std::vector<torch::Tensor> StateTensors(const torch::nn::Module& module, bool parameters,
                                        bool buffers) {
  std::vector<torch::Tensor> tensors;
  if (parameters) {
    for (const auto& p : module.parameters()) tensors.push_back(p);
  }
  if (buffers) {
    for (const auto& b : module.buffers()) tensors.push_back(b);
  }
  return tensors;
}

size_t TensorBytes(const torch::Tensor& t) { return static_cast<size_t>(t.nbytes()); }

Status BroadcastTensors(frugal::Transport& t, std::vector<torch::Tensor> tensors, int root,
                        frugal::Duration timeout, const char* what) {
  size_t total = 0;
  for (const auto& tensor : tensors) total += TensorBytes(tensor);
  std::vector<std::byte> bytes(total);
  torch::NoGradGuard no_grad;
  if (t.rank() == root) {
    size_t offset = 0;
    for (const auto& tensor : tensors) {
      const torch::Tensor c = tensor.contiguous();
      std::memcpy(bytes.data() + offset, c.data_ptr(), TensorBytes(c));
      offset += TensorBytes(c);
    }
  }
  frugal::CollectiveOptions options;
  options.timeout = timeout;
  FRUGAL_RETURN_IF_ERROR(frugal::Broadcast(t, std::span<std::byte>(bytes), root, options)
                             .Annotate(std::string("broadcast of the ") + what));
  if (t.rank() != root) {
    size_t offset = 0;
    for (auto& tensor : tensors) {
      const size_t n = TensorBytes(tensor);
      torch::Tensor source =
          torch::from_blob(bytes.data() + offset, tensor.sizes(), tensor.options());
      tensor.copy_(source);
      offset += n;
    }
  }
  return Status::Ok();
}

}  // namespace

Status BroadcastParameters(frugal::Transport& t, torch::nn::Module& module, int root,
                           frugal::Duration timeout) {
  return BroadcastTensors(t, StateTensors(module, true, true), root, timeout,
                          "parameters and buffers");
}

Status BroadcastBuffers(frugal::Transport& t, torch::nn::Module& module, int root,
                        frugal::Duration timeout) {
  std::vector<torch::Tensor> buffers = StateTensors(module, false, true);
  if (buffers.empty()) return Status::Ok();
  return BroadcastTensors(t, std::move(buffers), root, timeout, "buffers");
}

Status BroadcastOptimizerState(frugal::Transport& t, torch::optim::Optimizer& optimizer, int root,
                               frugal::Duration timeout) {
  frugal::CollectiveOptions options;
  options.timeout = timeout;
  std::string payload;
  if (t.rank() == root) {
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    std::ostringstream out;
    archive.save_to(out);
    payload = out.str();
  }
  uint64_t length = payload.size();
  FRUGAL_RETURN_IF_ERROR(
      frugal::Broadcast(t, std::as_writable_bytes(std::span<uint64_t>(&length, 1)), root, options)
          .Annotate("broadcast of the optimizer state's size"));
  payload.resize(length);
  FRUGAL_RETURN_IF_ERROR(
      frugal::Broadcast(t, std::as_writable_bytes(std::span<char>(payload.data(), length)), root,
                        options)
          .Annotate("broadcast of the optimizer state"));
  if (t.rank() != root) {
    try {
      torch::serialize::InputArchive archive;
      std::istringstream in(payload);
      archive.load_from(in);
      optimizer.load(archive);
    } catch (const c10::Error& e) {
      return frugal::MalformedError(std::string("optimizer state from rank ") +
                                    std::to_string(root) +
                                    " does not fit this optimizer: " + e.what_without_backtrace());
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<double>> SumAcrossRanks(frugal::Transport& t, std::span<const double> values,
                                             frugal::Duration timeout) {
  std::vector<std::byte> gathered;
  std::vector<size_t> sizes;
  frugal::CollectiveOptions options;
  options.timeout = timeout;
  FRUGAL_RETURN_IF_ERROR(frugal::Allgatherv(t, std::as_bytes(values), gathered, sizes, options)
                             .Annotate("metric exchange"));
  const size_t row = values.size_bytes();
  if (sizes.size() != static_cast<size_t>(t.size()) || gathered.size() != row * sizes.size()) {
    return frugal::InvalidArgumentError("metric exchange: ranks contributed different counts");
  }
  std::vector<double> sums(values.size(), 0.0);
  for (size_t r = 0; r < sizes.size(); ++r) {
    if (sizes[r] != row) {
      return frugal::InvalidArgumentError("metric exchange: rank " + std::to_string(r) + " sent " +
                                          std::to_string(sizes[r]) + " bytes, expected " +
                                          std::to_string(row));
    }
    for (size_t i = 0; i < values.size(); ++i) {
      double v;
      std::memcpy(&v, gathered.data() + r * row + i * sizeof(double), sizeof(double));
      sums[i] += v;
    }
  }
  return sums;
}

uint32_t ParameterHash(const torch::nn::Module& module) {
  uint32_t crc = 0;
  for (const auto& tensor : StateTensors(module, true, true)) {
    const torch::Tensor c = tensor.contiguous();
    crc = frugal::Crc32(
        std::span<const std::byte>(static_cast<const std::byte*>(c.data_ptr()), TensorBytes(c)),
        crc);
  }
  return crc;
}

StatusOr<bool> ParametersConsistent(frugal::Transport& t, const torch::nn::Module& module,
                                    frugal::Duration timeout) {
  frugal::CollectiveOptions options;
  options.timeout = timeout;
  auto differing = frugal::RanksDifferingFromRankZero(t, ParameterHash(module), options);
  if (!differing.ok()) return differing.status().Annotate("parameter hash exchange");
  return differing->empty();
}

StatusOr<std::unique_ptr<DistributedOptimizer>> DistributedOptimizer::Create(
    frugal::Transport& t, frugal::GradientReducer& reducer, torch::nn::Module& module,
    torch::optim::Optimizer& optimizer, DistributedOptimizerOptions options) {
  std::unique_ptr<DistributedOptimizer> self(new DistributedOptimizer(reducer, optimizer));
  std::vector<frugal::TensorSpec> specs;
  std::vector<size_t> order;
  const auto named = module.named_parameters(/*recurse=*/true);
  for (const auto& item : named) {
    if (!item.value().requires_grad()) continue;
    FRUGAL_CHECK(item.value().scalar_type() == torch::kFloat, "parameter ", item.key(),
                 " is not float32");
    self->params_.push_back(item.value());
  }
  std::vector<std::string> names;
  for (const auto& item : named) {
    if (item.value().requires_grad()) names.push_back(item.key());
  }
  for (size_t i = self->params_.size(); i-- > 0;) {
    specs.push_back(
        {names[i], static_cast<size_t>(self->params_[i].numel()), self->params_[i].sizes().vec()});
    order.push_back(i);
  }
  self->buckets_ = frugal::PlanBuckets(specs, options.bucket_cap_bytes);
  FRUGAL_RETURN_IF_ERROR(frugal::VerifySamePlan(t, self->buckets_, options.timeout));
  // PlanBuckets skips empty tensors; map each entry back to its parameter by walking `specs`.
  size_t spec_index = 0;
  for (const frugal::BucketInfo& bucket : self->buckets_) {
    std::vector<size_t> indices;
    for (const frugal::BucketEntry& entry : bucket.entries) {
      while (specs[spec_index].name != entry.name) ++spec_index;
      indices.push_back(order[spec_index++]);
    }
    self->bucket_params_.push_back(std::move(indices));
    self->buffers_.emplace_back(bucket.count);
  }
  return self;
}

void DistributedOptimizer::PackBucket(int id) {
  const frugal::BucketInfo& bucket = buckets_.at(static_cast<size_t>(id));
  std::vector<float>& buffer = buffers_[static_cast<size_t>(id)];
  for (size_t e = 0; e < bucket.entries.size(); ++e) {
    const frugal::BucketEntry& entry = bucket.entries[e];
    const torch::Tensor& grad = params_[bucket_params_[static_cast<size_t>(id)][e]].grad();
    float* dst = buffer.data() + entry.offset;
    if (!grad.defined()) {
      std::fill(dst, dst + entry.count, 0.0f);
    } else {
      const torch::Tensor c = grad.contiguous();
      std::memcpy(dst, c.data_ptr<float>(), entry.count * sizeof(float));
    }
  }
}

frugal::Status DistributedOptimizer::ReduceBucket(int id) {
  frugal::BucketInfo& bucket = buckets_.at(static_cast<size_t>(id));
  bucket.step = step_;
  frugal::Stopwatch watch;
  Status status = reducer_.Reduce(bucket, buffers_[static_cast<size_t>(id)]);
  comm_seconds_ += watch.Seconds();
  return status;
}

void DistributedOptimizer::UnpackBucket(int id) {
  const frugal::BucketInfo& bucket = buckets_.at(static_cast<size_t>(id));
  std::vector<float>& buffer = buffers_[static_cast<size_t>(id)];
  torch::NoGradGuard no_grad;
  for (size_t e = 0; e < bucket.entries.size(); ++e) {
    const frugal::BucketEntry& entry = bucket.entries[e];
    torch::Tensor& param = params_[bucket_params_[static_cast<size_t>(id)][e]];
    torch::Tensor averaged = torch::from_blob(buffer.data() + entry.offset, param.sizes(),
                                              torch::TensorOptions().dtype(torch::kFloat));
    if (!param.grad().defined()) {
      param.mutable_grad() = averaged.clone();
    } else {
      param.mutable_grad().copy_(averaged);
    }
  }
}

frugal::Status DistributedOptimizer::SynchronizeGradients() {
  for (size_t id = 0; id < buckets_.size(); ++id) {
    PackBucket(static_cast<int>(id));
    FRUGAL_RETURN_IF_ERROR(ReduceBucket(static_cast<int>(id)));
    UnpackBucket(static_cast<int>(id));
  }
  return Status::Ok();
}

frugal::Status DistributedOptimizer::Step() {
  FRUGAL_RETURN_IF_ERROR(SynchronizeGradients());
  optimizer_.step();
  ++step_;
  return Status::Ok();
}

}  // namespace frugal_torch
