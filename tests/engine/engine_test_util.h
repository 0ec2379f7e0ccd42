// Helpers of the engine tests: a reducer that records what it reduced (and can hold its first
// call until a test releases it), per-rank inputs with exact sums, and status matchers.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "frugal/engine.h"
#include "frugal/inproc_transport.h"
#include "frugal/random.h"
#include "frugal/reducer.h"
#include "noop_reducer.h"

namespace frugal::testing {

// How long a test waits for an engine operation before it fails.
inline constexpr Duration kWait = std::chrono::seconds(30);

// A one-shot gate: Wait blocks until Open.
class Gate {
 public:
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }
  bool Wait(Duration timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Forwards to a real reducer and records each bucket's entry names, in call order. If
// `before_first` is set, the first call runs it before reducing (to hold the engine there).
class RecordingReducer final : public GradientReducer {
 public:
  explicit RecordingReducer(std::unique_ptr<GradientReducer> inner) : inner_(std::move(inner)) {}

  Status Reduce(const BucketInfo& bucket, std::span<float> data) override {
    Record(bucket, false);
    return inner_->Reduce(bucket, data);
  }
  SharedBytes NewBucketMemory(size_t count) override { return inner_->NewBucketMemory(count); }
  Status ReduceShared(const BucketInfo& bucket, std::span<float> data,
                      std::shared_ptr<void> owner) override {
    Record(bucket, true);
    return inner_->ReduceShared(bucket, data, std::move(owner));
  }
  std::string name() const override { return "recording:" + inner_->name(); }
  uint64_t bytes_sent() const override { return inner_->bytes_sent(); }
  std::string bytes_counted_by() const override { return inner_->bytes_counted_by(); }

  std::vector<std::vector<std::string>> buckets() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return buckets_;
  }
  std::vector<size_t> counts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return counts_;
  }
  // Per bucket: whether it came through ReduceShared (in the reducer's bucket memory).
  std::vector<bool> shared() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return shared_;
  }

  std::function<void()> before_first;

 private:
  void Record(const BucketInfo& bucket, bool shared) {
    if (calls_++ == 0 && before_first) before_first();
    std::vector<std::string> names;
    for (const BucketEntry& e : bucket.entries) names.push_back(e.name);
    std::lock_guard<std::mutex> lock(mutex_);
    buckets_.push_back(std::move(names));
    counts_.push_back(bucket.count);
    shared_.push_back(shared);
  }

  std::unique_ptr<GradientReducer> inner_;
  int calls_ = 0;
  mutable std::mutex mutex_;
  std::vector<std::vector<std::string>> buckets_;
  std::vector<size_t> counts_;
  std::vector<bool> shared_;
};

// prefix + k (a function: GCC 12 warns falsely about `"t" + std::to_string(k)`).
inline std::string Indexed(std::string_view prefix, size_t k) {
  std::string name(prefix);
  name += std::to_string(k);
  return name;
}

inline TensorRequest Req(std::string name, int priority = 0, uint64_t step = 0) {
  TensorRequest request;
  request.name = std::move(name);
  request.priority = priority;
  request.step = step;
  return request;
}

inline std::unique_ptr<GradientReducer> RingReducer(Transport& t) {
  DenseReducerOptions options;
  options.algorithm = "ring";
  options.timeout = std::chrono::seconds(20);
  return std::move(MakeDenseReducer(t, options)).value();
}

// Multiples of 1/8 in [-8, 8): sums and averages over up to 8 ranks are exact in float in any
// order, so results can be compared bit for bit whatever the bucket layout.
inline std::vector<float> DyadicInput(int rank, size_t length, uint64_t tensor) {
  RngStream rng(RngKey{.seed = 77, .rank = rank, .step = 0, .tensor = tensor});
  std::vector<float> v(length);
  for (float& x : v) x = static_cast<float>(static_cast<int>(rng.Below(128)) - 64) / 8.0f;
  return v;
}

inline std::vector<float> UniformInput(int rank, size_t length, uint64_t tensor) {
  RngStream rng(RngKey{.seed = 78, .rank = rank, .step = 0, .tensor = tensor});
  std::vector<float> v(length);
  for (float& x : v) x = 2.0f * rng.Uniform() - 1.0f;
  return v;
}

inline void ExpectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
}

}  // namespace frugal::testing
