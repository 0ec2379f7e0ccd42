#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "frugal/compressor.h"

namespace frugal {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ValidIdentifier(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

}  // namespace

StatusOr<CompressorParams> CompressorParams::Parse(std::string_view spec) {
  CompressorParams params;
  spec = Trim(spec);
  size_t colon = spec.find(':');
  std::string_view name = Trim(spec.substr(0, colon));
  if (!ValidIdentifier(name)) {
    return InvalidArgumentError(
        fmt::format("compressor spec '{}': expected name[:key=value,...]", spec));
  }
  params.name_ = std::string(name);
  if (colon == std::string_view::npos) return params;
  std::string_view rest = spec.substr(colon + 1);
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = Trim(rest.substr(0, comma));
    size_t eq = item.find('=');
    std::string_view key = Trim(item.substr(0, eq));
    std::string_view value = eq == std::string_view::npos ? "1" : Trim(item.substr(eq + 1));
    if (!ValidIdentifier(key) || value.empty()) {
      return InvalidArgumentError(
          fmt::format("compressor spec '{}': bad parameter '{}' (expected key=value)", spec, item));
    }
    if (params.Has(key)) {
      return InvalidArgumentError(
          fmt::format("compressor spec '{}': parameter '{}' given twice", spec, key));
    }
    params.values_.emplace_back(std::string(key), std::string(value));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return params;
}

bool CompressorParams::Has(std::string_view key) const {
  return std::any_of(values_.begin(), values_.end(),
                     [&](const auto& kv) { return kv.first == key; });
}

namespace {

const std::string* Lookup(const std::vector<std::pair<std::string, std::string>>& values,
                          std::vector<std::string>& asked, std::string_view key) {
  if (std::find(asked.begin(), asked.end(), key) == asked.end()) asked.emplace_back(key);
  for (const auto& kv : values) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

}  // namespace

StatusOr<int64_t> CompressorParams::Int(std::string_view key, int64_t fallback, int64_t min,
                                        int64_t max) {
  const std::string* value = Lookup(values_, asked_, key);
  if (value == nullptr) return fallback;
  int64_t parsed = 0;
  auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), parsed);
  if (ec != std::errc() || end != value->data() + value->size()) {
    return InvalidArgumentError(
        fmt::format("{}: parameter {}={} is not an integer", name_, key, *value));
  }
  if (parsed < min || parsed > max) {
    return InvalidArgumentError(
        fmt::format("{}: parameter {}={} is out of range [{}, {}]", name_, key, *value, min, max));
  }
  return parsed;
}

StatusOr<double> CompressorParams::Double(std::string_view key, double fallback, double min,
                                          double max) {
  const std::string* value = Lookup(values_, asked_, key);
  if (value == nullptr) return fallback;
  double parsed = 0;
  auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), parsed);
  if (ec != std::errc() || end != value->data() + value->size() || !std::isfinite(parsed)) {
    return InvalidArgumentError(
        fmt::format("{}: parameter {}={} is not a number", name_, key, *value));
  }
  if (parsed < min || parsed > max) {
    return InvalidArgumentError(
        fmt::format("{}: parameter {}={} is out of range [{}, {}]", name_, key, *value, min, max));
  }
  return parsed;
}

StatusOr<bool> CompressorParams::Bool(std::string_view key, bool fallback) {
  const std::string* value = Lookup(values_, asked_, key);
  if (value == nullptr) return fallback;
  if (*value == "1" || *value == "true" || *value == "yes" || *value == "on") return true;
  if (*value == "0" || *value == "false" || *value == "no" || *value == "off") return false;
  return InvalidArgumentError(fmt::format(
      "{}: parameter {}={} is not a boolean (accepted: 1/0, true/false, yes/no, on/off)", name_,
      key, *value));
}

StatusOr<std::string> CompressorParams::Choice(std::string_view key, std::string_view fallback,
                                               const std::vector<std::string>& accepted) {
  const std::string* value = Lookup(values_, asked_, key);
  if (value == nullptr) return std::string(fallback);
  if (std::find(accepted.begin(), accepted.end(), *value) == accepted.end()) {
    return InvalidArgumentError(fmt::format("{}: parameter {}={} is not one of: {}", name_, key,
                                            *value, fmt::join(accepted, ", ")));
  }
  return *value;
}

Status CompressorParams::Finish() const {
  for (const auto& [key, value] : values_) {
    if (std::find(asked_.begin(), asked_.end(), key) == asked_.end()) {
      if (asked_.empty()) {
        return InvalidArgumentError(
            fmt::format("{}: unknown parameter '{}' ({} takes no parameters)", name_, key, name_));
      }
      return InvalidArgumentError(fmt::format("{}: unknown parameter '{}' (accepted: {})", name_,
                                              key, fmt::join(asked_, ", ")));
    }
  }
  return Status::Ok();
}

}  // namespace frugal
