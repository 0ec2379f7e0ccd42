// `frugal bench polar`: distortion of the polar compressor against rate for a chosen source and
// block lengths, with the bound it cannot beat beside every row, and encode/decode throughput
// against memcpy measured in the same run. Single process, single thread.
//
// Distortion: with mode=sign, the fraction of positions whose sign the decoded block flips
// (Hamming distortion of the sign source), against h^-1(1 - R); with mode=soft, the normalized
// squared error ||p - p^||^2 / ||p||^2, against the least error any code that reconstructs each
// element of a block as +-alpha (one alpha per block) can reach at R bits per element on each
// block's distribution (BlockBound). For an i.i.d. source one alpha per block gains nothing; a
// real gradient, whose scale changes across the tensor, gains much.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "frugal/status.h"

namespace frugal::bench {

struct PolarBenchOptions {
  // bss (Bernoulli(1/2) signs), gaussian, laplace, or (external) values the caller puts in
  // `data` before RunPolarBench (a file, a gradient; `source` names it).
  std::string source = "bss";
  bool external = false;
  std::vector<float> data;
  std::vector<int> log_sizes = {8, 9, 10, 11};  // n: blocks of N = 2^n
  std::vector<double> rates = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
  size_t blocks = 1000;  // blocks per row (with `data`: at most as many as it holds)
  std::string mode;      // sign or soft; empty: sign for bss, soft otherwise
  std::string construct = "pw";
  int list = 1;
  int iters = 3;  // timed encodes and decodes per row (the medians are reported)
  uint64_t seed = 1;
};

// The sources drawn by the benchmark itself.
bool IsGeneratedPolarSource(const std::string& source);

// kInvalidArgument for bad sizes, rates, counts or parameters, before anything runs (an external
// source's values are checked when `data` holds them).
Status ValidatePolarBenchOptions(const PolarBenchOptions& options);

struct PolarBenchRow {
  std::string source;
  std::string compressor;  // the canonical spec
  std::string mode;
  int n = 0;
  double rate = 0;
  size_t blocks = 0;
  size_t numel = 0;
  double bits_per_element = 0;  // of the payload, header included
  double distortion = 0;        // mean over the blocks
  double stderr_mean = 0;       // standard error of that mean (block-to-block spread)
  double bound = 0;
  double encode_meps = 0;  // million elements per second (median)
  double decode_meps = 0;
  double memcpy_meps = 0;  // memcpy of the same float32 input, interleaved
};

StatusOr<std::vector<PolarBenchRow>> RunPolarBench(const PolarBenchOptions& options);

// The least normalized squared error of a code that reconstructs x_i as alpha s_i (s_i = +-1) at
// `rate` bits per element, for the empirical distribution of `magnitudes` (|x_i|): the sign of
// x_i is flipped with probability q(|x|) = 1 / (1 + exp(c |x|)), c chosen so that the mean of
// 1 - h(q) is `rate` (the optimal test channel), and the error is 1 - E[|x|(1 - 2q)]^2 / E[x^2].
// Of more than 2^12 values, 2^12 evenly spaced order statistics are used.
double PlusMinusAlphaLimit(std::span<const float> values, double rate);

// PlusMinusAlphaLimit of each block of `block` values of `input`, weighted by the block's energy.
double BlockBound(const std::vector<float>& input, size_t block, double rate);

// h^-1(1 - rate): the least Hamming distortion of a binary symmetric source at `rate`.
double BinarySymmetricBound(double rate);

std::string PolarTable(const std::vector<PolarBenchRow>& rows);
std::vector<nlohmann::json> PolarJson(const std::vector<PolarBenchRow>& rows);

}  // namespace frugal::bench
