// Reading a sweep file.
//
// The file is the experiment's record, so a typo must not silently change the experiment: the
// reader refuses anything it does not know. SpecReader walks the parsed document in file order:
// the top-level keys, then [base] and [axes] (flags: CheckFlag refuses names that are not long
// flags, reserved names and a flag in both tables), [variants] (flag words, checked against the
// flags of [base] and [axes]; they become the first axis) and last [report], whose names must
// refer to axes and flags read before. Every error names the file and the line of the value.
#include "sweep_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "toml_file.h"

namespace frugal::apps {
namespace {

constexpr std::string_view kReservedFlags[] = {"json", "help", "h"};

bool IsFlagName(const std::string& s) {
  if (s.empty() || !std::islower(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

bool IsReserved(std::string_view name) {
  return std::find(std::begin(kReservedFlags), std::end(kReservedFlags), name) !=
         std::end(kReservedFlags);
}

class SpecReader {
 public:
  explicit SpecReader(std::string_view source) { spec_.source = std::string(source); }

  StatusOr<SweepSpec> Read(const toml::table& doc) {
    const toml::table* base = nullptr;
    const toml::table* axes = nullptr;
    const toml::table* variants = nullptr;
    const toml::table* report = nullptr;
    for (const auto& [key, node] : InFileOrder(doc)) {
      if (const toml::table* table = node->as_table()) {
        const toml::table** slot = key == "base"       ? &base
                                   : key == "axes"     ? &axes
                                   : key == "variants" ? &variants
                                   : key == "report"   ? &report
                                                       : nullptr;
        if (slot == nullptr) {
          return Error(*node, fmt::format("unknown table [{}] (accepted: [base], [axes], "
                                          "[variants], [report])",
                                          key));
        }
        *slot = table;
      } else {
        FRUGAL_RETURN_IF_ERROR(ReadTop(key, *node));
      }
    }
    if (spec_.name.empty()) return Error(1, "the sweep needs a name (name = \"...\")");
    if (base != nullptr) FRUGAL_RETURN_IF_ERROR(ReadBase(*base));
    if (axes != nullptr) FRUGAL_RETURN_IF_ERROR(ReadAxes(*axes));
    if (variants != nullptr) FRUGAL_RETURN_IF_ERROR(ReadVariants(*variants));
    if (spec_.axes.empty()) {
      return Error(1, "the sweep has no [axes] or [variants] (a table of flag = [values...])");
    }
    FRUGAL_RETURN_IF_ERROR(ReadReport(report));
    return std::move(spec_);
  }

 private:
  Status Error(int line, const std::string& what) const {
    return InvalidArgumentError(fmt::format("{}:{}: {}", spec_.source, line, what));
  }
  Status Error(const toml::node& node, const std::string& what) const {
    return Error(TomlLine(node), what);
  }

  StatusOr<std::string> String(const toml::node& node, std::string_view what) const {
    if (const auto* s = node.as_string()) return s->get();
    return Error(node, fmt::format("{} must be a string", what));
  }

  // A non-empty array of strings, or an error saying what `what` must be.
  StatusOr<std::vector<std::string>> Strings(const toml::node& node, bool allow_empty,
                                             const std::string& what) const {
    const toml::array* array = node.as_array();
    if (array == nullptr || (array->empty() && !allow_empty)) return Error(node, what);
    std::vector<std::string> strings;
    for (const toml::node& element : *array) {
      const auto* s = element.as_string();
      if (s == nullptr) return Error(element, what);
      strings.push_back(s->get());
    }
    return strings;
  }

  StatusOr<FlagValue> Value(const toml::node& node, std::string_view what) const {
    auto word = TomlWord(node);
    if (!word.ok()) return Error(node, fmt::format("{}: {}", what, word.status().message()));
    FlagValue v;
    v.word = std::move(*word);
    if (node.is_string()) {
      v.type = FlagValue::Type::kString;
    } else if (node.is_integer()) {
      v.type = FlagValue::Type::kInteger;
      v.integer = node.as_integer()->get();
      v.number = static_cast<double>(v.integer);
    } else if (node.is_floating_point()) {
      v.type = FlagValue::Type::kFloat;
      v.number = node.as_floating_point()->get();
    } else {
      v.type = FlagValue::Type::kBool;
      v.boolean = node.as_boolean()->get();
    }
    return v;
  }

  Status ReadTop(const std::string& key, const toml::node& node) {
    if (key == "name") {
      FRUGAL_ASSIGN_OR_RETURN(spec_.name, String(node, "name"));
      const bool ok =
          !spec_.name.empty() && std::all_of(spec_.name.begin(), spec_.name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
          });
      if (!ok) return Error(node, "name may only hold letters, digits, '-' and '_'");
    } else if (key == "description") {
      FRUGAL_ASSIGN_OR_RETURN(spec_.description, String(node, "description"));
    } else if (key == "command") {
      FRUGAL_ASSIGN_OR_RETURN(
          spec_.command,
          Strings(node, false, "command must be a non-empty array of strings, e.g. [\"train\"]"));
    } else if (key == "timeout_minutes") {
      const auto* minutes = node.as_integer();
      if (minutes == nullptr || minutes->get() < 1 || minutes->get() > 7 * 24 * 60) {
        return Error(node, "timeout_minutes must be a whole number in [1, 10080]");
      }
      spec_.timeout = std::chrono::minutes(minutes->get());
    } else {
      return Error(node, fmt::format("unknown key '{}' (accepted at the top: name, description, "
                                     "command, timeout_minutes; tables: [base], [axes], "
                                     "[variants], [report])",
                                     key));
    }
    return Status::Ok();
  }

  Status CheckFlag(const std::string& key, const toml::node& node) {
    if (!IsFlagName(key)) return Error(node, fmt::format("'{}' is not a long flag name", key));
    if (key == kVariantAxis) {
      return Error(node, "'variant' names the axis of [variants]; it is not a flag");
    }
    if (IsReserved(key)) {
      return Error(node, fmt::format("--{} is set by the sweep harness itself", key));
    }
    if (!flag_names_.insert(key).second) {
      return Error(node, fmt::format("'{}' is in both [base] and [axes]", key));
    }
    return Status::Ok();
  }

  Status ReadBase(const toml::table& table) {
    for (const auto& [key, node] : InFileOrder(table)) {
      FRUGAL_RETURN_IF_ERROR(CheckFlag(key, *node));
      if (node->is_array()) {
        return Error(*node, fmt::format("[base] {} is an array; lists of values to try belong "
                                        "in [axes]",
                                        key));
      }
      FRUGAL_ASSIGN_OR_RETURN(FlagValue value, Value(*node, "[base] " + key));
      spec_.base.push_back(SweepFlag{key, std::move(value)});
    }
    return Status::Ok();
  }

  Status ReadAxes(const toml::table& table) {
    for (const auto& [key, node] : InFileOrder(table)) {
      FRUGAL_RETURN_IF_ERROR(CheckFlag(key, *node));
      const toml::array* array = node->as_array();
      if (array == nullptr) {
        return Error(*node,
                     fmt::format("[axes] {} must be an array of values, e.g. [0.01, 0.1]", key));
      }
      if (array->empty()) return Error(*node, fmt::format("[axes] {} is empty", key));
      SweepAxis axis{key, {}};
      for (const toml::node& element : *array) {
        FRUGAL_ASSIGN_OR_RETURN(FlagValue value, Value(element, "[axes] " + key));
        if (std::find(axis.values.begin(), axis.values.end(), value) != axis.values.end()) {
          return Error(*node, fmt::format("[axes] {} lists {} twice", key, value.AsWord()));
        }
        axis.values.push_back(std::move(value));
      }
      spec_.axes.push_back(std::move(axis));
    }
    return Status::Ok();
  }

  Status ReadVariants(const toml::table& table) {
    if (table.empty()) return Error(table, "[variants] is empty");
    SweepAxis axis{std::string(kVariantAxis), {}};
    for (const auto& [key, node] : InFileOrder(table)) {
      FRUGAL_ASSIGN_OR_RETURN(std::vector<std::string> words,
                              Strings(*node, true,
                                      fmt::format("[variants] {} must be an array of flags, e.g. "
                                                  "[\"--compress=fp16\"] (or [] for none)",
                                                  key)));
      std::set<std::string> own;
      for (const std::string& word : words) {
        const std::string name =
            word.rfind("--", 0) == 0 ? word.substr(2, word.find('=') - 2) : std::string();
        if (!IsFlagName(name)) {
          return Error(*node, fmt::format("[variants] {}: '{}' is not a flag (--name or "
                                          "--name=value)",
                                          key, word));
        }
        if (IsReserved(name)) {
          return Error(*node, fmt::format("--{} is set by the sweep harness itself", name));
        }
        if (flag_names_.count(name) != 0) {
          return Error(*node, fmt::format("[variants] {} sets --{}, which [base] or [axes] sets "
                                          "too",
                                          key, name));
        }
        if (!own.insert(name).second) {
          return Error(*node, fmt::format("[variants] {} sets --{} twice", key, name));
        }
      }
      axis.values.push_back(FlagValue::String(key));
      spec_.variants.push_back(SweepVariant{key, std::move(words)});
    }
    spec_.axes.insert(spec_.axes.begin(), std::move(axis));
    return Status::Ok();
  }

  bool IsAxis(const std::string& name) const {
    return std::any_of(spec_.axes.begin(), spec_.axes.end(),
                       [&](const SweepAxis& a) { return a.name == name; });
  }

  // Defaults: lr as columns, np as workers, the other axes as methods.
  Status ReadReport(const toml::table* table) {
    SweepReportSpec& report = spec_.report;
    int baseline_line = table != nullptr ? TomlLine(*table) : 1;
    if (IsAxis("lr")) report.columns = "lr";
    if (IsAxis("lr")) report.column_axes = {"lr"};
    if (flag_names_.count("np") != 0) report.workers = "np";
    bool methods_given = false;
    const auto entries = table != nullptr
                             ? InFileOrder(*table)
                             : std::vector<std::pair<std::string, const toml::node*>>{};
    for (const auto& [key, node] : entries) {
      if (key == "columns") {
        if (node->is_array()) {
          FRUGAL_ASSIGN_OR_RETURN(
              report.column_axes,
              Strings(*node, false, "[report] columns must be an axis or an array of axes"));
          report.columns = report.column_axes.front();
        } else {
          FRUGAL_ASSIGN_OR_RETURN(report.columns, String(*node, "[report] columns"));
          report.column_axes.clear();
          if (!report.columns.empty()) report.column_axes.push_back(report.columns);
        }
        for (const std::string& c : report.column_axes) {
          if (!IsAxis(c))
            return Error(*node, fmt::format("[report] columns: '{}' is not an axis", c));
        }
      } else if (key == "seeds") {
        FRUGAL_ASSIGN_OR_RETURN(report.seeds, String(*node, "[report] seeds"));
        if (!IsAxis(report.seeds)) {
          return Error(*node, fmt::format("[report] seeds: '{}' is not an axis", report.seeds));
        }
      } else if (key == "workers") {
        FRUGAL_ASSIGN_OR_RETURN(report.workers, String(*node, "[report] workers"));
        if (!report.workers.empty() && flag_names_.count(report.workers) == 0) {
          return Error(*node, fmt::format("[report] workers: '{}' is not a flag of the sweep",
                                          report.workers));
        }
      } else if (key == "methods") {
        FRUGAL_ASSIGN_OR_RETURN(
            report.methods,
            Strings(*node, false, "[report] methods must be a non-empty array of axis names"));
        for (const std::string& m : report.methods) {
          if (!IsAxis(m))
            return Error(*node, fmt::format("[report] methods: '{}' is not an axis", m));
        }
        methods_given = true;
      } else if (key == "target_accuracy") {
        const std::optional<double> target = node->value<double>();
        if (!target || !(node->is_floating_point() || node->is_integer()) || *target <= 0 ||
            *target > 1) {
          return Error(*node, "[report] target_accuracy must be a fraction in (0, 1], e.g. 0.88");
        }
        report.target_accuracy = *target;
      } else if (key == "baseline") {
        FRUGAL_ASSIGN_OR_RETURN(report.baseline, String(*node, "[report] baseline"));
        baseline_line = TomlLine(*node);
      } else {
        return Error(*node, fmt::format("unknown key '{}' in [report] (accepted: columns, "
                                        "seeds, workers, methods, target_accuracy, baseline)",
                                        key));
      }
    }
    auto is_column = [&](const std::string& name) {
      return std::find(report.column_axes.begin(), report.column_axes.end(), name) !=
             report.column_axes.end();
    };
    if (!methods_given) {
      for (const SweepAxis& a : spec_.axes) {
        if (!is_column(a.name) && a.name != report.workers && a.name != report.seeds) {
          report.methods.push_back(a.name);
        }
      }
    }
    for (const std::string& m : report.methods) {
      if (is_column(m) || m == report.workers || m == report.seeds) {
        return Error(table != nullptr ? TomlLine(*table) : 1,
                     fmt::format("[report] '{}' cannot be a method and the {} at once", m,
                                 is_column(m)          ? "columns"
                                 : m == report.workers ? "workers"
                                                       : "seeds"));
      }
    }
    if (!report.seeds.empty() && is_column(report.seeds)) {
      return Error(
          table != nullptr ? TomlLine(*table) : 1,
          fmt::format("[report] '{}' cannot be the seeds and a column at once", report.seeds));
    }
    return CheckBaseline(baseline_line);
  }

  // The baseline is a method label: one value of each method axis, joined by spaces.
  Status CheckBaseline(int line) const {
    const SweepReportSpec& report = spec_.report;
    if (report.baseline.empty() || report.methods.empty()) return Status::Ok();
    std::vector<std::string> words;
    for (size_t start = 0; start <= report.baseline.size();) {
      size_t end = report.baseline.find(' ', start);
      if (end == std::string::npos) end = report.baseline.size();
      words.push_back(report.baseline.substr(start, end - start));
      start = end + 1;
    }
    bool known = words.size() == report.methods.size();
    std::vector<std::string> labels;  // of the first method axis, for the message
    for (size_t i = 0; i < report.methods.size(); ++i) {
      const SweepAxis& axis =
          *std::find_if(spec_.axes.begin(), spec_.axes.end(),
                        [&](const SweepAxis& a) { return a.name == report.methods[i]; });
      bool has = false;
      for (const FlagValue& v : axis.values) {
        if (i == 0) labels.push_back(v.AsWord());
        has = has || (i < words.size() && v.AsWord() == words[i]);
      }
      known = known && has;
    }
    if (known) return Status::Ok();
    return Error(line, fmt::format("[report] baseline: '{}' is not a method of the sweep (a value "
                                   "of {}{}: {})",
                                   report.baseline, report.methods.front(),
                                   report.methods.size() > 1 ? " and the other method axes" : "",
                                   fmt::join(labels, ", ")));
  }

  SweepSpec spec_;
  std::set<std::string> flag_names_;  // of [base] and [axes]
};

}  // namespace

FlagValue FlagValue::String(std::string text) {
  FlagValue v;
  v.type = Type::kString;
  v.word = std::move(text);
  return v;
}

nlohmann::json FlagValue::ToJson() const {
  switch (type) {
    case Type::kString:
      return word;
    case Type::kInteger:
      return integer;
    case Type::kFloat:
      return number;
    case Type::kBool:
      return boolean;
  }
  return nullptr;
}

const SweepVariant* SweepSpec::FindVariant(std::string_view name) const {
  for (const auto& v : variants) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

StatusOr<SweepSpec> ParseSweepSpec(std::string_view text, std::string_view source) {
  FRUGAL_ASSIGN_OR_RETURN(toml::table doc, ParseToml(text, source));
  return SpecReader(source).Read(doc);
}

StatusOr<SweepSpec> LoadSweepSpec(const std::string& path) {
  FRUGAL_ASSIGN_OR_RETURN(toml::table doc, ReadTomlFile(path));
  return SpecReader(path).Read(doc);
}

}  // namespace frugal::apps
