// The all-reduce benchmark.
//
// Calibration: ranks 0 and 1 ping-pong messages of 8 B to 4 MiB (MeasurePair). Alpha is the
// intercept of FitAlphaBeta over the small messages (8 B to 4 KiB, where latency dominates) and
// beta the slope of FitAlphaBeta over the large ones (256 KiB to 4 MiB, where bandwidth does),
// see FitByRange: one least-squares line over all sizes would let the large messages dictate
// alpha (often negative). Rank 0 times `a[i] += b[i]` over 16 MiB for gamma (seconds per byte
// reduced). AllreduceCost(algorithm, shape).Seconds(model) is the predicted time of each of
// frugal's algorithms.
//
// Measurement, for each size: every rank fills its input with small integers,
// x_r[i] = (7 i + 13 r + 1) mod 16, so that the sum over ranks is exact in float and the expected
// result is known. In each of `warmup` + `iters` rounds every name in `algorithms` takes its turn
// (interleaved, so that the load of a shared machine affects them alike): copy the input into
// the buffer (untimed), pass a timed Barrier, run the all-reduce under a Stopwatch and compare
// the whole buffer with the expected sum (untimed).
// MaxToRoot gives rank 0 the slowest rank's time of every timed iteration and the largest
// mismatch count; the row reports their median, algbw = bytes / time and busbw =
// algbw * 2(n-1)/n (nccl-tests; GB = 1e9 bytes), and `correct` when no rank ever mismatched.
// ratio_to_best_peer = (fastest correct peer's time) / (this time), so > 1 means faster than
// every peer.
//
// frugal's algorithms run with check_lengths off: every rank passes the same length by
// construction, and the peers do not check either.
#include "allreduce_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "bench_util.h"
#include "frugal/timer.h"
#include "pingpong.h"

