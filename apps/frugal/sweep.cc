#include "sweep.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "child_process.h"
#include "sweep_report.h"

namespace frugal::apps {
namespace fs = std::filesystem;

/*
 * The sweep harness.
 *
 * SweepSpecFromToml() turns the parsed file into a SweepSpec, refusing anything it does not know
 * (the file is the experiment's record, so a typo must not silently change the experiment).
 * ExpandSweep() enumerates the cartesian product of the axes with an odometer over `digit`
 * (last axis fastest); each SweepPoint carries its flags (base, then axes), its command words,
 * and `key`: the command and the flags sorted by name, serialized as JSON. The key is the
 * identity of a run: it does not depend on the order of lines in the file, and any change of a
 * flag (base or axis) makes a new key, so a resumed sweep never reuses a result of another
 * configuration. `id` (FNV-1a of the key) names the run's files.
 *
 * RunSweep() reads results.jsonl, skips points whose key has a completed record, and runs the
 * others one at a time: `frugal <command> <flags> --json runs/<id>.jsonl`, output to
 * logs/<id>.log, under a per-run deadline, with SIGINT/SIGTERM held and forwarded to the run
 * (Child::Supervise). A finished run's JSON lines are folded into one record (epochs + summary)
 * appended to results.jsonl and flushed before the next point starts, so a sweep killed at any
 * moment loses at most the run in progress. Finally the report is rendered from every completed
 * record of the current points.
 */

namespace {

constexpr std::string_view kReservedFlags[] = {"json", "help", "h"};

bool IsFlagName(const std::string& s) {
  if (s.empty() || !std::islower(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

std::string Fnv1a(std::string_view text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:012x}", h & 0xffffffffffffull);
}

nlohmann::json ToJson(const TomlValue& v) {
  switch (v.type) {
    case TomlValue::Type::kString:
      return v.string;
    case TomlValue::Type::kInteger:
      return v.integer;
    case TomlValue::Type::kFloat:
      return v.number;
    case TomlValue::Type::kBool:
      return v.boolean;
    case TomlValue::Type::kArray: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : v.elements) a.push_back(ToJson(e));
      return a;
    }
  }
  return nullptr;
}

bool SameValue(const TomlValue& a, const TomlValue& b) {
  return a.type == b.type && a.AsWord() == b.AsWord();
}

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::string LastNonEmptyLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

class SpecReader {
 public:
  explicit SpecReader(std::string_view source) : source_(source) {}

  Status Error(int line, const std::string& what) const {
    return InvalidArgumentError(fmt::format("{}:{}: {}", source_, line, what));
  }

  StatusOr<std::string> String(const TomlEntry& e, std::string_view where) const {
    if (e.value.type != TomlValue::Type::kString) {
      return Error(e.value.line, fmt::format("{}{} must be a string", where, e.key));
    }
    return e.value.string;
  }

 private:
  std::string source_;
};

}  // namespace

const TomlValue* SweepPoint::Find(std::string_view flag) const {
  for (const auto& f : flags) {
    if (f.name == flag) return &f.value;
  }
  return nullptr;
}

nlohmann::json SweepPoint::PointJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : flags) j[f.name] = ToJson(f.value);
  return j;
}

