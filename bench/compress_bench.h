// `frugal bench compress`: encode and decode throughput of compressors (GB/s of float32 input),
// each compared with memcpy bandwidth measured in the same run, interleaved with it, plus the
// exact wire size and the reconstruction error. Single process, single thread.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frugal/status.h"

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
  double memcpy_gbps = 0;  // median of the memcpy runs interleaved with this row's
  double rel_error = 0;    // ||D(C(x)) - x|| / ||x||
};

StatusOr<std::vector<CompressBenchRow>> RunCompressBench(const CompressBenchOptions& options);

std::string CompressTable(const std::vector<CompressBenchRow>& rows);
std::vector<nlohmann::json> CompressJson(const std::vector<CompressBenchRow>& rows);

}  // namespace frugal::bench
