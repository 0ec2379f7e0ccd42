// The ranks' notes for the launcher's restarts (see restart_notes.h).
#include "restart_notes.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <vector>

namespace frugal::apps {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kProgressPrefix = ".progress-rank-";
constexpr std::string_view kFailurePrefix = ".failure-rank-";

// Every note file in `dir` whose name starts with `prefix`, ordered by name.
std::vector<fs::path> Notes(const std::string& dir, std::string_view prefix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().starts_with(prefix)) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReadLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The rank a note is about (the number after its prefix), or nullopt.
std::optional<int> NoteRank(const fs::path& path, std::string_view prefix) {
  const std::string name = path.filename().string().substr(prefix.size());
  char* end = nullptr;
  const long long rank = std::strtoll(name.c_str(), &end, 10);
  if (name.empty() || *end != '\0' || rank < 0 || rank > INT32_MAX) return std::nullopt;
  return static_cast<int>(rank);
}

}  // namespace

RestartNotes RestartNotes::FromEnvironment(int rank) {
  RestartNotes notes;
  const char* dir = std::getenv(kRestartNotesEnv);
  if (dir != nullptr) notes.dir_ = dir;
  notes.rank_ = rank;
  return notes;
}

void RestartNotes::Progress(int64_t completed) const {
  if (!active()) return;
  std::ofstream(fs::path(dir_) / fmt::format("{}{}", kProgressPrefix, rank_), std::ios::trunc)
      << completed << "\n";
}

void RestartNotes::Failure(const std::string& line) const {
  if (!active()) return;
  std::ofstream(fs::path(dir_) / fmt::format("{}{}", kFailurePrefix, rank_), std::ios::trunc)
      << line << "\n";
}

bool RelaysAnotherFailure(std::string_view line) {
  static const std::regex relayed(R"(\brank [0-9]+ failed: )");
  return std::regex_search(line.begin(), line.end(), relayed);
}

std::string OriginOfRelay(const std::string& line) {
  static const std::regex relay(
      R"(^rank ([0-9]+): (.*?)(?:worker )?\brank ([0-9]+) failed: (.*)$)");
  std::smatch m;
  if (!std::regex_match(line, m, relay)) return line;
  return fmt::format("rank {}: {}{} (passed on by rank {})", m[3].str(), m[2].str(), m[4].str(),
                     m[1].str());
}

std::optional<std::string> FailureCause(const std::string& dir) {
  struct Note {
    struct timespec mtime;
    int rank;
    std::string line;
  };
  std::optional<Note> own, relayed;
  const auto earlier = [](const Note& a, const std::optional<Note>& b) {
    if (!b) return true;
    if (a.mtime.tv_sec != b->mtime.tv_sec) return a.mtime.tv_sec < b->mtime.tv_sec;
    if (a.mtime.tv_nsec != b->mtime.tv_nsec) return a.mtime.tv_nsec < b->mtime.tv_nsec;
    return a.rank < b->rank;
  };
  for (const fs::path& p : Notes(dir, kFailurePrefix)) {
    const std::optional<int> rank = NoteRank(p, kFailurePrefix);
    struct stat st {};
    if (!rank || ::stat(p.c_str(), &st) != 0) continue;
    Note note{st.st_mtim, *rank, ReadLine(p)};
    std::optional<Note>& slot = RelaysAnotherFailure(note.line) ? relayed : own;
    if (earlier(note, slot)) slot = std::move(note);
  }
  if (own) return own->line;
  if (relayed) return OriginOfRelay(relayed->line);
  return std::nullopt;
}

std::map<int, int64_t> ProgressByRank(const std::string& dir) {
  std::map<int, int64_t> out;
  for (const fs::path& p : Notes(dir, kProgressPrefix)) {
    const std::optional<int> rank = NoteRank(p, kProgressPrefix);
    const std::string line = ReadLine(p);
    char* end = nullptr;
    const long long v = std::strtoll(line.c_str(), &end, 10);
    if (!rank || line.empty() || *end != '\0' || v < 0) continue;
    out[*rank] = v;
  }
  return out;
}

void RemoveRestartNotes(const std::string& dir) {
  std::error_code ec;
  for (std::string_view prefix : {kProgressPrefix, kFailurePrefix}) {
    for (const fs::path& p : Notes(dir, prefix)) fs::remove(p, ec);
  }
}

}  // namespace frugal::apps
