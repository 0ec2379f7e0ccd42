#include "network_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace frugal::apps {

namespace {

bool IsNumber(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number();
}

// The records of `path` (a JSON object per line; other lines are skipped) that `matches` accepts,
// in the file's order. kNotFound "FLAG PATH: cannot read the file" when it cannot be read.
StatusOr<std::vector<nlohmann::json>> MatchingRecords(
    const std::string& path, const std::string& flag,
    const std::function<bool(const nlohmann::json&)>& matches) {
  std::ifstream in(path);
  if (!in) return NotFoundError(fmt::format("{} {}: cannot read the file", flag, path));
  std::string line;
  std::vector<nlohmann::json> records;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && matches(j)) records.push_back(std::move(j));
  }
  return records;
}

// The record of `path` that `matches` accepts and has the most "bytes" (the first of equals), the
// one least swayed by per-message costs; nothing when none matches.
StatusOr<std::optional<nlohmann::json>> LargestMatchingRecord(
    const std::string& path, const std::string& flag,
    const std::function<bool(const nlohmann::json&)>& matches) {
  FRUGAL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> records,
                          MatchingRecords(path, flag, [&](const nlohmann::json& j) {
                            return IsNumber(j, "bytes") && matches(j);
                          }));
  std::optional<nlohmann::json> best;
  for (nlohmann::json& j : records) {
    if (!best || j["bytes"].get<double>() > (*best)["bytes"].get<double>()) best = std::move(j);
  }
  return best;
}

// The number `field` of the record of the largest message among those `matches`, finite and > 0.
// kInvalidArgument "FLAG PATH: MISSING" when no such record has it.
StatusOr<double> PositiveFieldOfLargest(const std::string& path, const std::string& flag,
                                        const std::function<bool(const nlohmann::json&)>& matches,
                                        const std::string& field, const std::string& missing) {
  FRUGAL_ASSIGN_OR_RETURN(const std::optional<nlohmann::json> record,
                          LargestMatchingRecord(path, flag, [&](const nlohmann::json& j) {
                            return matches(j) && IsNumber(j, field.c_str());
                          }));
  if (!record) return InvalidArgumentError(fmt::format("{} {}: {}", flag, path, missing));
  const double value = (*record)[field].get<double>();
  if (!std::isfinite(value) || value <= 0) {
    return InvalidArgumentError(fmt::format("{} {}: {} must be finite and > 0", flag, path, field));
  }
  return value;
}

}  // namespace

StatusOr<NetworkFit> ReadNetworkFit(const std::string& path) {
  FRUGAL_ASSIGN_OR_RETURN(const std::vector<nlohmann::json> records,
                          MatchingRecords(path, "--fit", [](const nlohmann::json& j) {
                            return IsNumber(j, "alpha_us") && IsNumber(j, "beta_s_per_byte");
                          }));
  if (records.empty()) {
    return InvalidArgumentError(fmt::format(
        "--fit {}: no record with alpha_us and beta_s_per_byte (write one with `frugal bench "
        "allreduce --json FILE`)",
        path));
  }
  const nlohmann::json& j = records.front();
  NetworkFit fit;
  fit.alpha_s = j["alpha_us"].get<double>() * 1e-6;
  fit.beta_s_per_byte = j["beta_s_per_byte"].get<double>();
  if (IsNumber(j, "gamma_s_per_byte")) fit.gamma_s_per_byte = j["gamma_s_per_byte"].get<double>();
  if (!std::isfinite(fit.alpha_s) || fit.alpha_s < 0 || !std::isfinite(fit.beta_s_per_byte) ||
      fit.beta_s_per_byte <= 0 || !std::isfinite(fit.gamma_s_per_byte) ||
      fit.gamma_s_per_byte < 0) {
    return InvalidArgumentError(fmt::format(
        "--fit {}: alpha_us and gamma_s_per_byte must be >= 0 and beta_s_per_byte > 0", path));
  }
  return fit;
}

