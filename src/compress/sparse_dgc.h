// The per-tensor state of the dgc compressor (sparse_dgc.cc), visible to its tests. Internal to
// frugal_compress.
#pragma once

#include <string_view>
#include <vector>

#include "frugal/compressor.h"

namespace frugal::sparse {

inline constexpr std::string_view kDgcSlot = "dgc";

// u: momentum, v: accumulated velocity, both zero at the indices sent last.
struct DgcState : TensorState {
  std::vector<float> u, v;
  void VisitState(StateVisitor& visitor) override {
    visitor.FloatVector("u", u);
    visitor.FloatVector("v", v);
  }
};

}  // namespace frugal::sparse
