// Per-layer compute times from a table or a trace (see simulate_profile.h).
#include "simulate_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

namespace frugal::apps {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

struct Span {
  double begin = 0;  // microseconds
  double end = 0;
};

}  // namespace

StatusOr<std::vector<ProfiledLayer>> ParseLayerTable(std::string_view text,
                                                     std::string_view source) {
  std::vector<ProfiledLayer> layers;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::stringstream fs(line);
    for (std::string f; std::getline(fs, f, ',');) fields.push_back(f);
    ProfiledLayer layer;
    bool ok = fields.size() == 4 && !fields[0].empty();
    if (ok) {
      try {
        size_t used = 0;
        layer.name = fields[0];
        layer.floats = std::stoull(fields[1], &used);
        ok = used == fields[1].size();
        layer.forward_s = std::stod(fields[2], &used) / 1e3;
        ok = ok && used == fields[2].size();
        layer.backward_s = std::stod(fields[3], &used) / 1e3;
        ok = ok && used == fields[3].size() && layer.forward_s >= 0 && layer.backward_s >= 0;
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (!ok) {
      return InvalidArgumentError(fmt::format(
          "{}:{}: expected name,floats,forward_ms,backward_ms with numbers >= 0", source, number));
    }
    layers.push_back(std::move(layer));
  }
  if (layers.empty()) return InvalidArgumentError(fmt::format("{}: no layers", source));
  return layers;
}

namespace {

// A rank's spans of a trace: its compute row's forward, backward and optimizer step spans, in
// order, and each tensor's queue begins and ready marks.
struct RankSpans {
  std::vector<Span> forwards, backwards;
  std::vector<double> optimizer_steps;               // microseconds
  std::map<std::string, std::vector<double>> ready;  // tensor -> queue begins, ready marks
};

RankSpans ReadRankSpans(const nlohmann::json& trace, int rank) {
  std::map<int64_t, std::string> rows;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" &&
        e.value("pid", -1) == rank) {
      rows[e.value("tid", int64_t{-1})] = e["args"].value("name", "");
    }
  }
  RankSpans spans;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || e.value("pid", -1) != rank) continue;
    const std::string& row = rows[e.value("tid", int64_t{-1})];
    const std::string name = e.value("name", "");
    const double ts = e.value("ts", 0.0);
    const Span span{ts, ts + e.value("dur", 0.0)};
    if (row == "compute" && name == "forward") spans.forwards.push_back(span);
    if (row == "compute" && name == "backward") spans.backwards.push_back(span);
    if (row == "compute" && name == "step") spans.optimizer_steps.push_back(span.end - span.begin);
    if (row.starts_with("tensor ") && (name == "queue" || name == "ready")) {
      spans.ready[row.substr(7)].push_back(ts);
    }
  }
  return spans;
}

// Each step's compute (forward + backward + optimizer spans, seconds), in step order.
std::vector<double> StepComputes(const RankSpans& spans) {
  const size_t steps =
      std::min({spans.forwards.size(), spans.backwards.size(), spans.optimizer_steps.size()});
  std::vector<double> computes(steps);
  for (size_t i = 0; i < steps; ++i) {
    const Span& f = spans.forwards[i];
    const Span& b = spans.backwards[i];
    computes[i] = ((f.end - f.begin) + (b.end - b.begin) + spans.optimizer_steps[i]) * 1e-6;
  }
  return computes;
}

