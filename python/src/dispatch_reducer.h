// The engine's reducer in the Python API: one engine (frugal/engine.h) carries both the
// gradients of a DistributedOptimizer and the collectives a script calls itself.
//
// A gradient is submitted as its float32 data, under the parameter's name. A collective
// (collective_ops.h) is submitted as a carrier: one float holding the op's id, under the name
// "<kind>:<name>" (OpName), with the op's Descriptor as its dtype. The engine negotiates both
// alike: names are matched across ranks, submissions of one name in order, and a rank that
// describes a name differently (another shape, dtype, reduction, root) fails on every rank.
//
// Reduce(bucket) runs on the engine thread: the bucket's gradient entries go, as one bucket, to
// the gradient path's reducer (dense or compressing, from the strategy); then each carrier's op
// runs on the transport, in the bucket's order, the same on every rank.
//
// Thread safety: Register/Forget from any thread; SetGradientPath, Reduce and bytes_sent on the
// engine thread (through Engine::Call after start-up).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "collective_ops.h"
#include "frugal/compressor.h"
#include "frugal/reducer.h"

namespace frugal_py {

// An op in flight, and the float the engine carries for it.
struct OpRecord {
  Op op;
  float carrier = 0;
  uint32_t id = 0;
};

// A gradient reducer and what it needs to live (its compressor registry).
struct GradientPath {
  frugal::CompressorRegistry registry;
  std::unique_ptr<frugal::GradientReducer> reducer;
};

std::string OpName(OpKind kind, std::string_view name);
bool IsOpName(std::string_view engine_name);

class DispatchReducer final : public frugal::GradientReducer {
 public:
  DispatchReducer(frugal::Transport& t, frugal::Duration timeout,
                  std::shared_ptr<GradientPath> dense);

  // Gives `record` an id, writes it into its carrier and keeps it until Reduce runs it or Forget.
  void Register(const std::shared_ptr<OpRecord>& record);
  // Drops an op the engine failed before running it (a mismatch across ranks).
  void Forget(uint32_t id);

  // The reducer of gradient entries from now on (null: the dense one).
  void SetGradientPath(std::shared_ptr<GradientPath> path);

  frugal::Status Reduce(const frugal::BucketInfo& bucket, std::span<float> data) override;
  std::string name() const override;
  uint64_t bytes_sent() const override;
  std::string bytes_counted_by() const override;

 private:
  frugal::Status ReduceGradients(const frugal::BucketInfo& bucket, std::span<float> data,
                                 const std::vector<size_t>& entries);

  frugal::Transport& t_;
  const frugal::Duration timeout_;
  std::shared_ptr<GradientPath> dense_;
  std::shared_ptr<GradientPath> path_;
  uint64_t op_bytes_ = 0;
  std::vector<float> scratch_;

  std::mutex mutex_;
  uint32_t next_id_ = 0;
  std::map<uint32_t, std::shared_ptr<OpRecord>> ops_;
};

}  // namespace frugal_py
