// Parsing of --arch gossip:... (see gossip.h). The items are key=value pairs split at commas and
// at the first '=' of each, so values may hold ':' and '=' (topology=random-regular:degree=4,
// topology=file:/path/edges.txt).
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "frugal/gossip.h"

namespace frugal {
namespace {

constexpr std::string_view kKeys = "topology, mixing, algorithm, order, gamma, overlap";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status Bad(std::string_view items, std::string_view why) {
  return InvalidArgumentError(fmt::format("--arch 'gossip:{}': {}", items, why));
}

}  // namespace

std::string_view GossipAlgorithmName(GossipAlgorithm algorithm) {
  switch (algorithm) {
    case GossipAlgorithm::kDpsgd:
      return "dpsgd";
    case GossipAlgorithm::kChoco:
      return "choco";
    case GossipAlgorithm::kDcd:
      return "dcd";
    case GossipAlgorithm::kEcd:
      return "ecd";
    case GossipAlgorithm::kSgp:
      return "sgp";
  }
  return "?";
}

StatusOr<GossipSpec> ParseGossipSpec(std::string_view items) {
  GossipSpec spec;
  std::set<std::string> seen;
  bool topology_given = false;
  std::string_view rest = items;
  while (!Trim(items).empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = Trim(rest.substr(0, comma));
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || Trim(item.substr(eq + 1)).empty()) {
      return Bad(items, fmt::format("'{}' is not key=value (keys: {})", item, kKeys));
    }
    const std::string key(Trim(item.substr(0, eq)));
    const std::string value(Trim(item.substr(eq + 1)));
    if (!seen.insert(key).second) return Bad(items, fmt::format("'{}' given twice", key));
    if (key == "topology") {
      StatusOr<TopologySpec> topology = ParseTopologySpec(value);
      if (!topology.ok()) return Bad(items, topology.status().message());
      spec.topology = *topology;
      topology_given = true;
    } else if (key == "mixing") {
      StatusOr<MixingKind> mixing = ParseMixingKind(value);
      if (!mixing.ok()) return Bad(items, mixing.status().message());
      spec.mixing = *mixing;
    } else if (key == "algorithm") {
      bool known = false;
      for (GossipAlgorithm a :
           {GossipAlgorithm::kDpsgd, GossipAlgorithm::kChoco, GossipAlgorithm::kDcd,
            GossipAlgorithm::kEcd, GossipAlgorithm::kSgp}) {
        if (value == GossipAlgorithmName(a)) {
          spec.algorithm = a;
          known = true;
        }
      }
      if (!known) {
        return Bad(items, fmt::format("unknown algorithm '{}' (accepted: dpsgd, choco, dcd, ecd, "
                                      "sgp; asynchronous gossip is --sync asp)",
                                      value));
      }
    } else if (key == "order") {
      if (value != "cta" && value != "atc") {
        return Bad(items, fmt::format("order={}: accepted cta (mix, then add the local update) "
                                      "or atc (local update, then mix)",
                                      value));
      }
      spec.atc = value == "atc";
    } else if (key == "gamma") {
      char* end = nullptr;
      const double gamma = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !std::isfinite(gamma) || !(gamma > 0) || gamma > 1) {
        return Bad(items, fmt::format("gamma={} is not in (0, 1]", value));
      }
      spec.gamma = gamma;
    } else if (key == "overlap") {
      if (value != "0" && value != "1") return Bad(items, fmt::format("overlap={}: 0 or 1", value));
      spec.overlap = value == "1";
    } else {
      return Bad(items, fmt::format("unknown key '{}' (accepted: {})", key, kKeys));
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (!topology_given && spec.algorithm == GossipAlgorithm::kSgp) {
    spec.topology.kind = TopologyKind::kOnePeerExp;
  }
  auto only = [&](std::string_view key, GossipAlgorithm algorithm) -> Status {
    if (seen.count(std::string(key)) > 0 && spec.algorithm != algorithm) {
      return Bad(items, fmt::format("{} applies to algorithm={} only", key,
                                    GossipAlgorithmName(algorithm)));
    }
    return Status::Ok();
  };
  FRUGAL_RETURN_IF_ERROR(only("order", GossipAlgorithm::kDpsgd));
  FRUGAL_RETURN_IF_ERROR(only("gamma", GossipAlgorithm::kChoco));
  FRUGAL_RETURN_IF_ERROR(only("overlap", GossipAlgorithm::kSgp));
  return spec;
}

std::string GossipSpecName(const GossipSpec& spec) {
  std::string name = "topology=" + TopologySpecName(spec.topology);
  if (spec.mixing) name += fmt::format(",mixing={}", MixingKindName(*spec.mixing));
  name += fmt::format(",algorithm={}", GossipAlgorithmName(spec.algorithm));
  switch (spec.algorithm) {
    case GossipAlgorithm::kDpsgd:
      name += spec.atc ? ",order=atc" : ",order=cta";
      break;
    case GossipAlgorithm::kChoco:
      name += fmt::format(",gamma={}", spec.gamma);
      break;
    case GossipAlgorithm::kSgp:
      name += fmt::format(",overlap={}", spec.overlap ? 1 : 0);
      break;
    default:
      break;
  }
  return name;
}

MixingKind MixingOf(const GossipSpec& spec, const Topology& topology) {
  if (spec.mixing) return *spec.mixing;
  return topology.undirected() ? MixingKind::kMetropolis : MixingKind::kUniform;
}

}  // namespace frugal
