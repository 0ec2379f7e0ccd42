// Pieces shared by the training loops (trainer.cc, fedavg_trainer.cc). Internal to frugal_torch.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "frugal_torch/data.h"
#include "frugal_torch/schedule.h"
#include "frugal_torch/trainer.h"

namespace frugal_torch::internal {

// The images of `set` as an N x 1 x rows x cols float tensor (a view of its buffer).
inline torch::Tensor ImagesTensor(const ImageSet& set) {
  return torch::from_blob(const_cast<float*>(set.images.data()), {set.count, 1, set.rows, set.cols},
                          torch::TensorOptions().dtype(torch::kFloat));
}

// What the model predicts, as int64 (a copy): the labels of `set` (N), or for a sequence task its
// targets (N x cols).
inline torch::Tensor LabelsTensor(const ImageSet& set) {
  if (!set.targets.empty()) {
    return torch::from_blob(const_cast<uint8_t*>(set.targets.data()), {set.count, set.cols},
                            torch::TensorOptions().dtype(torch::kUInt8))
        .to(torch::kLong);
  }
  return torch::from_blob(const_cast<uint8_t*>(set.labels.data()), {set.count},
                          torch::TensorOptions().dtype(torch::kUInt8))
      .to(torch::kLong);
}

// Every parameter of `module`, flattened in registration order.
inline std::vector<float> FlatParameters(torch::nn::Module& module) {
  std::vector<float> flat;
  for (const torch::Tensor& p : module.parameters()) {
    const torch::Tensor c = p.detach().contiguous();
    flat.insert(flat.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return flat;
}

// The learning-rate schedule of `options` with `steps_per_epoch` steps in an epoch.
inline LrSchedule ScheduleOf(const TrainOptions& options, int64_t steps_per_epoch) {
  LrSchedule schedule;
  schedule.kind = options.schedule;
  schedule.base_lr = options.lr;
  schedule.warmup_steps =
      std::llround(options.warmup_epochs * static_cast<double>(steps_per_epoch));
  for (double epoch : options.lr_milestones) {
    schedule.milestones.push_back(std::llround(epoch * static_cast<double>(steps_per_epoch)));
  }
  std::sort(schedule.milestones.begin(), schedule.milestones.end());
  schedule.gamma = options.lr_gamma;
  schedule.total_steps = options.epochs * steps_per_epoch;
  return schedule;
}

}  // namespace frugal_torch::internal