namespace frugal::bench {
namespace {

float InputValue(size_t i, int rank) {
  return static_cast<float>((7 * i + 13 * static_cast<size_t>(rank) + 1) % 16);
}

bool IsPeerName(std::string_view name) { return name == kMpiPeerName || name == kGlooPeerName; }

// A case of frugal's as named on the command line, ALGO[@SEGMENT][:staged|:fused]: "ring" (on
// the shared buffer, no staging, the algorithm's default segment), "ring@256K" (segments of 256
// KiB whatever --segment-bytes says), "ring:staged" (through the transport's staging copies, as on
// a buffer the transport does not share) or "ring:fused" (AllreduceFused of tensors of
// kFusedTensorCounts).
struct FrugalCase {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  std::optional<size_t> segment_bytes;
  bool staged = false;
  bool fused = false;
};
StatusOr<FrugalCase> ParseFrugalCase(std::string_view name) {
  FrugalCase parsed;
  std::string_view rest = name;
  if (rest.ends_with(kStagedSuffix)) {
    parsed.staged = true;
    rest.remove_suffix(kStagedSuffix.size());
  } else if (rest.ends_with(kFusedSuffix)) {
    parsed.fused = true;
    rest.remove_suffix(kFusedSuffix.size());
  }
  const size_t at = rest.find(kSegmentSeparator);
  if (at != std::string_view::npos) {
    StatusOr<size_t> segment = ParseByteSize(rest.substr(at + 1));
    if (!segment.ok() || *segment == 0) {
      return InvalidArgumentError(fmt::format("'{}': the segment after '{}' is not a positive size",
                                              name, kSegmentSeparator));
    }
    parsed.segment_bytes = *segment;
    rest = rest.substr(0, at);
  }
  StatusOr<AllreduceAlgorithm> algorithm = ParseAllreduceAlgorithm(rest);
  if (!algorithm.ok()) {
    std::string accepted;
    for (const auto& n : DefaultAllreduceNames()) accepted += (accepted.empty() ? "" : ", ") + n;
    return InvalidArgumentError(fmt::format(
        "unknown allreduce algorithm '{}' (accepted: {}, and any of frugal's as ALGO{}SEGMENT "
        "and ALGO{} or ALGO{})",
        name, accepted, kSegmentSeparator, kStagedSuffix, kFusedSuffix));
  }
  parsed.algorithm = *algorithm;
  return parsed;
}

// `count` floats cut into tensors of kFusedTensorCounts in turn, the last one taking the rest.
std::vector<size_t> FusedCounts(size_t count) {
  std::vector<size_t> counts;
  size_t left = count;
  for (size_t i = 0; left > 0; ++i) {
    const size_t take = std::min(left, kFusedTensorCounts[i % std::size(kFusedTensorCounts)]);
    counts.push_back(take);
    left -= take;
  }
  return counts;
}

// Seconds per byte of `a[i] += b[i]` on float32, median of a few passes over 16 MiB.
double MeasureGamma() {
  const size_t count = size_t{4} << 20;
  std::vector<float> a(count, 1.0f);
  std::vector<float> b(count, 2.0f);
  std::vector<double> seconds;
  for (int pass = 0; pass < 7; ++pass) {
    Stopwatch watch;
    float* __restrict pa = a.data();
    const float* __restrict pb = b.data();
    for (size_t i = 0; i < count; ++i) pa[i] += pb[i];
    seconds.push_back(watch.Seconds());
    // Keep the loop from being optimised away.
    if (a[pass] < 0) a[0] = 0;
  }
  return Median(seconds) / static_cast<double>(count * sizeof(float));
}

// The hosts of the ranks, in rank order.
StatusOr<std::vector<std::string>> Hostnames(Transport& t, Duration timeout) {
  std::string host = t.hostname();
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  FRUGAL_RETURN_IF_ERROR(Allgatherv(t, std::as_bytes(std::span<const char>(host)), all, sizes,
                                    CollectiveOptions{timeout, false}));
  std::vector<std::string> hosts;
  size_t offset = 0;
  for (size_t size : sizes) {
    hosts.emplace_back(reinterpret_cast<const char*>(all.data()) + offset, size);
    offset += size;
  }
  return hosts;
}

}  // namespace

std::vector<size_t> DefaultAllreduceSizes() {
  return {size_t{4} << 10, size_t{64} << 10, size_t{1} << 20, size_t{16} << 20, size_t{64} << 20};
}

std::vector<std::string> DefaultAllreduceNames() {
  std::vector<std::string> names;
  for (AllreduceAlgorithm a : AllAllreduceAlgorithms()) {
    names.emplace_back(AllreduceAlgorithmName(a));
  }
  names.emplace_back(kMpiPeerName);
  if (GlooAvailable()) names.emplace_back(kGlooPeerName);
  return names;
}

double AllreduceBusBandwidth(double algbw, int ranks) {
  return ranks > 0 ? algbw * 2.0 * (ranks - 1) / ranks : 0.0;
}

Status ValidateAllreduceBenchOptions(const AllreduceBenchOptions& options) {
  if (options.sizes.empty()) return InvalidArgumentError("no sizes to measure");
  for (size_t size : options.sizes) {
    if (size == 0 || size % sizeof(float) != 0) {
      return InvalidArgumentError(
          fmt::format("size {} is not a positive multiple of 4 bytes (float32 elements)", size));
    }
    if (size / sizeof(float) > static_cast<size_t>(INT32_MAX)) {
      return InvalidArgumentError(fmt::format("size {} is too large for the peers", size));
    }
  }
  if (options.algorithms.empty()) return InvalidArgumentError("no algorithms to measure");
  std::set<std::string> seen;
  for (const auto& name : options.algorithms) {
    if (name == kGlooPeerName && !GlooAvailable()) {
      return InvalidArgumentError("'gloo' is not available: frugal was built without Gloo");
    }
    if (!IsPeerName(name)) {
      FRUGAL_RETURN_IF_ERROR(ParseFrugalCase(name).status());
    }
    if (!seen.insert(name).second) {
      return InvalidArgumentError(fmt::format("algorithm '{}' is listed twice", name));
    }
  }
  if (options.iters < 1) return InvalidArgumentError("--iters must be at least 1");
  if (options.warmup < 0) return InvalidArgumentError("--warmup must not be negative");
  if (options.timeout.count() <= 0) return InvalidArgumentError("the timeout must be positive");
  if (options.segment_bytes == 0u) {
    return InvalidArgumentError("--segment-bytes must be positive");
  }
  if (options.ranks_per_host < 0 || options.torus_rows < 0) {
    return InvalidArgumentError("--ranks-per-host and --torus-rows must not be negative");
  }
  return Status::Ok();
}

StatusOr<AllreduceBenchReport> RunAllreduceBench(Transport& t, const AllreduceBenchOptions& options,
                                                 const Logger& logger) {
  FRUGAL_RETURN_IF_ERROR(ValidateAllreduceBenchOptions(options));
  const int n = t.size();
  const int rank = t.rank();
  const CollectiveOptions sync{options.timeout, false};
  AllreduceBenchReport report;
  report.ranks = n;

  // 1. Calibrate the model.
  if (n >= 2) {
    if (rank <= 1) {
      PingPongOptions calibration;
      calibration.sizes = {8, 64, 512, 4 << 10, 256 << 10, 1 << 20, 4 << 20};
      calibration.warmup = 2;
      calibration.target_seconds = 0.03;
      calibration.timeout = options.timeout;
      FRUGAL_ASSIGN_OR_RETURN(PingPongPair pair, MeasurePair(t, 0, 1, calibration));
      if (rank == 0) {
        RangeFits fits = FitByRange(pair.samples);
        if (fits.latency && fits.bandwidth) {
          report.latency_fit = *fits.latency;
          report.bandwidth_fit = *fits.bandwidth;
          report.fitted = true;
        }
      }
    }
  }
  if (rank == 0) {
    report.model.alpha = std::max(report.latency_fit.alpha, 0.0);
    report.model.beta = std::max(report.bandwidth_fit.beta, 0.0);
    report.model.gamma = MeasureGamma();
  }
  FRUGAL_RETURN_IF_ERROR(Barrier(t, sync));

  // 2. Shape of the job for the model.
  FRUGAL_ASSIGN_OR_RETURN(std::vector<std::string> hosts, Hostnames(t, options.timeout));
  const int host_count = static_cast<int>(std::set<std::string>(hosts.begin(), hosts.end()).size());
  const int ranks_per_host = options.ranks_per_host > 0 ? options.ranks_per_host
                                                        : std::max(1, n / std::max(host_count, 1));

  // 3. Cases: the direct all-reduce only where the ranks can map each other's memory (the same
  // answer on every rank); peers, in a fixed order on every rank.
  std::vector<std::string> algorithms;
  for (const auto& name : options.algorithms) {
    if (!IsPeerName(name) && !t.SharesMemoryWithPeers() &&
        ParseFrugalCase(name)->algorithm == AllreduceAlgorithm::kDirect) {
      if (rank == 0) {
        logger.Warning(
            fmt::format("{} left out: the ranks cannot map each other's memory (not "
                        "one machine, or emulated hosts)",
                        name));
      }
      continue;
    }
    algorithms.push_back(name);
  }
  if (algorithms.empty()) return InvalidArgumentError("no algorithms to measure on these ranks");
  std::map<std::string, std::unique_ptr<AllreducePeer>> peers;
  for (const auto& name : algorithms) {
    if (name == kMpiPeerName) {
      FRUGAL_ASSIGN_OR_RETURN(peers[name], MakeMpiPeer(t, options.timeout));
    } else if (name == kGlooPeerName) {
      GlooPeerOptions gloo = options.gloo;
      gloo.timeout = options.timeout;
      FRUGAL_ASSIGN_OR_RETURN(peers[name], MakeGlooPeer(t, gloo));
    }
  }

  // 4. Measure.
  for (size_t bytes : options.sizes) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> input(count);
    std::vector<float> expected(count, 0.0f);
    for (size_t i = 0; i < count; ++i) {
      input[i] = InputValue(i, rank);
      for (int r = 0; r < n; ++r) expected[i] += InputValue(i, r);
    }
    // Every case works on one buffer in memory shared with the transport (Transport::NewShared):
    // frugal's algorithms send from and receive into it without staging copies, except the
    // ALGO:staged cases, which do not tell the algorithm so and take the transport's copies.
    const SharedBytes memory = t.NewShared(count * sizeof(float));
    const std::span<float> data(reinterpret_cast<float*>(memory.bytes.data()), count);
    const size_t first_row = report.rows.size();
    const size_t cases = algorithms.size();
    std::vector<std::function<Status()>> runs(cases);
    std::vector<std::optional<AllreduceOptions>> frugal_options(cases);
    for (size_t c = 0; c < cases; ++c) {
      const std::string& name = algorithms[c];
      if (IsPeerName(name)) {
        AllreducePeer* peer = peers.at(name).get();
        runs[c] = [peer, &data] { return peer->Allreduce(data); };
      } else {
        const FrugalCase frugal_case = ParseFrugalCase(name).value();
        AllreduceOptions ar;
        ar.algorithm = frugal_case.algorithm;
        ar.op = ReduceOp::kSum;
        ar.timeout = options.timeout;
        ar.check_lengths = false;
        ar.segment_bytes =
            frugal_case.segment_bytes ? frugal_case.segment_bytes : options.segment_bytes;
        ar.ranks_per_host = options.ranks_per_host;
        ar.torus_rows = options.torus_rows;
        if (!frugal_case.staged) ar.data_owner = memory.owner;
        frugal_options[c] = ar;
        if (frugal_case.fused) {
          runs[c] = [&t, data, ar, counts = FusedCounts(count),
                     scratch = std::make_shared<SharedBytes>()] {
            return AllreduceFused(t, data, counts, ar, scratch.get());
          };
        } else {
          runs[c] = [&t, data, ar] { return Allreduce(t, data, ar); };
        }
      }
    }
    // values[c * (iters + 1) + k]: seconds of timed iteration k of case c; the last slot of each
    // case counts mismatching elements.
    const size_t stride = static_cast<size_t>(options.iters) + 1;
    std::vector<double> values(cases * stride, 0.0);
    for (int iter = 0; iter < options.warmup + options.iters; ++iter) {
      // The cases take turns, so that a change of load on the machine affects them alike.
      for (size_t c = 0; c < cases; ++c) {
        const std::string& name = algorithms[c];
        logger.Debug(fmt::format("allreduce {} of {} bytes, iteration {}", name, bytes, iter));
        std::copy(input.begin(), input.end(), data.begin());
        FRUGAL_RETURN_IF_ERROR(Barrier(t, sync));
        Stopwatch watch;
        Status status = runs[c]();
        const double seconds = watch.Seconds();
        FRUGAL_RETURN_IF_ERROR(
            status.Annotate(fmt::format("{} allreduce of {} bytes", name, bytes)));
        if (std::memcmp(data.data(), expected.data(), bytes) != 0) {
          double wrong = 0;
          for (size_t i = 0; i < count; ++i) wrong += data[i] != expected[i] ? 1 : 0;
          values[c * stride + stride - 1] += wrong;
          logger.Warning(fmt::format("{} allreduce of {} bytes: {} wrong elements in iteration {}",
                                     name, bytes, wrong, iter));
        }
        if (iter >= options.warmup) {
          values[c * stride + static_cast<size_t>(iter - options.warmup)] = seconds;
        }
      }
    }
    FRUGAL_RETURN_IF_ERROR(MaxToRoot(t, values, options.timeout));
    for (size_t c = 0; c < cases && rank == 0; ++c) {
      std::vector<double> times(
          values.begin() + static_cast<std::ptrdiff_t>(c * stride),
          values.begin() + static_cast<std::ptrdiff_t>(c * stride + stride - 1));
      AllreduceBenchRow row;
      row.algorithm = algorithms[c];
      row.ranks = n;
      row.bytes = bytes;
      row.iters = options.iters;
      row.correct = values[c * stride + stride - 1] == 0;
      const double seconds = Median(times);
      row.time_us = seconds * 1e6;
      row.min_us = *std::min_element(times.begin(), times.end()) * 1e6;
      row.max_us = *std::max_element(times.begin(), times.end()) * 1e6;
      row.algbw_gbps = static_cast<double>(bytes) / seconds / 1e9;
      row.busbw_gbps = AllreduceBusBandwidth(row.algbw_gbps, n);
      if (frugal_options[c]) {
        row.segment_bytes = SegmentBytes(*frugal_options[c]);
        CostShape shape;
        shape.ranks = n;
        shape.bytes = static_cast<double>(bytes);
        shape.segment_bytes = static_cast<double>(*row.segment_bytes);
        shape.ranks_per_host = ranks_per_host;
        shape.torus_rows = options.torus_rows;  // 0: the algorithm's own choice
        row.predicted_us =
            AllreduceCost(frugal_options[c]->algorithm, shape).Seconds(report.model) * 1e6;
      }
      report.rows.push_back(row);
    }
    if (rank == 0) {
      std::optional<double> best_peer;
      for (size_t k = first_row; k < report.rows.size(); ++k) {
        const auto& row = report.rows[k];
        if (IsPeerName(row.algorithm) && row.correct) {
          best_peer = best_peer ? std::min(*best_peer, row.time_us) : row.time_us;
        }
      }
      if (best_peer) {
        for (size_t k = first_row; k < report.rows.size(); ++k) {
          report.rows[k].ratio_to_best_peer = *best_peer / report.rows[k].time_us;
        }
      }
    }
  }
  return report;
}

