// Compressor throughput. For each compressor, `iters` timed rounds (after `warmup` untimed ones)
// each take a sample of the memcpy baseline (memcpy_copies copies of numel floats between the
// baseline's own warm buffers), one Encode, then one Decode into a zeroed buffer (the zeroing is
// not timed); the medians give encode_gbps and decode_gbps, and the row's copies memcpy_gbps.
// The ratios divide by the median of every copy of the run, one baseline for all rows, and are
// left out, with the reason, when that baseline's spread says the machine was not still. Each
// round uses a new step so that stochastic compressors draw fresh randomness, as in training.
#include "compress_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench_util.h"
#include "frugal/compress_wire.h"
#include "frugal/compressor.h"
#include "frugal/random.h"
#include "frugal/timer.h"

namespace frugal::bench {

std::vector<std::string> DefaultCompressBenchSpecs() {
  return {"none",   "fp16", "bf16",   "minmax8", "qsgd",   "terngrad",
          "onebit", "sign", "signum", "efsign",  "natural"};
}

size_t CompressBenchRows(const CompressBenchOptions& options) {
  if (options.rows > 0) return options.rows;
  size_t rows = static_cast<size_t>(std::sqrt(static_cast<double>(options.numel)));
  while (rows > 1 && (rows * rows > options.numel || options.numel % rows != 0)) --rows;
  return std::max<size_t>(rows, 1);
}

Status ValidateCompressBenchOptions(const CompressBenchOptions& options) {
  if (options.numel == 0) return InvalidArgumentError("--numel must be positive");
  if (options.numel > (size_t{1} << 31)) {
    return InvalidArgumentError(
        fmt::format("--numel {} is too large (at most 2^31)", options.numel));
  }
  if (options.iters < 1) return InvalidArgumentError("--iters must be at least 1");
  if (options.memcpy_copies < 1) return InvalidArgumentError("--memcpy-copies must be at least 1");
  if (!(options.max_baseline_spread > 0)) {
    return InvalidArgumentError("--max-baseline-spread must be positive");
  }
  if (options.warmup < 0) return InvalidArgumentError("--warmup must not be negative");
  if (options.compressors.empty()) return InvalidArgumentError("--compressors: no spec given");
  if (options.rows > 0 && options.numel % options.rows != 0) {
    return InvalidArgumentError(
        fmt::format("--rows {} does not divide --numel {}", options.rows, options.numel));
  }
  CompressorRegistry registry = DefaultCompressorRegistry();
  for (const std::string& spec : options.compressors) {
    FRUGAL_RETURN_IF_ERROR(registry.Create(spec).status().Annotate("--compressors"));
  }
  return Status::Ok();
}

StatusOr<CompressBenchResult> RunCompressBench(const CompressBenchOptions& options) {
  FRUGAL_RETURN_IF_ERROR(ValidateCompressBenchOptions(options));
  const size_t n = options.numel;
  // A gradient-like input: normal values with a few large ones and exact zeros.
  std::vector<float> input(n);
  RngStream rng(RngKey{.seed = options.seed, .rank = 0, .step = 0, .tensor = 1});
  for (size_t i = 0; i < n; ++i) {
    double v = rng.Normal() * 1e-3;
    if (i % 997 == 0) v *= 30;
    if (i % 1009 == 0) v = 0;
    input[i] = static_cast<float>(v);
  }
  double input_norm = 0;
  for (float v : input) input_norm += double{v} * v;
  input_norm = std::sqrt(input_norm);

  std::vector<float> output(n, 0.0f);
  const double bytes = 4.0 * static_cast<double>(n);
  MemcpyBaseline baseline(MemcpyBaselineOptions{.bytes = 4 * n,
                                                .copies_per_sample = options.memcpy_copies,
                                                .max_spread = options.max_baseline_spread,
                                                .copy_timer = options.memcpy_timer});
  CompressorRegistry registry = DefaultCompressorRegistry();
  std::vector<CompressBenchRow> rows;
  const size_t rows_of_input = CompressBenchRows(options);
  const TensorInfo tensor = rows_of_input == 1
                                ? TensorInfo("bench", n)
                                : TensorInfo("bench", n,
                                             {static_cast<int64_t>(rows_of_input),
                                              static_cast<int64_t>(n / rows_of_input)});
  for (const std::string& spec : options.compressors) {
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> c, registry.Create(spec));
    CompressContext ctx(options.seed, 0, 1);
    std::vector<std::byte> payload;
    std::vector<double> encode_s, decode_s;
    const size_t first_copy = baseline.seconds().size();
    for (int round = 0; round < options.warmup + options.iters; ++round) {
      ctx.set_step(static_cast<uint64_t>(round));
      if (round >= options.warmup) baseline.Sample();
      Stopwatch encode_watch;
      FRUGAL_RETURN_IF_ERROR(c->Encode(input, tensor, ctx, payload).Annotate(spec));
      double encode_time = encode_watch.Seconds();
      std::fill(output.begin(), output.end(), 0.0f);
      Stopwatch decode_watch;
      FRUGAL_RETURN_IF_ERROR(c->Decode(payload, tensor, ctx, output).Annotate(spec));
      double decode_time = decode_watch.Seconds();
      if (round >= options.warmup) {
        encode_s.push_back(encode_time);
        decode_s.push_back(decode_time);
      }
    }
    CompressBenchRow row;
    row.compressor = c->spec();
    row.numel = n;
    row.rows = rows_of_input;
    row.iters = options.iters;
    row.wire_bytes = payload.size();
    row.bits_per_element = 8.0 * static_cast<double>(payload.size()) / static_cast<double>(n);
    if (std::optional<uint64_t> bits = c->EntropyCodedBits(payload)) {
      row.entropy_coded_bytes = kWireHeaderBytes + (*bits + 7) / 8;
    }
    row.encode_gbps = bytes / Median(encode_s) / 1e9;
    row.decode_gbps = bytes / Median(decode_s) / 1e9;
    row.memcpy_gbps = bytes /
                      Median({baseline.seconds().begin() + static_cast<std::ptrdiff_t>(first_copy),
                              baseline.seconds().end()}) /
                      1e9;
    double err = 0;
    for (size_t i = 0; i < n; ++i) {
      double d = double{output[i]} - input[i];
      err += d * d;
    }
    row.rel_error = input_norm > 0 ? std::sqrt(err) / input_norm : 0;
    rows.push_back(std::move(row));
  }
  CompressBenchResult result;
  result.baseline = baseline.Summary();
  result.refusal = baseline.RatioRefusal();
  if (!result.refusal) {
    for (CompressBenchRow& row : rows) {
      row.encode_vs_memcpy = row.encode_gbps / result.baseline.median_gbps;
      row.decode_vs_memcpy = row.decode_gbps / result.baseline.median_gbps;
    }
  }
  result.rows = std::move(rows);
  return result;
}

