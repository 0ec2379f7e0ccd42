// See dispatch_reducer.h.
#include "dispatch_reducer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace frugal_py {
namespace {

// Carrier ids are floats: integers below 2^24 are exact.
constexpr uint32_t kIdSpace = uint32_t{1} << 24;

constexpr std::string_view kKindNames[] = {"allreduce", "allgather", "broadcast"};

}  // namespace

std::string OpName(OpKind kind, std::string_view name) {
  return fmt::format("{}:{}", kKindNames[static_cast<int>(kind)], name);
}

bool IsOpName(std::string_view engine_name) {
  for (std::string_view kind : kKindNames) {
    if (engine_name.size() > kind.size() && engine_name.starts_with(kind) &&
        engine_name[kind.size()] == ':') {
      return true;
    }
  }
  return false;
}

DispatchReducer::DispatchReducer(frugal::Transport& t, frugal::Duration timeout,
                                 std::shared_ptr<GradientPath> dense)
    : t_(t), timeout_(timeout), dense_(std::move(dense)), path_(dense_) {}

void DispatchReducer::Register(const std::shared_ptr<OpRecord>& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The next id that is not in flight (ids wrap around after 2^24 ops).
  while (ops_.count(next_id_) != 0) next_id_ = (next_id_ + 1) % kIdSpace;
  record->id = next_id_;
  record->carrier = static_cast<float>(next_id_);
  next_id_ = (next_id_ + 1) % kIdSpace;
  ops_[record->id] = record;
}

void DispatchReducer::Forget(uint32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  ops_.erase(id);
}

void DispatchReducer::SetGradientPath(std::shared_ptr<GradientPath> path) {
  path_ = path ? std::move(path) : dense_;
}

frugal::Status DispatchReducer::ReduceGradients(const frugal::BucketInfo& bucket,
                                                std::span<float> data,
                                                const std::vector<size_t>& entries) {
  if (entries.size() == bucket.entries.size()) return path_->reducer->Reduce(bucket, data);
  // Mixed with carriers: the gradients alone, packed.
  frugal::BucketInfo grads;
  grads.id = bucket.id;
  grads.name = bucket.name;
  grads.step = bucket.step;
  for (size_t i : entries) {
    frugal::BucketEntry e = bucket.entries[i];
    e.offset = grads.count;
    grads.count += e.count;
    grads.entries.push_back(std::move(e));
  }
  scratch_.resize(grads.count);
  for (size_t k = 0; k < entries.size(); ++k) {
    const frugal::BucketEntry& from = bucket.entries[entries[k]];
    std::memcpy(scratch_.data() + grads.entries[k].offset, data.data() + from.offset,
                from.count * sizeof(float));
  }
  FRUGAL_RETURN_IF_ERROR(path_->reducer->Reduce(grads, scratch_));
  for (size_t k = 0; k < entries.size(); ++k) {
    const frugal::BucketEntry& to = bucket.entries[entries[k]];
    std::memcpy(data.data() + to.offset, scratch_.data() + grads.entries[k].offset,
                to.count * sizeof(float));
  }
  return frugal::Status::Ok();
}

frugal::Status DispatchReducer::Reduce(const frugal::BucketInfo& bucket, std::span<float> data) {
  std::vector<size_t> gradients;
  std::vector<size_t> ops;
  for (size_t i = 0; i < bucket.entries.size(); ++i) {
    (IsOpName(bucket.entries[i].name) ? ops : gradients).push_back(i);
  }
  if (!gradients.empty()) FRUGAL_RETURN_IF_ERROR(ReduceGradients(bucket, data, gradients));
  for (size_t i : ops) {
    const frugal::BucketEntry& e = bucket.entries[i];
    if (e.count != 1) {
      return frugal::InternalError(fmt::format(
          "'{}' reached the reducer with {} elements, not its carrier", e.name, e.count));
    }
    const auto id = static_cast<uint32_t>(data[e.offset]);
    std::shared_ptr<OpRecord> record;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = ops_.find(id);
      if (it != ops_.end()) {
        record = std::move(it->second);
        ops_.erase(it);
      }
    }
    if (!record) {
      return frugal::InternalError(fmt::format("'{}': no op with id {} is in flight", e.name, id));
    }
    const uint64_t before = t_.bytes_sent();
    frugal::Status status;
    try {
      status = RunOp(t_, record->op, timeout_);
    } catch (const std::exception& ex) {
      status = frugal::InternalError(fmt::format("'{}': {}", e.name, ex.what()));
    }
    op_bytes_ += t_.bytes_sent() - before;
    FRUGAL_RETURN_IF_ERROR(status.Annotate(e.name));
  }
  return frugal::Status::Ok();
}

std::string DispatchReducer::name() const { return path_->reducer->name(); }

uint64_t DispatchReducer::bytes_sent() const {
  uint64_t bytes = op_bytes_ + dense_->reducer->bytes_sent();
  if (path_ != dense_) bytes += path_->reducer->bytes_sent();
  return bytes;
}

std::string DispatchReducer::bytes_counted_by() const { return path_->reducer->bytes_counted_by(); }

}  // namespace frugal_py