std::string AllreduceTable(const AllreduceBenchReport& report) {
  std::string out;
  if (report.fitted) {
    out += fmt::format(
        "model (ping-pong 0<->1): alpha = {} us (fit of 8 B-4 KiB, r2 {:.3f}), beta = {:.4f} "
        "ns/byte = {:.2f} GB/s (fit of 256 KiB-4 MiB, r2 {:.3f}); gamma = {:.4f} ns/byte\n",
        FormatMicros(report.model.alpha * 1e6), report.latency_fit.r2, report.model.beta * 1e9,
        report.model.beta > 0 ? 1e-9 / report.model.beta : 0.0, report.bandwidth_fit.r2,
        report.model.gamma * 1e9);
  } else {
    out += fmt::format("model: single rank, gamma = {:.4f} ns/byte\n", report.model.gamma * 1e9);
  }
  Table table({"bytes", "algorithm", "ranks", "time_us", "algbw_GB/s", "busbw_GB/s", "predicted_us",
               "vs_best_peer", "correct"},
              {false, true});
  for (const auto& row : report.rows) {
    table.AddRow({FormatBytes(row.bytes), row.algorithm, fmt::format("{}", row.ranks),
                  FormatMicros(row.time_us), fmt::format("{:.3f}", row.algbw_gbps),
                  fmt::format("{:.3f}", row.busbw_gbps),
                  row.predicted_us ? FormatMicros(*row.predicted_us) : "-",
                  row.ratio_to_best_peer ? fmt::format("{:.2f}x", *row.ratio_to_best_peer) : "-",
                  row.correct ? "yes" : "NO"});
  }
  out += table.Render();
  return out;
}

std::vector<nlohmann::json> AllreduceJson(const AllreduceBenchReport& report) {
  std::vector<nlohmann::json> records;
  for (const auto& row : report.rows) {
    nlohmann::json record = {{"bench", "allreduce"},
                             {"algorithm", row.algorithm},
                             {"ranks", row.ranks},
                             {"bytes", row.bytes},
                             {"iters", row.iters},
                             {"time_us", row.time_us},
                             {"min_us", row.min_us},
                             {"max_us", row.max_us},
                             {"algbw_gbps", row.algbw_gbps},
                             {"busbw_gbps", row.busbw_gbps},
                             {"segment_bytes", nullptr},
                             {"predicted_us", nullptr},
                             {"ratio_to_best_peer", nullptr},
                             {"correct", row.correct},
                             {"alpha_us", report.model.alpha * 1e6},
                             {"beta_s_per_byte", report.model.beta},
                             {"gamma_s_per_byte", report.model.gamma}};
    if (row.segment_bytes) record["segment_bytes"] = *row.segment_bytes;
    if (row.predicted_us) record["predicted_us"] = *row.predicted_us;
    if (row.ratio_to_best_peer) record["ratio_to_best_peer"] = *row.ratio_to_best_peer;
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace frugal::bench
