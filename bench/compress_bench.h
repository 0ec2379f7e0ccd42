// `frugal bench compress`: encode and decode throughput of compressors (GB/s of float32 input),
// each compared with memcpy bandwidth measured in the same run, interleaved with it
// (memcpy_baseline.h), plus the exact wire size and the reconstruction error. Single process,
// single thread.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frugal/status.h"
#include "memcpy_baseline.h"

namespace frugal::bench {

struct CompressBenchOptions {
  size_t numel = 25'000'000;
  std::vector<std::string> compressors;  // registry specs
  int iters = 5;                         // timed encodes (and decodes) per compressor
  int warmup = 1;
  uint64_t seed = 1;
  // The input is a rows x (numel / rows) matrix, as a layer's weight: compressors that work per
  // column (onebit) or on matrices (powersgd) see that shape. 0: the largest divisor of numel
  // not above its square root; 1: a flat vector.
  size_t rows = 0;
  // Timed copies of the input's size before every timed encode, and the largest spread of the
  // run's copies that still gives ratios (see memcpy_baseline.h).
  int memcpy_copies = 3;
  double max_baseline_spread = kDefaultMaxBaselineSpread;
  // Seconds of one memcpy; empty: real copies. Tests inject their own.
  std::function<double()> memcpy_timer;
};

// The rows of the benchmark's input: options.rows, or for 0 the largest divisor of numel that is
// at most sqrt(numel).
size_t CompressBenchRows(const CompressBenchOptions& options);

// Every quantizer with its defaults: none fp16 bf16 minmax8 qsgd terngrad onebit sign signum
// efsign natural.
std::vector<std::string> DefaultCompressBenchSpecs();

// kInvalidArgument / kNotFound for a bad count or spec, before anything runs.
Status ValidateCompressBenchOptions(const CompressBenchOptions& options);

struct CompressBenchRow {
  std::string compressor;  // canonical spec
  size_t numel = 0;
  size_t rows = 1;  // the input was rows x (numel / rows)
  int iters = 0;
  uint64_t wire_bytes = 0;  // the payload, header included
  double bits_per_element = 0;
  std::optional<uint64_t> entropy_coded_bytes;  // QSGD's Elias-gamma size (header included)
  double encode_gbps = 0;  // numel * 4 bytes / median encode time, GB = 1e9 bytes
  double decode_gbps = 0;
  double memcpy_gbps = 0;  // median of the copies interleaved with this row's encodes
  double rel_error = 0;    // ||D(C(x)) - x|| / ||x||
  // encode_gbps and decode_gbps over the run's baseline median; empty when the baseline refuses.
  std::optional<double> encode_vs_memcpy, decode_vs_memcpy;
};

struct CompressBenchResult {
  std::vector<CompressBenchRow> rows;
  BaselineSummary baseline;            // over every timed copy of the run
  std::optional<std::string> refusal;  // why no row has ratios
};

StatusOr<CompressBenchResult> RunCompressBench(const CompressBenchOptions& options);

// The table, then the baseline's line, then the refusal if any.
std::string CompressTable(const CompressBenchResult& result);
std::vector<nlohmann::json> CompressJson(const CompressBenchResult& result);

}  // namespace frugal::bench
