// TOML files of the command line (sweep files, `frugal train --config`), read with toml++
// (TOML 1.0). Errors name the file and the line.
//
// Thread safety: free functions without shared state.
#pragma once

#include <toml++/toml.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frugal/status.h"

namespace frugal::apps {

// Parses `text` as TOML. kInvalidArgument "SOURCE:LINE:COLUMN: what" (one line) when it is not.
StatusOr<toml::table> ParseToml(std::string_view text, std::string_view source);

// Reads and parses the file at `path`: kNotFound when it does not exist, kIoError when it cannot
// be read, else as ParseToml.
StatusOr<toml::table> ReadTomlFile(const std::string& path);

// The line of `node` in its file, from 1 (0 for a node that did not come from a file).
int TomlLine(const toml::node& node);

// The entries of `table` in the order of the file (toml::table keeps them sorted by key).
std::vector<std::pair<std::string, const toml::node*>> InFileOrder(const toml::table& table);

// A scalar as a command-line word: a string as it is, an integer in decimal, a float in the
// shortest form that reads back the same with at least one decimal ("0.05", "1e-05", "2.0"), a
// boolean as true/false. kInvalidArgument for arrays, tables, dates, times and floats that are
// not finite.
StatusOr<std::string> TomlWord(const toml::node& node);

// One `key = value` line of a flag file.
struct FlagSetting {
  std::string key;
  std::vector<std::string> words;  // one per scalar: the value, or every element of an array
  int line = 0;
};

// The settings of a flag file: the keys at the top and those of the table [section], in file
// order. kInvalidArgument "PATH:LINE: ..." for any other table and for values that are neither
// scalars nor arrays of scalars; errors of ReadTomlFile otherwise.
StatusOr<std::vector<FlagSetting>> ReadFlagFile(const std::string& path, std::string_view section);

}  // namespace frugal::apps