StatusOr<RoundFit> ReadRoundFit(const std::string& path, const std::string& topology, int ranks) {
  FRUGAL_ASSIGN_OR_RETURN(const std::optional<nlohmann::json> record,
                          LargestMatchingRecord(path, "--fit-round", [&](const nlohmann::json& j) {
                            return j.value("bench", "") == "round" &&
                                   j.value("topology", "") == topology &&
                                   j.value("ranks", 0) == ranks && !j.value("lockstep", false) &&
                                   IsNumber(j, "round_bytes_per_s");
                          }));
  if (!record) {
    return InvalidArgumentError(fmt::format(
        "--fit-round {}: no record of topology {} over {} ranks (write one with `frugal bench "
        "round --np {} --topology {} --json FILE`)",
        path, topology, ranks, ranks, topology));
  }
  RoundFit fit;
  fit.round_bytes_per_s = (*record)["round_bytes_per_s"].get<double>();
  fit.copy_bytes_per_s =
      IsNumber(*record, "copy_bytes_per_s") ? (*record)["copy_bytes_per_s"].get<double>() : 0.0;
  if (!std::isfinite(fit.round_bytes_per_s) || fit.round_bytes_per_s <= 0) {
    return InvalidArgumentError(
        fmt::format("--fit-round {}: round_bytes_per_s must be finite and > 0", path));
  }
  if (!std::isfinite(fit.copy_bytes_per_s) || fit.copy_bytes_per_s < 0) {
    return InvalidArgumentError(
        fmt::format("--fit-round {}: copy_bytes_per_s must be finite and >= 0", path));
  }
  return fit;
}

StatusOr<std::vector<DuplexPoint>> ReadDuplexFit(const std::string& path) {
  FRUGAL_ASSIGN_OR_RETURN(const std::vector<nlohmann::json> records,
                          MatchingRecords(path, "--fit-duplex", [](const nlohmann::json& j) {
                            return j.value("bench", "") == "exchange" &&
                                   j.value("mode", "") == "both" && IsNumber(j, "bytes") &&
                                   IsNumber(j, "both_over_one_way");
                          }));
  std::map<double, double> by_bytes;
  for (const nlohmann::json& j : records) {
    const double bytes = j["bytes"].get<double>();
    const double both_over_one_way = j["both_over_one_way"].get<double>();
    if (!std::isfinite(both_over_one_way) || both_over_one_way <= 0) {
      return InvalidArgumentError(
          fmt::format("--fit-duplex {}: both_over_one_way must be finite and > 0", path));
    }
    if (!std::isfinite(bytes) || bytes <= 0) {
      return InvalidArgumentError(
          fmt::format("--fit-duplex {}: bytes must be finite and > 0", path));
    }
    by_bytes[bytes] = std::min(1.0, 1.0 / both_over_one_way);
  }
  if (by_bytes.empty()) {
    return InvalidArgumentError(fmt::format(
        "--fit-duplex {}: no record of both directions at once against one way (write one with "
        "`frugal bench exchange --np W+1 --modes send,recv,both --json FILE`, W the workers of a "
        "server)",
        path));
  }
  std::vector<DuplexPoint> points;
  for (const auto& [bytes, share] : by_bytes) points.push_back(DuplexPoint{bytes, share});
  return points;
}

StatusOr<double> ReadContentionFit(const std::string& path, const std::string& topology) {
  const auto beside_rounds = [&](const nlohmann::json& j) {
    return j.value("bench", "") == "contention" && j.value("pattern", "") == "round" &&
           j.value("topology", "") == topology;
  };
  const auto beside_allreduces = [](const nlohmann::json& j) {
    return j.value("bench", "") == "contention" && j.value("pattern", "allreduce") == "allreduce";
  };
  bool rounds = false;
  if (!topology.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(const std::optional<nlohmann::json> record,
                            LargestMatchingRecord(path, "--fit-contention", beside_rounds));
    rounds = record.has_value();
  }
  FRUGAL_ASSIGN_OR_RETURN(
      const double slowdown,
      PositiveFieldOfLargest(
          path, "--fit-contention",
          rounds ? std::function<bool(const nlohmann::json&)>(beside_rounds) : beside_allreduces,
          "slowdown",
          "no record of the compute's slowdown beside an all-reduce (write one with `frugal bench "
          "contention --np N --model MODEL --json FILE` on the hosts)"));
  return std::max(1.0, slowdown);
}

}  // namespace frugal::apps
