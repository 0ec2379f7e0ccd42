// The text corpus of the character-level language model (`--model charlstm --dataset fortunes`):
// the fortune files of Debian's fortunes and fortunes-min packages (/usr/share/games/fortunes/,
// about 2.5 MB of English text in 43 files), read at run time from the installed package.
//
// LoadFortunes reads every regular file of the directory whose name does not end in ".dat"
// (symbolic links, such as the packages' ".u8" aliases, are skipped), in name order; file i is
// source i. A file is a list of fortunes separated by lines holding only "%". Each fortune goes
// to the test set with probability test_fraction, drawn from the stream (split_seed, any rank,
// 0, TensorId("fortunes/split/" + file name)) one draw per fortune in file order, otherwise to
// the training set: a split fixed by split_seed, the same in every run and on every rank.
// Per source and per split the chosen fortunes are concatenated, each followed by "%\n", and
// the characters are mapped to codes (CharCode). The stream of codes is cut into consecutive
// windows of sequence_length + 1 codes overlapping by one: window k holds codes
// kL .. kL + L, its inputs are the first L, its targets the last L (the next character of each
// input position). A stream's tail shorter than a window is dropped.
//
// The result uses the ImageSet layout: count windows, rows = 1, cols = L, `images` holds the
// input codes as floats (exact), `targets` the count x L target codes, and `labels` the source
// index of each window, which the partitions use as its class: `--partition source` gives each
// rank or client whole source files (SourceSplit), `dirichlet:ALPHA` Dirichlet mixtures of them.
// Windows are stored source by source, in text order.
//
// Errors: a missing directory, or one without fortune files, is kNotFound naming the packages;
// a directory with more than 256 sources is kInvalidArgument; an unreadable file kIoError.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frugal/status.h"
#include "frugal_torch/data.h"

namespace frugal_torch {

inline constexpr char kFortunesDir[] = "/usr/share/games/fortunes";
inline constexpr char kFortunesPackages[] = "fortunes and fortunes-min";

// Character codes: 0 any other byte, 1 newline, 2 + (c - 32) for the printable ASCII c in
// [32, 126].
inline constexpr int kCharVocabulary = 97;
int CharCode(unsigned char c);

struct TextCorpusOptions {
  int64_t sequence_length = 64;  // L
  double test_fraction = 0.1;
  uint64_t split_seed = 1;
};

struct TextCorpus {
  FashionMnist data;                 // train and test windows (see above)
  std::vector<std::string> sources;  // file names, by source index
};

frugal::StatusOr<TextCorpus> LoadFortunes(const std::string& dir = kFortunesDir,
                                          const TextCorpusOptions& options = {});

}  // namespace frugal_torch
