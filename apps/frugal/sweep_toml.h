// A strict reader of the TOML subset that sweep files use.
//
// Accepted: comments (# to end of line), `[table]` headers (one level, bare names), and
// `key = value` lines with bare keys (A-Z a-z 0-9 _ -). Values: basic strings "..." (escapes
// \" \\ \n \t \r \uXXXX), literal strings '...', integers (+/-, digits, `_` between digits),
// floats (1.5, -2e-3, 1_000.5; inf/nan are refused), booleans, and arrays of those (one type per
// array, may span lines, trailing comma allowed, nested arrays refused). Everything else (dotted
// keys, inline tables, arrays of tables, dates, multi-line strings) is refused with the line
// number, as are repeated keys and repeated tables. Order of keys and tables is kept.
//
// Thread safety: values; no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frugal/status.h"

namespace frugal::apps {

struct TomlValue {
  enum class Type { kString, kInteger, kFloat, kBool, kArray };
  Type type = Type::kString;
  std::string string;               // kString: the decoded text
  std::int64_t integer = 0;         // kInteger
  double number = 0;                // kFloat (and kInteger, converted)
  bool boolean = false;             // kBool
  std::string literal;              // numbers and booleans as written (underscores removed)
  std::vector<TomlValue> elements;  // kArray
  int line = 0;

  // The value as a command-line word: strings as they are, numbers as written, true/false.
  // Precondition: not an array.
  std::string AsWord() const;
  static std::string_view TypeName(Type type);
};

struct TomlEntry {
  std::string key;
  TomlValue value;
};

struct TomlTable {
  std::string name;  // empty for the root table
  int line = 0;
  std::vector<TomlEntry> entries;

  const TomlEntry* Find(std::string_view key) const;
};

struct TomlDocument {
  TomlTable root;
  std::vector<TomlTable> tables;

  const TomlTable* FindTable(std::string_view name) const;
};

// Parses `text`; errors are kInvalidArgument "SOURCE:LINE: what".
StatusOr<TomlDocument> ParseToml(std::string_view text, std::string_view source);

// Reads and parses a file (kNotFound / kIoError when it cannot be read).
StatusOr<TomlDocument> ReadTomlFile(const std::string& path);

}  // namespace frugal::apps
