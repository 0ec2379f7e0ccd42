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

// A study: two models x two learning rates as columns, seeds as an axis, two variants.
inline constexpr const char* kStudySweep = R"(name = "study"
[base]
epochs = 1
[axes]
model = ["mlp", "cnn"]
lr = [0.05, 0.1]
np = [2, 4]
seed = [1, 2, 3]
[variants]
bsp = []
local_4 = ["--sync=local:period=4"]
[report]
columns = ["model", "lr"]
seeds = "seed"
)";

}  // namespace frugal::apps::testing
