// Helpers of the collectives tests: deterministic per-rank inputs and their serial reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/inproc_transport.h"
#include "frugal/random.h"

namespace frugal::testing {

// Element i of rank r's input: uniform in [-1, 1) from the stream (seed, r, step, length).
inline std::vector<float> MakeInput(int rank, size_t length, uint64_t step = 0) {
  RngStream rng(RngKey{.seed = 20240611, .rank = rank, .step = step, .tensor = length});
  std::vector<float> v(length);
  for (float& x : v) x = 2.0f * rng.Uniform() - 1.0f;
  return v;
}

// Serial reference: the double-precision sum (or average) of every rank's input.
inline std::vector<double> Reference(int ranks, size_t length, ReduceOp op, uint64_t step = 0) {
  std::vector<double> sum(length, 0.0);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> in = MakeInput(r, length, step);
    for (size_t i = 0; i < length; ++i) sum[i] += in[i];
  }
  if (op == ReduceOp::kAverage) {
    for (double& x : sum) x /= ranks;
  }
  return sum;
}

// Float tolerance for a sum of n values in [-1, 1): n roundings of partial sums of size <= n.
inline double Tolerance(int ranks, ReduceOp op) {
  const double sum_tol = 4.0 * ranks * ranks * 6e-8 + 1e-7;
  return op == ReduceOp::kAverage ? sum_tol / ranks + 1e-7 : sum_tol;
}

// Index of the first element outside tolerance, or -1.
inline int64_t FirstMismatch(const std::vector<float>& got, const std::vector<double>& want,
                             double tolerance) {
  if (got.size() != want.size()) return 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(static_cast<double>(got[i]) - want[i]) <= tolerance)) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

inline bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Rank `rank`'s input of `length` floats (MakeInput) in memory shared with the transport
// (Transport::NewShared; pass `memory.owner` as AllreduceOptions::data_owner) or in its own.
struct RankInput {
  SharedBytes memory;
  std::vector<float> own;
  std::span<float> data;
};
inline RankInput MakeRankInput(Transport& t, size_t length, bool shared) {
  RankInput in;
  const std::vector<float> values = MakeInput(t.rank(), length);
  if (shared) {
    in.memory = t.NewShared(length * sizeof(float));
    in.data = std::span<float>(reinterpret_cast<float*>(in.memory.bytes.data()), length);
    std::copy(values.begin(), values.end(), in.data.begin());
  } else {
    in.own = values;
    in.data = in.own;
  }
  return in;
}

// What each rank of an all-reduce returned, ended with and sent (RunAllreduce).
struct AllreduceRun {
  std::vector<Status> statuses;
  std::vector<std::vector<float>> outputs;
  std::vector<uint64_t> bytes;
  std::vector<uint64_t> messages;
};

// Runs Allreduce on `n` threads, rank r starting from MakeInput(r, length), in a vector or, with
// `shared`, in memory from Transport::NewShared (passed as AllreduceOptions::data_owner).
inline AllreduceRun RunAllreduce(int n, size_t length, const AllreduceOptions& options,
                                 InProcOptions world, bool shared = false) {
  AllreduceRun run;
  const size_t ranks = static_cast<size_t>(n);
  run.outputs.resize(ranks);
  run.bytes.resize(ranks);
  run.messages.resize(ranks);
  run.statuses = RunRanks(
      n,
      [&](Transport& t) -> Status {
        RankInput in = MakeRankInput(t, length, shared);
        AllreduceOptions own = options;
        if (shared) own.data_owner = in.memory.owner;
        const uint64_t bytes = t.bytes_sent(), messages = t.messages_sent();
        Status s = Allreduce(t, in.data, own);
        const size_t r = static_cast<size_t>(t.rank());
        run.bytes[r] = t.bytes_sent() - bytes;
        run.messages[r] = t.messages_sent() - messages;
        run.outputs[r].assign(in.data.begin(), in.data.end());
        return s;
      },
      world);
  return run;
}

inline void ExpectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
}

// The protocols of the in-process transport that every collective must work over: eager sends,
// and synchronous sends that complete only once a receive has taken them (its rendezvous mode for
// every message, the strictest form of MPI's rendezvous protocol for large messages), which turns
// an algorithm that needs its sends buffered into a timeout instead of a pass.
enum class Protocol { kEager, kSynchronous };

inline const std::vector<Protocol>& AllProtocols() {
  static const std::vector<Protocol> protocols = {Protocol::kEager, Protocol::kSynchronous};
  return protocols;
}

inline std::string ProtocolName(Protocol p) { return p == Protocol::kEager ? "eager" : "sync"; }

// `world` with the sends of protocol `p`.
inline InProcOptions Over(Protocol p, InProcOptions world = {}) {
  if (p == Protocol::kSynchronous) world.rendezvous_bytes = 0;
  return world;
}

// Tests that run once per protocol.
class OverEachProtocol : public ::testing::TestWithParam<Protocol> {
 protected:
  Protocol protocol() const { return GetParam(); }
  std::vector<Status> Run(int size, const std::function<Status(Transport&)>& fn,
                          InProcOptions world = {}) const {
    return RunRanks(size, fn, Over(GetParam(), std::move(world)));
  }
};

inline std::string ProtocolParamName(const ::testing::TestParamInfo<Protocol>& info) {
  return ProtocolName(info.param);
}

}  // namespace frugal::testing
