// The fortunes corpus (see text_corpus.h).
#include "frugal_torch/text_corpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "frugal/random.h"

namespace frugal_torch {
namespace {

namespace fs = std::filesystem;

// Appends the windows of `codes` (source `source`) to `set`.
void AppendWindows(const std::vector<uint8_t>& codes, int64_t length, uint8_t source,
                   ImageSet& set) {
  const size_t l = static_cast<size_t>(length);
  for (size_t begin = 0; begin + l + 1 <= codes.size(); begin += l) {
    for (size_t i = 0; i < l; ++i) set.images.push_back(static_cast<float>(codes[begin + i]));
    set.targets.insert(set.targets.end(), codes.begin() + static_cast<std::ptrdiff_t>(begin + 1),
                       codes.begin() + static_cast<std::ptrdiff_t>(begin + l + 1));
    set.labels.push_back(source);
    ++set.count;
  }
}

frugal::Status NotInstalled(const std::string& dir, const std::string& what) {
  return frugal::NotFoundError(fmt::format("fortunes corpus {} {} (install the Debian packages {})",
                                           dir, what, kFortunesPackages));
}

}  // namespace

int CharCode(unsigned char c) {
  if (c == '\n') return 1;
  if (c >= 32 && c <= 126) return 2 + (c - 32);
  return 0;
}

frugal::StatusOr<TextCorpus> LoadFortunes(const std::string& dir,
                                          const TextCorpusOptions& options) {
  FRUGAL_CHECK_GT(options.sequence_length, 0);
  FRUGAL_CHECK(options.test_fraction >= 0 && options.test_fraction < 1, "test fraction ",
               options.test_fraction);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotInstalled(dir, "not found");
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_symlink(ec) || !entry.is_regular_file(ec)) continue;
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".dat")) continue;
    names.push_back(name);
  }
  if (ec) return frugal::IoError(fmt::format("cannot list {}: {}", dir, ec.message()));
  if (names.empty()) return NotInstalled(dir, "has no fortune files");
  if (names.size() > 256) {
    return frugal::InvalidArgumentError(
        fmt::format("fortunes corpus {}: {} files, at most 256 sources", dir, names.size()));
  }
  std::sort(names.begin(), names.end());

  TextCorpus corpus;
  corpus.sources = names;
  for (ImageSet* set : {&corpus.data.train, &corpus.data.test}) {
    set->rows = 1;
    set->cols = static_cast<int>(options.sequence_length);
  }
  for (size_t source = 0; source < names.size(); ++source) {
    const std::string path = dir + "/" + names[source];
    std::ifstream in(path, std::ios::binary);
    if (!in) return frugal::IoError("cannot read " + path);
    frugal::RngStream rng(frugal::RngKey{options.split_seed, frugal::kAnyRank, 0,
                                         frugal::TensorId("fortunes/split/" + names[source])});
    std::vector<uint8_t> train;
    std::vector<uint8_t> test;
    std::string fortune;
    auto flush = [&] {
      if (fortune.empty()) return;
      std::vector<uint8_t>& to = rng.UniformDouble() < options.test_fraction ? test : train;
      fortune += "%\n";
      for (char c : fortune) to.push_back(static_cast<uint8_t>(CharCode(static_cast<uint8_t>(c))));
      fortune.clear();
    };
    std::string line;
    while (std::getline(in, line)) {
      if (line == "%") {
        flush();
      } else {
        fortune += line;
        fortune += '\n';
      }
    }
    if (in.bad()) return frugal::IoError("cannot read " + path);
    flush();
    AppendWindows(train, options.sequence_length, static_cast<uint8_t>(source), corpus.data.train);
    AppendWindows(test, options.sequence_length, static_cast<uint8_t>(source), corpus.data.test);
  }
  if (corpus.data.train.count == 0 || (options.test_fraction > 0 && corpus.data.test.count == 0)) {
    return NotInstalled(dir, "holds too little text");
  }
  return corpus;
}

}  // namespace frugal_torch
