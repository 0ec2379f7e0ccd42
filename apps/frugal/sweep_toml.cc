#include "sweep_toml.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace frugal::apps {

/*
 * TOML subset reader: a hand-written recursive-descent parser over the whole text with a cursor
 * (`pos_`) and the current line number (`line_`). ParseDocument() reads statement by statement:
 * blank or comment lines, `[name]` headers that open a new TomlTable (repeated names refused),
 * and `key = value` entries added to the current table (repeated keys refused). After each
 * statement only spaces and a comment may follow before the end of the line (ExpectLineEnd).
 * ParseValue() dispatches on the first character: quote -> string, '[' -> array (values
 * separated by commas, newlines and comments allowed inside, one element type), t/f -> boolean,
 * anything else -> a number token that must match TOML's integer or float grammar; the number
 * keeps its literal spelling so that a sweep passes `0.05` to a flag exactly as written.
 */

namespace {

bool IsBareKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  StatusOr<TomlDocument> ParseDocument() {
    TomlDocument doc;
    TomlTable* current = &doc.root;
    std::set<std::string> table_names;
    while (true) {
      SkipSpaces();
      if (AtEnd()) break;
      char c = Peek();
      if (c == '\n') {
        Advance();
        continue;
      }
      if (c == '#') {
        SkipComment();
        continue;
      }
      if (c == '[') {
        Advance();
        if (!AtEnd() && Peek() == '[') return Error("arrays of tables ([[...]]) are not supported");
        SkipSpaces();
        int header_line = line_;
        std::string name = ReadBareKey();
        if (name.empty()) return Error("expected a table name after '['");
        SkipSpaces();
        if (!AtEnd() && Peek() == '.') return Error("dotted table names are not supported");
        if (AtEnd() || Peek() != ']') return Error("expected ']' after the table name");
        Advance();
        if (!table_names.insert(name).second) {
          return Error(fmt::format("table [{}] appears twice", name));
        }
        doc.tables.push_back(TomlTable{name, header_line, {}});
        current = &doc.tables.back();
        FRUGAL_RETURN_IF_ERROR(ExpectLineEnd());
        continue;
      }
      int key_line = line_;
      std::string key = ReadBareKey();
      if (key.empty()) {
        return Error(fmt::format("expected a key (letters, digits, '_' or '-'), found '{}'", c));
      }
      SkipSpaces();
      if (!AtEnd() && Peek() == '.') return Error("dotted keys are not supported");
      if (AtEnd() || Peek() != '=') return Error(fmt::format("expected '=' after key '{}'", key));
      Advance();
      SkipSpaces();
      FRUGAL_ASSIGN_OR_RETURN(TomlValue value, ParseValue(/*in_array=*/false));
      if (current->Find(key) != nullptr) {
        return ErrorAt(key_line,
                       current->name.empty()
                           ? fmt::format("key '{}' appears twice", key)
                           : fmt::format("key '{}' appears twice in [{}]", key, current->name));
      }
      value.line = key_line;
      current->entries.push_back(TomlEntry{key, std::move(value)});
      FRUGAL_RETURN_IF_ERROR(ExpectLineEnd());
    }
    return doc;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }
  void Advance() {
    if (text_[pos_] == '\n') ++line_;
    ++pos_;
  }
  void SkipSpaces() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\r')) Advance();
  }
  void SkipComment() {
    while (!AtEnd() && Peek() != '\n') Advance();
  }
  // Spaces, newlines and comments (inside arrays).
  void SkipBlank() {
    while (!AtEnd()) {
      SkipSpaces();
      if (AtEnd()) return;
      if (Peek() == '#') {
        SkipComment();
      } else if (Peek() == '\n') {
        Advance();
      } else {
        return;
      }
    }
  }
  Status ExpectLineEnd() {
    SkipSpaces();
    if (!AtEnd() && Peek() == '#') SkipComment();
    if (AtEnd()) return Status::Ok();
    if (Peek() != '\n') {
      return Error(fmt::format("unexpected '{}' after the value (one entry per line)", Peek()));
    }
    Advance();
    return Status::Ok();
  }
  std::string ReadBareKey() {
    size_t start = pos_;
    while (!AtEnd() && IsBareKeyChar(Peek())) Advance();
    return std::string(text_.substr(start, pos_ - start));
  }
  Status Error(const std::string& what) const { return ErrorAt(line_, what); }
  Status ErrorAt(int line, const std::string& what) const {
    return InvalidArgumentError(fmt::format("{}:{}: {}", source_, line, what));
  }

  StatusOr<TomlValue> ParseValue(bool in_array) {
    if (AtEnd() || Peek() == '\n' || Peek() == '#') return Error("missing value");
    TomlValue value;
    value.line = line_;
    char c = Peek();
    if (c == '"' || c == '\'') {
      if (text_.substr(pos_, 3) == "\"\"\"" || text_.substr(pos_, 3) == "'''") {
        return Error("multi-line strings are not supported");
      }
      value.type = TomlValue::Type::kString;
      FRUGAL_ASSIGN_OR_RETURN(value.string, c == '"' ? ParseBasicString() : ParseLiteralString());
      return value;
    }
    if (c == '[') {
      if (in_array) return Error("nested arrays are not supported");
      Advance();
      value.type = TomlValue::Type::kArray;
      while (true) {
        SkipBlank();
        if (AtEnd()) return ErrorAt(value.line, "array is not closed with ']'");
        if (Peek() == ']') {
          Advance();
          break;
        }
        FRUGAL_ASSIGN_OR_RETURN(TomlValue element, ParseValue(/*in_array=*/true));
        if (!value.elements.empty() && element.type != value.elements.front().type) {
          return Error(fmt::format("array mixes {} and {} values",
                                   TomlValue::TypeName(value.elements.front().type),
                                   TomlValue::TypeName(element.type)));
        }
        value.elements.push_back(std::move(element));
        SkipBlank();
        if (AtEnd()) return ErrorAt(value.line, "array is not closed with ']'");
        if (Peek() == ',') {
          Advance();
          continue;
        }
        if (Peek() != ']')
          return Error(fmt::format("expected ',' or ']' in array, found '{}'", Peek()));
      }
      return value;
    }
    if (c == '{') return Error("inline tables are not supported");
    // A bare token: boolean or number.
    size_t start = pos_;
    while (!AtEnd() && Peek() != ',' && Peek() != ']' && Peek() != '#' && Peek() != '\n' &&
           Peek() != ' ' && Peek() != '\t' && Peek() != '\r') {
      Advance();
    }
    std::string token(text_.substr(start, pos_ - start));
    if (token == "true" || token == "false") {
      value.type = TomlValue::Type::kBool;
      value.boolean = token == "true";
      value.literal = token;
      return value;
    }
    return ParseNumber(token, value);
  }

  StatusOr<TomlValue> ParseNumber(const std::string& token, TomlValue value) {
    auto bad = [&]() {
      return Error(fmt::format(
          "'{}' is not a value (strings need quotes; numbers look like 3, -2, 0.05, 1e-3)", token));
    };
    // Underscores only between digits.
    std::string clean;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '_') {
        bool ok = i > 0 && i + 1 < token.size() &&
                  std::isdigit(static_cast<unsigned char>(token[i - 1])) &&
                  std::isdigit(static_cast<unsigned char>(token[i + 1]));
        if (!ok) return bad();
        continue;
      }
      clean += token[i];
    }
    if (clean.empty()) return bad();
    size_t i = 0;
    if (clean[i] == '+' || clean[i] == '-') ++i;
    size_t int_start = i;
    while (i < clean.size() && std::isdigit(static_cast<unsigned char>(clean[i]))) ++i;
    size_t int_digits = i - int_start;
    if (int_digits == 0) return bad();
    if (int_digits > 1 && clean[int_start] == '0') return bad();  // no leading zeros
    bool is_float = false;
    if (i < clean.size() && clean[i] == '.') {
      ++i;
      size_t frac_start = i;
      while (i < clean.size() && std::isdigit(static_cast<unsigned char>(clean[i]))) ++i;
      if (i == frac_start) return bad();
      is_float = true;
    }
    if (i < clean.size() && (clean[i] == 'e' || clean[i] == 'E')) {
      ++i;
      if (i < clean.size() && (clean[i] == '+' || clean[i] == '-')) ++i;
      size_t exp_start = i;
      while (i < clean.size() && std::isdigit(static_cast<unsigned char>(clean[i]))) ++i;
      if (i == exp_start) return bad();
      is_float = true;
    }
    if (i != clean.size()) return bad();
    value.literal = clean;
    errno = 0;
    if (is_float) {
      value.type = TomlValue::Type::kFloat;
      value.number = std::strtod(clean.c_str(), nullptr);
      if (errno == ERANGE || !std::isfinite(value.number)) {
        return Error(fmt::format("'{}' is out of range", token));
      }
    } else {
      value.type = TomlValue::Type::kInteger;
      value.integer = std::strtoll(clean.c_str(), nullptr, 10);
      if (errno == ERANGE) return Error(fmt::format("'{}' is out of range", token));
      value.number = static_cast<double>(value.integer);
    }
    return value;
  }

  StatusOr<std::string> ParseBasicString() {
    int start_line = line_;
    Advance();  // opening quote
    std::string out;
    while (true) {
      if (AtEnd() || Peek() == '\n') return ErrorAt(start_line, "string is not closed with '\"'");
      char c = Peek();
      Advance();
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (AtEnd()) return Error("string ends in '\\'");
      char e = Peek();
      Advance();
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'u': {
          if (text_.size() - pos_ < 4) return Error("\\u needs 4 hex digits");
          std::string hex(text_.substr(pos_, 4));
          if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
            return Error("\\u needs 4 hex digits");
          }
          for (int k = 0; k < 4; ++k) Advance();
          unsigned cp = static_cast<unsigned>(std::stoul(hex, nullptr, 16));
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default:
          return Error(fmt::format("unknown escape '\\{}' in string", e));
      }
    }
  }

  StatusOr<std::string> ParseLiteralString() {
    int start_line = line_;
    Advance();
    size_t start = pos_;
    while (!AtEnd() && Peek() != '\'' && Peek() != '\n') Advance();
    if (AtEnd() || Peek() != '\'') return ErrorAt(start_line, "string is not closed with \"'\"");
    std::string out(text_.substr(start, pos_ - start));
    Advance();
    return out;
  }

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace

std::string TomlValue::AsWord() const {
  FRUGAL_CHECK(type != Type::kArray, "AsWord() of an array");
  return type == Type::kString ? string : literal;
}

std::string_view TomlValue::TypeName(Type type) {
  switch (type) {
    case Type::kString:
      return "string";
    case Type::kInteger:
      return "integer";
    case Type::kFloat:
      return "float";
    case Type::kBool:
      return "boolean";
    case Type::kArray:
      return "array";
  }
  return "?";
}

const TomlEntry* TomlTable::Find(std::string_view key) const {
  for (const auto& e : entries) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

const TomlTable* TomlDocument::FindTable(std::string_view name) const {
  for (const auto& t : tables) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

StatusOr<TomlDocument> ParseToml(std::string_view text, std::string_view source) {
  return Parser(text, source).ParseDocument();
}

StatusOr<TomlDocument> ReadTomlFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return NotFoundError(fmt::format("{}: no such file", path));
    return IoError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return ParseToml(buffer.str(), path);
}

}  // namespace frugal::apps
