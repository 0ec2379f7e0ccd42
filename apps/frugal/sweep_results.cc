#include "sweep_results.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

namespace frugal::apps {
namespace fs = std::filesystem;

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

Status FoldRunJson(const fs::path& path, nlohmann::json& record) {
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

std::map<std::string, const nlohmann::json*> LastByKey(const std::vector<nlohmann::json>& records) {
  std::map<std::string, const nlohmann::json*> by_key;
  for (const auto& r : records) {
    if (r.contains("key") && r["key"].is_string()) by_key[r["key"].get<std::string>()] = &r;
  }
  return by_key;
}

}  // namespace frugal::apps
