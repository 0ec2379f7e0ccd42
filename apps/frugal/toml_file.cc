#include "toml_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace frugal::apps {
namespace {

std::string_view KindName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

}  // namespace

StatusOr<toml::table> ParseToml(std::string_view text, std::string_view source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::string what(e.description());
    std::replace(what.begin(), what.end(), '\n', ' ');
    return InvalidArgumentError(
        fmt::format("{}:{}:{}: {}", source, e.source().begin.line, e.source().begin.column, what));
  }
}

StatusOr<toml::table> ReadTomlFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return NotFoundError(fmt::format("{}: no such file", path));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || in.bad()) return IoError(fmt::format("cannot read {}", path));
  return ParseToml(text.str(), path);
}

int TomlLine(const toml::node& node) { return static_cast<int>(node.source().begin.line); }

std::vector<std::pair<std::string, const toml::node*>> InFileOrder(const toml::table& table) {
  std::vector<std::pair<std::string, const toml::node*>> entries;
  for (const auto& [key, node] : table) entries.emplace_back(std::string(key.str()), &node);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const toml::source_position pa = a.second->source().begin;
    const toml::source_position pb = b.second->source().begin;
    return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
  });
  return entries;
}

StatusOr<std::string> TomlWord(const toml::node& node) {
  if (const auto* s = node.as_string()) return s->get();
  if (node.is_integer()) return std::to_string(node.as_integer()->get());
  if (node.is_boolean()) return std::string(node.as_boolean()->get() ? "true" : "false");
  if (node.is_floating_point()) {
    const double v = node.as_floating_point()->get();
    if (!std::isfinite(v)) {
      return InvalidArgumentError(fmt::format("{} is not a finite number", v));
    }
    std::string word = fmt::format("{}", v);
    if (word.find_first_of(".e") == std::string::npos) word += ".0";
    return word;
  }
  return InvalidArgumentError(
      fmt::format("expected a string, number or boolean, not a {}", KindName(node)));
}

StatusOr<std::vector<FlagSetting>> ReadFlagFile(const std::string& path, std::string_view section) {
  FRUGAL_ASSIGN_OR_RETURN(toml::table doc, ReadTomlFile(path));
  std::vector<FlagSetting> settings;
  auto add = [&](const std::string& key, const toml::node& node) -> Status {
    FlagSetting setting{key, {}, TomlLine(node)};
    auto word = [&](const toml::node& scalar) -> Status {
      auto w = TomlWord(scalar);
      if (!w.ok()) {
        return InvalidArgumentError(
            fmt::format("{}:{}: {}: {}", path, TomlLine(scalar), key, w.status().message()));
      }
      setting.words.push_back(std::move(*w));
      return Status::Ok();
    };
    if (const toml::array* array = node.as_array()) {
      for (const toml::node& element : *array) FRUGAL_RETURN_IF_ERROR(word(element));
    } else {
      FRUGAL_RETURN_IF_ERROR(word(node));
    }
    settings.push_back(std::move(setting));
    return Status::Ok();
  };
  for (const auto& [key, node] : InFileOrder(doc)) {
    const toml::table* table = node->as_table();
    if (table == nullptr) {
      FRUGAL_RETURN_IF_ERROR(add(key, *node));
      continue;
    }
    if (key != section) {
      return InvalidArgumentError(fmt::format("{}:{}: unknown table [{}] (only [{}])", path,
                                              TomlLine(*node), key, section));
    }
    for (const auto& [inner_key, inner] : InFileOrder(*table)) {
      FRUGAL_RETURN_IF_ERROR(add(inner_key, *inner));
    }
  }
  return settings;
}

}  // namespace frugal::apps
