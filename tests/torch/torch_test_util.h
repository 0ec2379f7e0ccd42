// Helpers shared by the tests that train through frugal_torch.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include "frugal/reducer.h"
#include "frugal/status.h"
#include "frugal/transport.h"
#include "frugal_torch/data.h"

namespace frugal_torch::testing_torch {

// Fashion-MNIST, loaded once per test binary (the tests need the Debian package).
inline const FashionMnist& Data() {
  static const FashionMnist* data = [] {
    auto loaded = LoadFashionMnist();
    if (!loaded.ok()) throw std::runtime_error(loaded.status().ToString());
    return new FashionMnist(std::move(loaded).value());
  }();
  return *data;
}

// The dense ring reducer with a 30 s timeout.
inline std::unique_ptr<frugal::GradientReducer> Ring(frugal::Transport& t) {
  frugal::DenseReducerOptions options;
  options.algorithm = "ring";
  options.timeout = std::chrono::seconds(30);
  return frugal::MakeDenseReducer(t, options).value();
}

// The largest |a[i] - b[i]|; the sizes must agree.
inline double MaxAbsDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return worst;
}

inline void ExpectAllOk(const std::vector<frugal::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
}

}  // namespace frugal_torch::testing_torch
