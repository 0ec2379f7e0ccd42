// Sweep files shared by the sweep tests.
#pragma once

#include <string>

#include "sweep_spec.h"

namespace frugal::apps::testing {

inline StatusOr<SweepSpec> Spec(const std::string& text) { return ParseSweepSpec(text, "s.toml"); }

inline constexpr const char* kGoodSweep = R"(
name = "demo"
description = "two methods"
timeout_minutes = 5
[base]
model = "mlp"
epochs = 3
fast = true
[axes]
compressor = ["none", "topk:ratio=0.01,ef=1"]
np = [2, 4]
lr = [0.01, 0.1]
[report]
target_accuracy = 0.34
baseline = "none"
)";

inline constexpr const char* kVariantSweep = R"(
name = "v"
[base]
np = 4
[axes]
lr = [0.01, 0.1]
[variants]
dense = []
topk_ef = ["--compressor=topk:ratio=0.01", "--ef"]
[report]
baseline = "dense"
)";

}  // namespace frugal::apps::testing