StatusOr<std::vector<ProfiledLayer>> RankLayers(const RankSpans& spans, int rank,
                                                const std::vector<std::string>& order,
                                                std::string_view source) {
  const std::vector<Span>& forwards = spans.forwards;
  const std::vector<Span>& backwards = spans.backwards;
  const std::vector<double>& optimizer_steps = spans.optimizer_steps;
  const std::map<std::string, std::vector<double>>& ready = spans.ready;
  if (backwards.empty() || forwards.empty()) {
    return InvalidArgumentError(fmt::format(
        "{}: rank {} has no forward and backward spans (run frugal train with --timeline and "
        "the engine's overlap)",
        source, rank));
  }
  std::map<std::string, std::vector<double>> backward_of;
  std::vector<double> forward_totals;
  const size_t first = backwards.size() > 1 ? 1 : 0;
  for (size_t k = first; k < backwards.size(); ++k) {
    const Span& b = backwards[k];
    std::vector<std::pair<double, std::string>> in_step;
    for (const auto& [tensor, times] : ready) {
      for (double t : times) {
        if (t >= b.begin && t <= b.end + 1) in_step.emplace_back(t, tensor);
      }
    }
    std::sort(in_step.begin(), in_step.end());
    double previous = b.begin;
    for (const auto& [t, tensor] : in_step) {
      backward_of[tensor].push_back((t - previous) * 1e-6);
      previous = t;
    }
    if (k < forwards.size()) forward_totals.push_back((forwards[k].end - forwards[k].begin) * 1e-6);
  }
  std::vector<ProfiledLayer> layers;
  double backward_total = 0;
  for (const std::string& name : order) {
    auto it = backward_of.find(name);
    if (it == backward_of.end()) {
      return InvalidArgumentError(
          fmt::format("{}: no gradient of '{}' in rank {}'s backward spans", source, name, rank));
    }
    ProfiledLayer layer;
    layer.name = name;
    layer.backward_s = Median(it->second);
    backward_total += layer.backward_s;
    layers.push_back(std::move(layer));
  }
  const double forward = Median(forward_totals);
  for (ProfiledLayer& layer : layers) {
    layer.forward_s = backward_total > 0 ? forward * layer.backward_s / backward_total
                                         : forward / static_cast<double>(layers.size());
  }
  ProfiledLayer optimizer;
  optimizer.name = kOptimizerLayer;
  optimizer.forward_s = Median(optimizer_steps) * 1e-6;
  layers.insert(layers.begin(), optimizer);
  return layers;
}

double ComputeSeconds(const std::vector<ProfiledLayer>& layers) {
  double total = 0;
  for (const ProfiledLayer& layer : layers) total += layer.forward_s + layer.backward_s;
  return total;
}

}  // namespace

StatusOr<std::vector<ProfiledLayer>> LayersFromTrace(std::string_view trace_json, int rank,
                                                     const std::vector<std::string>& order,
                                                     std::string_view source) {
  const nlohmann::json trace = nlohmann::json::parse(trace_json, nullptr, false);
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    return InvalidArgumentError(
        fmt::format("{}: not a Chrome trace (write one with frugal train --timeline)", source));
  }
  if (rank != kSlowestRank && rank != kLockstepRank) {
    return RankLayers(ReadRankSpans(trace, rank), rank, order, source);
  }
  std::set<int> ranks;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" && e.contains("args") &&
        e["args"].value("name", "") == "compute") {
      ranks.insert(e.value("pid", -1));
    }
  }
  std::optional<std::vector<ProfiledLayer>> slowest;
  std::vector<std::vector<double>> computes;  // each rank's step computes (lockstep)
  for (int r : ranks) {
    const RankSpans spans = ReadRankSpans(trace, r);
    FRUGAL_ASSIGN_OR_RETURN(std::vector<ProfiledLayer> layers, RankLayers(spans, r, order, source));
    if (!slowest || ComputeSeconds(layers) > ComputeSeconds(*slowest)) slowest = std::move(layers);
    if (rank == kLockstepRank) computes.push_back(StepComputes(spans));
  }
  if (!slowest) {
    return InvalidArgumentError(fmt::format("{}: no rank has a compute row", source));
  }
  if (rank == kLockstepRank) {
    size_t steps = SIZE_MAX;
    for (const std::vector<double>& c : computes) steps = std::min(steps, c.size());
    // The first step (warm-up) is skipped, as for the layers.
    const size_t first = steps > 1 ? 1 : 0;
    std::vector<double> largest;
    for (size_t i = first; i < steps; ++i) {
      double m = 0;
      for (const std::vector<double>& c : computes) m = std::max(m, c[i]);
      largest.push_back(m);
    }
    const double own = ComputeSeconds(*slowest);
    const double factor = own > 0 && !largest.empty() ? Median(largest) / own : 1;
    for (ProfiledLayer& layer : *slowest) {
      layer.forward_s *= factor;
      layer.backward_s *= factor;
    }
  }
  return *std::move(slowest);
}

}  // namespace frugal::apps
