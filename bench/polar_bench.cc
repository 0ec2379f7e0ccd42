// Polar distortion against rate. For every (n, rate) the source's first blocks * 2^n values are
// encoded by "polar:ef=0,n=..,rate=..,mode=..,construct=..,list=.." and decoded; the distortion is
// pooled over the blocks and its standard error taken from the spread of the per-block values.
// Throughput: `iters` rounds each time one memcpy of the input, one Encode and one Decode (into a
// zeroed buffer, the zeroing not timed); medians, in million elements per second.
#include "polar_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "bench_util.h"
#include "frugal/compressor.h"
#include "frugal/random.h"
#include "frugal/timer.h"

namespace frugal::bench {
namespace {

double Entropy(double q) {
  if (q <= 0.0 || q >= 1.0) return 0.0;
  return -q * std::log2(q) - (1.0 - q) * std::log2(1.0 - q);
}

std::vector<float> Generate(const std::string& source, size_t n, uint64_t seed) {
  RngStream rng(RngKey{.seed = seed, .rank = 0, .step = 0, .tensor = TensorId(source)});
  std::vector<float> v(n);
  for (float& x : v) {
    if (source == "bss") {
      x = (rng.NextU64() & 1u) ? -1.0f : 1.0f;
    } else if (source == "gaussian") {
      x = static_cast<float>(rng.Normal());
    } else {
      // Laplace(0, 1): the difference of two unit exponentials.
      x = static_cast<float>(std::log(1.0 - rng.UniformDouble()) -
                             std::log(1.0 - rng.UniformDouble()));
    }
  }
  return v;
}

}  // namespace

// The +-alpha limit of each block, pooled over the blocks as the distortion is (weighted by each
// block's energy): the limit of any code with one alpha and R bits per element in every block.
double BlockBound(const std::vector<float>& input, size_t block, double rate) {
  double err = 0, energy = 0;
  for (size_t first = 0; first < input.size(); first += block) {
    const std::span<const float> b(input.data() + first, block);
    double e = 0;
    for (float v : b) e += double{v} * v;
    err += e * PlusMinusAlphaLimit(b, rate);
    energy += e;
  }
  return energy > 0 ? err / energy : 0.0;
}

namespace {

std::string ModeOf(const PolarBenchOptions& options) {
  if (!options.mode.empty()) return options.mode;
  return options.source == "bss" ? "sign" : "soft";
}

}  // namespace

bool IsGeneratedPolarSource(const std::string& source) {
  return source == "bss" || source == "gaussian" || source == "laplace";
}

double BinarySymmetricBound(double rate) {
  // At R >= 1 every sign can be kept; at R <= 0 none: the bisection would only approach these.
  if (rate >= 1.0) return 0.0;
  if (rate <= 0.0) return 0.5;
  double lo = 0.0, hi = 0.5;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (Entropy(mid) < 1.0 - rate ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double PlusMinusAlphaLimit(std::span<const float> all, double rate) {
  // Beyond 2^12 values, 2^12 evenly spaced order statistics stand for the distribution.
  constexpr size_t kSample = size_t{1} << 12;
  std::vector<float> magnitudes;
  if (all.size() <= kSample) {
    magnitudes.assign(all.begin(), all.end());
  } else {
    std::vector<float> sorted(all.size());
    for (size_t i = 0; i < all.size(); ++i) sorted[i] = std::fabs(all[i]);
    std::sort(sorted.begin(), sorted.end());
    magnitudes.resize(kSample);
    for (size_t j = 0; j < kSample; ++j) {
      magnitudes[j] = sorted[(2 * j + 1) * sorted.size() / (2 * kSample)];
    }
  }
  double mean = 0, energy = 0;
  for (float a : magnitudes) {
    mean += std::fabs(a);
    energy += double{a} * a;
  }
  if (magnitudes.empty() || energy == 0) return 0.0;
  mean /= static_cast<double>(magnitudes.size());
  energy /= static_cast<double>(magnitudes.size());
  // rate(c) = mean of 1 - h(q), q = 1 / (1 + exp(c |x|)); correlation(c) = mean |x| tanh(c|x|/2).
  auto evaluate = [&](double c, double* correlation) {
    double r = 0, corr = 0;
    for (float a : magnitudes) {
      const double t = c * std::fabs(a);
      const double q = 1.0 / (1.0 + std::exp(t));
      r += 1.0 - Entropy(q);
      corr += std::fabs(a) * std::tanh(0.5 * t);
    }
    *correlation = corr / static_cast<double>(magnitudes.size());
    return r / static_cast<double>(magnitudes.size());
  };
  double lo = std::log(1e-6), hi = std::log(1e6), correlation = 0;
  for (int i = 0; i < 48; ++i) {
    const double mid = 0.5 * (lo + hi);
    (evaluate(std::exp(mid) / mean, &correlation) < rate ? lo : hi) = mid;
  }
  evaluate(std::exp(0.5 * (lo + hi)) / mean, &correlation);
  return 1.0 - correlation * correlation / energy;
}

Status ValidatePolarBenchOptions(const PolarBenchOptions& options) {
  if (!IsGeneratedPolarSource(options.source) && !options.external) {
    return InvalidArgumentError(
        fmt::format("--source {}: not bss, gaussian, laplace or a file of values", options.source));
  }
  if (options.log_sizes.empty()) return InvalidArgumentError("--n: no block length given");
  for (int n : options.log_sizes) {
    if (n < 4 || n > 20) return InvalidArgumentError(fmt::format("--n {} is not in [4, 20]", n));
    if (!options.data.empty() && options.data.size() < (size_t{1} << n)) {
      return InvalidArgumentError(
          fmt::format("--source {}: {} values do not fill one block of 2^{}", options.source,
                      options.data.size(), n));
    }
  }
  if (options.rates.empty()) return InvalidArgumentError("--rates: no rate given");
  for (double r : options.rates) {
    if (!(r >= 0.0 && r <= 1.0)) {
      return InvalidArgumentError(fmt::format("--rates: {} is not in [0, 1]", r));
    }
  }
  if (options.blocks < 1) return InvalidArgumentError("--blocks must be at least 1");
  if (options.blocks > (size_t{1} << 16)) {
    return InvalidArgumentError(fmt::format("--blocks {} is more than 65536", options.blocks));
  }
  for (int n : options.log_sizes) {
    if (IsGeneratedPolarSource(options.source) && (options.blocks << n) > (size_t{1} << 28)) {
      return InvalidArgumentError(
          fmt::format("--blocks {} of 2^{} is more than 2^28 values", options.blocks, n));
    }
  }
  if (options.iters < 1) return InvalidArgumentError("--iters must be at least 1");
  const std::string mode = ModeOf(options);
  if (mode != "sign" && mode != "soft") {
    return InvalidArgumentError(fmt::format("--mode {}: not sign or soft", mode));
  }
  // The compressor checks construct and list.
  CompressorRegistry registry = DefaultCompressorRegistry();
  return registry
      .Create(fmt::format("polar:ef=0,construct={},list={}", options.construct, options.list))
      .status();
}

StatusOr<std::vector<PolarBenchRow>> RunPolarBench(const PolarBenchOptions& options) {
  FRUGAL_RETURN_IF_ERROR(ValidatePolarBenchOptions(options));
  if (options.external && options.data.empty()) {
    return InvalidArgumentError(fmt::format("--source {}: no values", options.source));
  }
  const std::string mode = ModeOf(options);
  CompressorRegistry registry = DefaultCompressorRegistry();
  std::vector<PolarBenchRow> rows;
  for (int n : options.log_sizes) {
    const size_t block = size_t{1} << n;
    size_t blocks = options.blocks;
    if (options.external) blocks = std::min(blocks, options.data.size() / block);
    const size_t numel = blocks * block;
    const std::vector<float> input =
        !options.external
            ? Generate(options.source, numel, options.seed)
            : std::vector<float>(options.data.begin(),
                                 options.data.begin() + static_cast<std::ptrdiff_t>(numel));
    const TensorInfo tensor("bench", numel);
    std::vector<float> copy(numel), output(numel);
    for (double rate : options.rates) {
      const std::string spec = fmt::format("polar:ef=0,n={},rate={},mode={},construct={},list={}",
                                           n, rate, mode, options.construct, options.list);
      FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> c, registry.Create(spec));
      CompressContext ctx(options.seed, 0, 1);
      std::vector<std::byte> payload;
      std::vector<double> encode_s, decode_s, memcpy_s;
      for (int round = 0; round < options.iters; ++round) {
        Stopwatch copy_watch;
        std::memcpy(copy.data(), input.data(), 4 * numel);
        memcpy_s.push_back(copy_watch.Seconds());
        Stopwatch encode_watch;
        FRUGAL_RETURN_IF_ERROR(c->Encode(input, tensor, ctx, payload).Annotate(spec));
        encode_s.push_back(encode_watch.Seconds());
        std::fill(output.begin(), output.end(), 0.0f);
        Stopwatch decode_watch;
        FRUGAL_RETURN_IF_ERROR(c->Decode(payload, tensor, ctx, output).Annotate(spec));
        decode_s.push_back(decode_watch.Seconds());
      }
      if (copy[numel / 2] != input[numel / 2]) return InternalError("memcpy did not copy");
      PolarBenchRow row;
      row.source = options.source;
      row.compressor = c->spec();
      row.mode = mode;
      row.n = n;
      row.rate = rate;
      row.blocks = blocks;
      row.numel = numel;
      row.bits_per_element = 8.0 * static_cast<double>(payload.size()) / static_cast<double>(numel);
      std::vector<double> per_block(blocks);
      double err_total = 0, energy_total = 0;
      for (size_t b = 0; b < blocks; ++b) {
        double err = 0, energy = 0;
        for (size_t i = b * block; i < (b + 1) * block; ++i) {
          if (mode == "sign") {
            err += (input[i] < 0) != (output[i] < 0);
            energy += 1;
          } else {
            const double d = double{input[i]} - output[i];
            err += d * d;
            energy += double{input[i]} * input[i];
          }
        }
        per_block[b] = energy > 0 ? err / energy : 0.0;
        err_total += err;
        energy_total += energy;
      }
      row.distortion = energy_total > 0 ? err_total / energy_total : 0.0;
      double spread = 0;
      for (double v : per_block) spread += (v - row.distortion) * (v - row.distortion);
      row.stderr_mean =
          blocks > 1
              ? std::sqrt(spread / static_cast<double>(blocks - 1) / static_cast<double>(blocks))
              : 0.0;
      row.bound = mode == "sign" ? BinarySymmetricBound(rate) : BlockBound(input, block, rate);
      const double elements = static_cast<double>(numel) / 1e6;
      row.encode_meps = elements / Median(encode_s);
      row.decode_meps = elements / Median(decode_s);
      row.memcpy_meps = elements / Median(memcpy_s);
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::string PolarTable(const std::vector<PolarBenchRow>& rows) {
  Table table({"source", "mode", "N", "R", "blocks", "bits/elem", "distortion", "+-", "bound",
               "gap", "enc Melem/s", "dec Melem/s", "memcpy Melem/s", "enc/memcpy", "dec/memcpy"},
              {true, true});
  for (const auto& r : rows) {
    table.AddRow({r.source, r.mode, std::to_string(size_t{1} << r.n), fmt::format("{:.3g}", r.rate),
                  std::to_string(r.blocks), fmt::format("{:.4f}", r.bits_per_element),
                  fmt::format("{:.4f}", r.distortion), fmt::format("{:.4f}", r.stderr_mean),
                  fmt::format("{:.4f}", r.bound), fmt::format("{:.4f}", r.distortion - r.bound),
                  fmt::format("{:.1f}", r.encode_meps), fmt::format("{:.1f}", r.decode_meps),
                  fmt::format("{:.1f}", r.memcpy_meps),
                  fmt::format("{:.3f}", r.encode_meps / r.memcpy_meps),
                  fmt::format("{:.3f}", r.decode_meps / r.memcpy_meps)});
  }
  return table.Render();
}

std::vector<nlohmann::json> PolarJson(const std::vector<PolarBenchRow>& rows) {
  std::vector<nlohmann::json> out;
  for (const auto& r : rows) {
    out.push_back({{"bench", "polar"},
                   {"source", r.source},
                   {"compressor", r.compressor},
                   {"mode", r.mode},
                   {"n", r.n},
                   {"block", size_t{1} << r.n},
                   {"rate", r.rate},
                   {"blocks", r.blocks},
                   {"numel", r.numel},
                   {"bits_per_element", r.bits_per_element},
                   {"distortion", r.distortion},
                   {"distortion_stderr", r.stderr_mean},
                   {"bound", r.bound},
                   {"encode_meps", r.encode_meps},
                   {"decode_meps", r.decode_meps},
                   {"memcpy_meps", r.memcpy_meps},
                   {"encode_vs_memcpy", r.encode_meps / r.memcpy_meps},
                   {"decode_vs_memcpy", r.decode_meps / r.memcpy_meps}});
  }
  return out;
}

}  // namespace frugal::bench
