// A reducer that reduces nothing, for tests and benchmarks of the engine's own messages.
#pragma once

#include <span>
#include <string>

#include "frugal/reducer.h"

namespace frugal::testing {

class NoOpReducer final : public GradientReducer {
 public:
  Status Reduce(const BucketInfo&, std::span<float>) override { return Status::Ok(); }
  std::string name() const override { return "noop"; }
  uint64_t bytes_sent() const override { return 0; }
  std::string bytes_counted_by() const override { return "transport"; }
};

}  // namespace frugal::testing
