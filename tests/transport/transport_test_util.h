// Helpers of the transport tests: ints as message bytes, per-rank expectations, status checks.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal::transport_test {

inline constexpr Duration kWait = std::chrono::seconds(20);

inline std::span<const std::byte> Bytes(const int& v) {
  return std::as_bytes(std::span<const int>(&v, 1));
}
inline std::span<std::byte> WBytes(int& v) { return std::as_writable_bytes(std::span<int>(&v, 1)); }

inline void ExpectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
}

}  // namespace frugal::transport_test

// Fails the calling rank's Status with a readable message when `cond` is false.
#define RANK_EXPECT(cond, ...)                                             \
  do {                                                                     \
    if (!(cond))                                                           \
      return InternalError(std::string("expectation failed: " #cond " ") + \
                           std::string(__VA_ARGS__));                      \
  } while (false)