namespace {

std::string Ratio(const std::optional<double>& ratio) {
  return ratio ? fmt::format("{:.2f}", *ratio) : "-";
}

}  // namespace

std::string CompressTable(const CompressBenchResult& result) {
  Table table({"compressor", "wire bytes", "bits/elem", "encode GB/s", "decode GB/s", "memcpy GB/s",
               "enc/memcpy", "dec/memcpy", "rel. error"},
              {true});
  for (const auto& r : result.rows) {
    table.AddRow({r.compressor, std::to_string(r.wire_bytes),
                  fmt::format("{:.3f}", r.bits_per_element), fmt::format("{:.2f}", r.encode_gbps),
                  fmt::format("{:.2f}", r.decode_gbps), fmt::format("{:.2f}", r.memcpy_gbps),
                  Ratio(r.encode_vs_memcpy), Ratio(r.decode_vs_memcpy),
                  fmt::format("{:.2e}", r.rel_error)});
  }
  std::string out = table.Render();
  const BaselineSummary& b = result.baseline;
  out += fmt::format(
      "memcpy baseline: {:.2f} GB/s, median of {} copies (p10-p90 {:.2f}-{:.2f} GB/s, spread "
      "{:.1f}%){}\n",
      b.median_gbps, b.copies, b.p10_gbps, b.p90_gbps, 100 * b.spread,
      result.refusal ? "" : "; enc/memcpy and dec/memcpy divide by it");
  if (result.refusal) out += fmt::format("no enc/memcpy, dec/memcpy: {}\n", *result.refusal);
  for (const auto& r : result.rows) {
    if (r.entropy_coded_bytes) {
      out += fmt::format("{}: Elias-gamma coded size {} bytes ({:.3f} bits/elem)\n", r.compressor,
                         *r.entropy_coded_bytes,
                         8.0 * static_cast<double>(*r.entropy_coded_bytes) / r.numel);
    }
  }
  return out;
}

std::vector<nlohmann::json> CompressJson(const CompressBenchResult& result) {
  std::vector<nlohmann::json> out;
  for (const auto& r : result.rows) {
    nlohmann::json j = {{"bench", "compress"},
                        {"compressor", r.compressor},
                        {"numel", r.numel},
                        {"rows", r.rows},
                        {"iters", r.iters},
                        {"encode_gbps", r.encode_gbps},
                        {"decode_gbps", r.decode_gbps},
                        {"memcpy_gbps", r.memcpy_gbps},
                        {"memcpy_baseline_gbps", result.baseline.median_gbps},
                        {"memcpy_baseline_copies", result.baseline.copies},
                        {"memcpy_baseline_spread", result.baseline.spread},
                        {"wire_bytes", r.wire_bytes},
                        {"bits_per_element", r.bits_per_element},
                        {"rel_error", r.rel_error}};
    if (r.entropy_coded_bytes) j["entropy_coded_bytes"] = *r.entropy_coded_bytes;
    if (result.refusal) {
      j["ratio_refused"] = *result.refusal;
    } else {
      j["encode_vs_memcpy"] = *r.encode_vs_memcpy;
      j["decode_vs_memcpy"] = *r.decode_vs_memcpy;
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace frugal::bench
