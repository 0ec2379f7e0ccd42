// Helpers shared by frugal's benchmarks: size lists, medians, cross-rank reductions of timings,
// human tables and JSON-lines output.
//
// Benchmarks print both a human table (rank 0 only) and JSON, and compare against a peer
// measured in the same run. Sizes are binary: 4K = 4096 bytes, 64M = 64 MiB.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal::bench {

// Tags of the benchmarks' own messages (below frugal's reserved range).
inline constexpr int kBenchTag = 1000;
inline constexpr int kPingPongTag = 1001;

// "512", "4K", "4KB", "4KiB", "64M", "1G" (binary multiples). kInvalidArgument otherwise.
StatusOr<size_t> ParseByteSize(std::string_view text);
// Comma-separated list of sizes, at least one.
StatusOr<std::vector<size_t>> ParseByteSizeList(std::string_view text);
// Comma-separated list of names, at least one, no empty element.
StatusOr<std::vector<std::string>> ParseNameList(std::string_view text);
// 4096 -> "4K", 67108864 -> "64M", 1000 -> "1000".
std::string FormatBytes(size_t bytes);
// Microseconds with the decimals that matter: "3.25", "42.5", "1234".
std::string FormatMicros(double us);

// The median (mean of the two middle values for an even count). Precondition: not empty.
double Median(std::vector<double> values);
// The q-quantile (0 <= q <= 1), interpolated linearly between order statistics: Quantile(v, 0.5)
// is Median(v). Precondition: not empty.
double Quantile(std::vector<double> values, double q);

// Every rank passes a vector of the same length; on return rank 0 holds the elementwise maximum
// over ranks (the other ranks' vectors are unchanged).
Status MaxToRoot(Transport& t, std::vector<double>& values, Duration timeout);

// A plain-text table with right-aligned columns (left-aligned where asked).
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<bool> left_aligned = {});
  void AddRow(std::vector<std::string> cells);
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> left_;
  std::vector<std::vector<std::string>> rows_;
};

// Creates (truncates) `path` to check early that it can be written.
Status CheckWritable(const std::string& path);
// Writes one JSON object per line.
Status WriteJsonLines(const std::string& path, const std::vector<nlohmann::json>& records);

}  // namespace frugal::bench
