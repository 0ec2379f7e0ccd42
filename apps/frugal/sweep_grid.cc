// Expanding a sweep into its points.
//
// ExpandSweep() enumerates the cartesian product of the axes with an odometer over `digit`
// (last axis fastest); each SweepPoint carries its flags (base, then axes), its command words,
// and `key`: the command and the flags sorted by name, serialized as JSON. The key is the
// identity of a run: it does not depend on the order of lines in the file, and any change of a
// flag (base or axis) makes a new key, so a resumed sweep never reuses a result of another
// configuration. `id` (FNV-1a of the key) names the run's files.
#include "sweep_grid.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "frugal/check.h"
#include "frugal/hash.h"

namespace frugal::apps {
namespace {

// The low 48 bits of the key's FNV-1a, as 12 hex digits.
std::string ShortId(std::string_view key) {
  return fmt::format("{:012x}", Fnv1a64(key) & 0xffffffffffffull);
}

}  // namespace

const FlagValue* SweepPoint::Find(std::string_view flag) const {
  for (const auto& f : flags) {
    if (f.name == flag) return &f.value;
  }
  return nullptr;
}

nlohmann::json SweepPoint::PointJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : flags) j[f.name] = f.value.ToJson();
  return j;
}

std::string SweepPoint::Describe() const {
  std::vector<std::string> parts;
  for (const auto& name : axis_names) {
    const FlagValue* v = Find(name);
    if (v != nullptr) parts.push_back(fmt::format("{}={}", name, v->AsWord()));
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

std::vector<std::string> FlagWords(const std::vector<SweepFlag>& flags) {
  std::vector<std::string> words;
  for (const auto& f : flags) {
    if (f.name == kVariantAxis) continue;  // stands for its variant's words
    if (f.value.type == FlagValue::Type::kBool) {
      words.push_back(f.value.boolean ? fmt::format("--{}", f.name)
                                      : fmt::format("--{}=false", f.name));
    } else {
      words.push_back(fmt::format("--{}={}", f.name, f.value.AsWord()));
    }
  }
  return words;
}

std::vector<SweepPoint> ExpandSweep(const SweepSpec& spec) {
  std::vector<SweepPoint> points;
  std::vector<size_t> digit(spec.axes.size(), 0);
  std::vector<std::string> axis_names;
  for (const auto& a : spec.axes) axis_names.push_back(a.name);
  while (true) {
    SweepPoint p;
    p.index = static_cast<int>(points.size());
    p.flags = spec.base;
    for (size_t i = 0; i < spec.axes.size(); ++i) {
      p.flags.push_back(SweepFlag{spec.axes[i].name, spec.axes[i].values[digit[i]]});
    }
    p.axis_names = axis_names;
    p.args = spec.command;
    for (auto& w : FlagWords(p.flags)) p.args.push_back(std::move(w));
    nlohmann::json key;
    key["command"] = spec.command;
    key["flags"] = p.PointJson();  // nlohmann::json objects keep keys sorted
    if (const FlagValue* v = p.Find(kVariantAxis)) {
      const SweepVariant* variant = spec.FindVariant(v->word);
      FRUGAL_INTERNAL_ASSERT(variant != nullptr, "no variant ", v->word);
      p.args.insert(p.args.end(), variant->words.begin(), variant->words.end());
      key["variant_args"] = variant->words;
    }
    p.key = key.dump();
    p.id = ShortId(p.key);
    points.push_back(std::move(p));
    // Odometer: the last axis turns fastest.
    size_t i = spec.axes.size();
    while (i > 0) {
      --i;
      if (++digit[i] < spec.axes[i].values.size()) break;
      digit[i] = 0;
      if (i == 0) return points;
    }
    if (spec.axes.empty()) return points;
  }
}

Status ValidateSweep(const std::vector<SweepPoint>& points, const ArgsValidator& validator) {
  for (const auto& p : points) {
    Status s = validator(p.args);
    if (!s.ok()) {
      return InvalidArgumentError(
          fmt::format("point {} ({}): {}", p.index, p.Describe(), s.message()));
    }
  }
  return Status::Ok();
}

}  // namespace frugal::apps
