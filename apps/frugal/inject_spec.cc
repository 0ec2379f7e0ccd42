// `--inject` specs (see inject_spec.h).
#include "inject_spec.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

namespace frugal::apps {
namespace {

struct KindInfo {
  FaultKind kind;
  std::string_view name;
  std::string_view keys;  // accepted keys, for messages
};

constexpr KindInfo kKinds[] = {
    {FaultKind::kKill, "kill", "rank=R,step=S[,epoch=E]"},
    {FaultKind::kStop, "stop", "rank=R,step=S[,epoch=E]"},
    {FaultKind::kSlow, "slow", "rank=R,factor=F"},
    {FaultKind::kNan, "nan", "rank=R,step=S[,epoch=E][,tensor=NAME]"},
    {FaultKind::kCorrupt, "corrupt", "rank=R,step=S[,epoch=E]"},
    {FaultKind::kDrop, "drop", "rank=R,step=S[,epoch=E]"},
};

Status Bad(std::string_view text, std::string_view why) {
  return InvalidArgumentError(
      fmt::format("--inject '{}': {} (accepted: kill|stop|corrupt|drop:rank=R,step=S[,epoch=E], "
                  "slow:rank=R,factor=F, nan:rank=R,step=S[,epoch=E][,tensor=NAME])",
                  text, why));
}

}  // namespace

StatusOr<FaultSpec> ParseFaultSpec(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  const KindInfo* info = nullptr;
  for (const KindInfo& k : kKinds) {
    if (k.name == name) info = &k;
  }
  if (info == nullptr) return Bad(text, fmt::format("unknown fault '{}'", name));
  std::map<std::string, std::string, std::less<>> values;
  if (colon != std::string_view::npos) {
    std::string_view rest = text.substr(colon + 1);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      const size_t eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        return Bad(text, fmt::format("'{}' is not KEY=VALUE", item));
      }
      if (!values.emplace(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)))
               .second) {
        return Bad(text, fmt::format("'{}' given twice", item.substr(0, eq)));
      }
    }
  }
  FaultSpec spec;
  spec.kind = info->kind;
  spec.text = std::string(text);
  auto integer = [&](std::string_view key, int64_t max, int64_t& out) -> Status {
    auto it = values.find(key);
    if (it == values.end()) return Bad(text, fmt::format("{} needs {}=", info->name, key));
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || errno != 0 || v < 0 || v > max) {
      return Bad(text, fmt::format("{}={} is not an integer in [0, {}]", key, it->second, max));
    }
    out = v;
    values.erase(it);
    return Status::Ok();
  };
  int64_t rank = 0;
  FRUGAL_RETURN_IF_ERROR(integer("rank", (1 << 20) - 1, rank));
  spec.rank = static_cast<int>(rank);
  if (spec.kind == FaultKind::kSlow) {
    auto it = values.find("factor");
    if (it == values.end()) return Bad(text, "slow needs factor=");
    char* end = nullptr;
    spec.factor = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || !std::isfinite(spec.factor) || spec.factor < 1 ||
        spec.factor > 1000) {
      return Bad(text, fmt::format("factor={} is not in [1, 1000]", it->second));
    }
    values.erase(it);
  } else {
    FRUGAL_RETURN_IF_ERROR(integer("step", int64_t{1} << 50, spec.step));
    if (values.contains("epoch")) {
      FRUGAL_RETURN_IF_ERROR(integer("epoch", int64_t{1} << 30, spec.epoch));
      if (spec.epoch == 0) return Bad(text, "epoch=0: epochs count from 1");
    }
  }
  if (spec.kind == FaultKind::kNan) {
    auto it = values.find("tensor");
    if (it != values.end()) {
      if (it->second.empty()) return Bad(text, "tensor= is empty");
      spec.tensor = it->second;
      values.erase(it);
    }
  }
  if (!values.empty()) {
    return Bad(text,
               fmt::format("{} takes {}, not '{}'", info->name, info->keys, values.begin()->first));
  }
  return spec;
}

StatusOr<std::vector<FaultSpec>> ParseFaultSpecs(const std::vector<std::string>& items) {
  std::vector<FaultSpec> out;
  for (const std::string& item : items) {
    FRUGAL_ASSIGN_OR_RETURN(FaultSpec spec, ParseFaultSpec(item));
    for (const FaultSpec& seen : out) {
      if (seen.kind == spec.kind && seen.rank == spec.rank) {
        return InvalidArgumentError(fmt::format(
            "--inject '{}' and '{}': one fault of a kind per rank", seen.text, spec.text));
      }
    }
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace frugal::apps