std::string SweepPoint::Describe() const {
  std::vector<std::string> parts;
  for (const auto& name : axis_names) {
    const TomlValue* v = Find(name);
    if (v != nullptr) parts.push_back(fmt::format("{}={}", name, v->AsWord()));
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

StatusOr<SweepSpec> SweepSpecFromToml(const TomlDocument& doc, std::string_view source) {
  SweepSpec spec;
  spec.source = std::string(source);
  SpecReader r(source);

  for (const auto& e : doc.root.entries) {
    if (e.key == "name") {
      FRUGAL_ASSIGN_OR_RETURN(spec.name, r.String(e, ""));
      bool ok = !spec.name.empty() && std::all_of(spec.name.begin(), spec.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      });
      if (!ok) return r.Error(e.value.line, "name may only hold letters, digits, '-' and '_'");
    } else if (e.key == "description") {
      FRUGAL_ASSIGN_OR_RETURN(spec.description, r.String(e, ""));
    } else if (e.key == "command") {
      if (e.value.type != TomlValue::Type::kArray || e.value.elements.empty() ||
          e.value.elements.front().type != TomlValue::Type::kString) {
        return r.Error(e.value.line,
                       "command must be a non-empty array of strings, e.g. [\"train\"]");
      }
      spec.command.clear();
      for (const auto& w : e.value.elements) spec.command.push_back(w.string);
    } else if (e.key == "timeout_minutes") {
      if (e.value.type != TomlValue::Type::kInteger || e.value.integer < 1 ||
          e.value.integer > 7 * 24 * 60) {
        return r.Error(e.value.line, "timeout_minutes must be a whole number in [1, 10080]");
      }
      spec.timeout = std::chrono::minutes(e.value.integer);
    } else {
      return r.Error(e.value.line,
                     fmt::format("unknown key '{}' (accepted at the top: name, description, "
                                 "command, timeout_minutes; tables: [base], [axes], [variants], "
                                 "[report])",
                                 e.key));
    }
  }
  if (spec.name.empty()) return r.Error(1, "the sweep needs a name (name = \"...\")");

  std::set<std::string> flag_names;
  auto check_flag = [&](const TomlEntry& e) -> Status {
    if (!IsFlagName(e.key)) {
      return r.Error(e.value.line, fmt::format("'{}' is not a long flag name", e.key));
    }
    if (e.key == kVariantAxis) {
      return r.Error(e.value.line, "'variant' names the axis of [variants]; it is not a flag");
    }
    for (auto reserved : kReservedFlags) {
      if (e.key == reserved) {
        return r.Error(e.value.line, fmt::format("--{} is set by the sweep harness itself", e.key));
      }
    }
    if (!flag_names.insert(e.key).second) {
      return r.Error(e.value.line, fmt::format("'{}' is in both [base] and [axes]", e.key));
    }
    return Status::Ok();
  };

  const TomlTable* report = nullptr;
  const TomlTable* variants_table = nullptr;
  for (const auto& table : doc.tables) {
    if (table.name == "base") {
      for (const auto& e : table.entries) {
        FRUGAL_RETURN_IF_ERROR(check_flag(e));
        if (e.value.type == TomlValue::Type::kArray) {
          return r.Error(e.value.line, fmt::format("[base] {} is an array; lists of values to "
                                                   "try belong in [axes]",
                                                   e.key));
        }
        spec.base.push_back(SweepFlag{e.key, e.value});
      }
    } else if (table.name == "axes") {
      for (const auto& e : table.entries) {
        FRUGAL_RETURN_IF_ERROR(check_flag(e));
        if (e.value.type != TomlValue::Type::kArray) {
          return r.Error(
              e.value.line,
              fmt::format("[axes] {} must be an array of values, e.g. [0.01, 0.1]", e.key));
        }
        if (e.value.elements.empty()) {
          return r.Error(e.value.line, fmt::format("[axes] {} is empty", e.key));
        }
        for (size_t i = 0; i < e.value.elements.size(); ++i) {
          for (size_t j = 0; j < i; ++j) {
            if (SameValue(e.value.elements[i], e.value.elements[j])) {
              return r.Error(e.value.line, fmt::format("[axes] {} lists {} twice", e.key,
                                                       e.value.elements[i].AsWord()));
            }
          }
        }
        spec.axes.push_back(SweepAxis{e.key, e.value.elements});
      }
    } else if (table.name == "variants") {
      variants_table = &table;
    } else if (table.name == "report") {
      report = &table;
    } else {
      return r.Error(table.line, fmt::format("unknown table [{}] (accepted: [base], [axes], "
                                             "[variants], [report])",
                                             table.name));
    }
  }
  if (variants_table != nullptr) {
    if (variants_table->entries.empty())
      return r.Error(variants_table->line, "[variants] is empty");
    SweepAxis axis{std::string(kVariantAxis), {}};
    for (const auto& e : variants_table->entries) {
      const TomlValue& v = e.value;
      bool words_ok = v.type == TomlValue::Type::kArray &&
                      (v.elements.empty() || v.elements.front().type == TomlValue::Type::kString);
      if (!words_ok) {
        return r.Error(v.line, fmt::format("[variants] {} must be an array of flags, e.g. "
                                           "[\"--compress=fp16\"] (or [] for none)",
                                           e.key));
      }
      SweepVariant variant{e.key, {}};
      std::set<std::string> own;
      for (const auto& w : v.elements) {
        std::string name = w.string.rfind("--", 0) == 0 ? w.string.substr(2, w.string.find('=') - 2)
                                                        : std::string();
        if (!IsFlagName(name)) {
          return r.Error(v.line, fmt::format("[variants] {}: '{}' is not a flag (--name or "
                                             "--name=value)",
                                             e.key, w.string));
        }
        for (auto reserved : kReservedFlags) {
          if (name == reserved) {
            return r.Error(v.line, fmt::format("--{} is set by the sweep harness itself", name));
          }
        }
        if (flag_names.count(name) != 0) {
          return r.Error(v.line, fmt::format("[variants] {} sets --{}, which [base] or [axes] "
                                             "sets too",
                                             e.key, name));
        }
        if (!own.insert(name).second) {
          return r.Error(v.line, fmt::format("[variants] {} sets --{} twice", e.key, name));
        }
        variant.words.push_back(w.string);
      }
      TomlValue label;
      label.type = TomlValue::Type::kString;
      label.string = e.key;
      label.line = v.line;
      axis.values.push_back(label);
      spec.variants.push_back(std::move(variant));
    }
    spec.axes.insert(spec.axes.begin(), std::move(axis));
  }
  if (spec.axes.empty()) {
    return r.Error(1, "the sweep has no [axes] or [variants] (a table of flag = [values...])");
  }

  auto is_axis = [&](const std::string& name) {
    return std::any_of(spec.axes.begin(), spec.axes.end(),
                       [&](const SweepAxis& a) { return a.name == name; });
  };
  // Defaults: lr as columns, np as workers, the other axes as methods.
  bool methods_given = false;
  if (is_axis("lr")) spec.report.columns = "lr";
  if (flag_names.count("np") != 0) spec.report.workers = "np";
  if (report != nullptr) {
    for (const auto& e : report->entries) {
      if (e.key == "columns" || e.key == "workers") {
        FRUGAL_ASSIGN_OR_RETURN(std::string v, r.String(e, "[report] "));
        if (e.key == "columns") {
          if (!v.empty() && !is_axis(v)) {
            return r.Error(e.value.line, fmt::format("[report] columns: '{}' is not an axis", v));
          }
          spec.report.columns = v;
        } else {
          if (!v.empty() && flag_names.count(v) == 0) {
            return r.Error(e.value.line, fmt::format("[report] workers: '{}' is not a flag of "
                                                     "the sweep",
                                                     v));
          }
          spec.report.workers = v;
        }
      } else if (e.key == "methods") {
        if (e.value.type != TomlValue::Type::kArray || e.value.elements.empty() ||
            e.value.elements.front().type != TomlValue::Type::kString) {
          return r.Error(e.value.line, "[report] methods must be a non-empty array of axis names");
        }
        for (const auto& m : e.value.elements) {
          if (!is_axis(m.string)) {
            return r.Error(e.value.line,
                           fmt::format("[report] methods: '{}' is not an axis", m.string));
          }
          spec.report.methods.push_back(m.string);
        }
        methods_given = true;
      } else if (e.key == "target_accuracy") {
        if ((e.value.type != TomlValue::Type::kFloat &&
             e.value.type != TomlValue::Type::kInteger) ||
            e.value.number <= 0 || e.value.number > 1) {
          return r.Error(e.value.line,
                         "[report] target_accuracy must be a fraction in (0, 1], e.g. 0.88");
        }
        spec.report.target_accuracy = e.value.number;
      } else if (e.key == "baseline") {
        FRUGAL_ASSIGN_OR_RETURN(spec.report.baseline, r.String(e, "[report] "));
      } else {
        return r.Error(e.value.line,
                       fmt::format("unknown key '{}' in [report] (accepted: columns, workers, "
                                   "methods, target_accuracy, baseline)",
                                   e.key));
      }
    }
  }
  if (!methods_given) {
    for (const auto& a : spec.axes) {
      if (a.name != spec.report.columns && a.name != spec.report.workers) {
        spec.report.methods.push_back(a.name);
      }
    }
  }
  for (const auto& m : spec.report.methods) {
    if (m == spec.report.columns || m == spec.report.workers) {
      return r.Error(report != nullptr ? report->line : 1,
                     fmt::format("[report] '{}' cannot be a method and the {} at once", m,
                                 m == spec.report.columns ? "columns" : "workers"));
    }
  }
  return spec;
}

StatusOr<SweepSpec> LoadSweepSpec(const std::string& path) {
  FRUGAL_ASSIGN_OR_RETURN(TomlDocument doc, ReadTomlFile(path));
  return SweepSpecFromToml(doc, path);
}

const SweepVariant* SweepSpec::FindVariant(std::string_view name) const {
  for (const auto& v : variants) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

std::vector<std::string> FlagWords(const std::vector<SweepFlag>& flags) {
  std::vector<std::string> words;
  for (const auto& f : flags) {
    if (f.name == kVariantAxis) continue;  // stands for its variant's words
    if (f.value.type == TomlValue::Type::kBool) {
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
    if (const TomlValue* v = p.Find(kVariantAxis)) {
      const SweepVariant* variant = spec.FindVariant(v->string);
      FRUGAL_INTERNAL_ASSERT(variant != nullptr, "no variant ", v->string);
      p.args.insert(p.args.end(), variant->words.begin(), variant->words.end());
      key["variant_args"] = variant->words;
    }
    p.key = key.dump();
    p.id = Fnv1a(p.key);
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

StatusOr<std::vector<nlohmann::json>> ReadResults(const fs::path& path, const Logger& logger) {
  std::vector<nlohmann::json> records;
  if (!fs::exists(path)) return records;
  std::ifstream in(path);
  if (!in) return IoError(fmt::format("cannot read {}: {}", path.string(), std::strerror(errno)));
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("key") || !j["key"].is_string()) {
      logger.Warning(fmt::format("{}:{}: not a sweep record; ignored", path.string(), number));
      continue;
    }
    records.push_back(std::move(j));
  }
  return records;
}

Status AppendResult(const fs::path& path, const nlohmann::json& record) {
  std::string line = record.dump() + "\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return IoError(fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      return IoError(fmt::format("cannot write {}: {}", path.string(), std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  return Status::Ok();
}

bool IsCompleted(const nlohmann::json& record) {
  return record.value("exit_code", -1) == 0 && record.contains("summary") &&
         record["summary"].is_object();
}

namespace {

// Folds the JSON lines of one `frugal train --json` file into {epochs: [...], summary: {...}}.
Status ReadRunJson(const fs::path& path, nlohmann::json& record) {
  std::ifstream in(path);
  if (!in) return IoError(fmt::format("the run wrote no {}", path.string()));
  nlohmann::json epochs = nlohmann::json::array();
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return MalformedError(fmt::format("{}: a line is not a JSON object", path.string()));
    }
    if (j.value("event", "") == "summary") {
      record["summary"] = j;
    } else if (j.contains("epoch")) {
      epochs.push_back(j);
    }
  }
  record["epochs"] = epochs;
  if (!record.contains("summary")) {
    return MalformedError(fmt::format("{} has no summary record", path.string()));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<int> RunSweep(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                       const SweepRunOptions& options, const Logger& logger) {
  fs::path results_path = options.out_dir / "results.jsonl";
  if (options.dry_run) {
    for (const auto& p : points) {
      std::vector<std::string> argv = options.self;
      argv.insert(argv.end(), p.args.begin(), p.args.end());
      std::printf("%3d  %s\n", p.index, ShellQuote(argv).c_str());
    }
    std::printf("%zu points; results would go to %s\n", points.size(), results_path.c_str());
    return 0;
  }
  std::error_code ec;
  for (const char* sub : {"runs", "logs"}) {
    fs::create_directories(options.out_dir / sub, ec);
    if (ec) {
      return IoError(
          fmt::format("cannot create {}: {}", (options.out_dir / sub).string(), ec.message()));
    }
  }
  FRUGAL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> records, ReadResults(results_path, logger));
  std::map<std::string, const nlohmann::json*> last_by_key;
  for (const auto& r : records) last_by_key[r["key"].get<std::string>()] = &r;

  std::vector<const SweepPoint*> todo;
  int done_before = 0;
  for (const auto& p : points) {
    auto it = last_by_key.find(p.key);
    if (it != last_by_key.end() && (IsCompleted(*it->second) || !options.retry_failed)) {
      ++done_before;
      continue;
    }
    todo.push_back(&p);
  }
  std::fprintf(stderr, "sweep %s: %zu points, %d already in %s, %zu to run\n", spec.name.c_str(),
               points.size(), done_before, results_path.c_str(), todo.size());

  int failed = 0;
  std::optional<int> interrupted;
  {
    HeldSignals held;
    for (size_t n = 0; n < todo.size(); ++n) {
      const SweepPoint& p = *todo[n];
      fs::path run_json = options.out_dir / "runs" / (p.id + ".jsonl");
      fs::path log = options.out_dir / "logs" / (p.id + ".log");
      fs::remove(run_json, ec);
      fs::remove(log, ec);
      std::vector<std::string> argv = options.self;
      argv.insert(argv.end(), p.args.begin(), p.args.end());
      argv.push_back("--json=" + run_json.string());
      std::fprintf(stderr, "[%zu/%zu] point %d: %s\n", n + 1, todo.size(), p.index,
                   p.Describe().c_str());
      SpawnOptions spawn;
      spawn.output_path = log.string();
      auto start = std::chrono::steady_clock::now();
      FRUGAL_ASSIGN_OR_RETURN(Child child, Child::Spawn(argv, spawn));
      Status supervised = child.Supervise(held, start + spec.timeout);
      double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (held.received()) {
        interrupted = held.received();
        std::fprintf(stderr, "interrupted; point %d is not recorded\n", p.index);
        break;
      }
      nlohmann::json record;
      record["key"] = p.key;
      record["id"] = p.id;
      record["sweep"] = spec.name;
      record["index"] = p.index;
      record["point"] = p.PointJson();
      record["command"] = argv;
      record["exit_code"] = ShellExitCode(child.result());
      record["wall_seconds"] = wall;
      record["finished"] = NowIso();
      record["log"] = fs::relative(log, options.out_dir).string();
      // Why the point failed, empty when it did not: the deadline, the run's own exit code with
      // the last line of its log, or its JSON.
      std::string error;
      if (!supervised.ok()) {
        error = supervised.message();
      } else if (child.result().exit_code != 0) {
        error =
            fmt::format("exit code {}: {}", ShellExitCode(child.result()), LastNonEmptyLine(log));
      } else if (Status read = ReadRunJson(run_json, record); !read.ok()) {
        error = read.message();
      }
      if (!error.empty()) {
        if (record["exit_code"].get<int>() == 0) record["exit_code"] = 1;
        record["error"] = error;
        ++failed;
        std::fprintf(stderr, "  failed: %s (log: %s)\n", error.c_str(), log.c_str());
      } else {
        std::fprintf(stderr, "  done in %.1f s\n", wall);
      }
      FRUGAL_RETURN_IF_ERROR(AppendResult(results_path, record));
    }
  }

  FRUGAL_ASSIGN_OR_RETURN(records, ReadResults(results_path, logger));
  auto files = RenderReport(spec, points, records, options.out_dir, logger);
  if (!files.ok()) {
    logger.Error(files.status().Annotate("rendering the report").ToString());
  } else {
    std::fprintf(stderr, "table: %s\n", files->table.c_str());
    for (const auto& plot : files->plots) std::fprintf(stderr, "plot: %s\n", plot.c_str());
  }
  if (interrupted) return 128 + *interrupted;
  if (!files.ok()) return 1;
  return failed > 0 ? 1 : 0;
}

}  // namespace frugal::apps
