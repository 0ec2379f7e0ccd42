// Gloo's all-reduce as a GradientReducer: the peer behind `--arch allreduce:gloo`. Internal to the
// collectives layer; reached through MakeDenseReducer("gloo[:ALGORITHM]").
#pragma once

#include <memory>

#include "frugal/gloo.h"
#include "frugal/reducer.h"
#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal {

// Collective over `t`: connects a Gloo context in GlooMode::kAsync (the mode in which two ranks
// cannot wait for each other's reads), bounded by `timeout`, as is every Reduce.
StatusOr<std::unique_ptr<GradientReducer>> MakeGlooReducer(Transport& t, GlooAlgorithm algorithm,
                                                           Duration timeout);

}  // namespace frugal
