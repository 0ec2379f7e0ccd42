// Serial references of the aggregation paths, written from their documented algorithms.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compress/test_util.h"
#include "frugal/collectives.h"

namespace frugal::testing_compress {

using Grid = std::vector<std::vector<std::vector<float>>>;  // [step][rank][element]

inline constexpr uint64_t kSeed = 42;

inline Grid Inputs(int n, size_t numel, int steps) {
  Grid in(steps, std::vector<std::vector<float>>(n));
  for (int s = 0; s < steps; ++s) {
    for (int r = 0; r < n; ++r) in[s][r] = Gaussian(numel, 1000 * s + r + 1, 1.0f + r);
  }
  return in;
}

inline void Scale(std::vector<float>& v, ReduceOp op, int n) {
  if (op == ReduceOp::kAverage && n > 1) {
    for (float& x : v) x /= static_cast<float>(n);
  }
}

// Allgather / vote reference: decode-sum of every rank's payload in rank order.
inline Grid GatherReference(const std::string& spec, const Grid& in, const TensorInfo& tensor,
                            ReduceOp op, bool vote) {
  const int n = static_cast<int>(in[0].size());
  auto c = Make(spec);
  std::vector<CompressContext> ctx;
  for (int r = 0; r < n; ++r) ctx.emplace_back(kSeed, r, n);
  Grid ref = in;
  for (size_t s = 0; s < in.size(); ++s) {
    std::vector<float> sum(tensor.numel, 0.0f);
    for (int r = 0; r < n; ++r) {
      ctx[r].set_step(s);
      std::vector<std::byte> p = EncodeOrDie(*c, in[s][r], tensor, ctx[r]);
      EXPECT_TRUE(c->Decode(p, tensor, ctx[r], sum).ok());
    }
    if (vote) {
      for (float& x : sum) x = x > 0 ? 1.0f : (x < 0 ? -1.0f : 0.0f);
    } else {
      Scale(sum, op, n);
    }
    for (int r = 0; r < n; ++r) ref[s][r] = sum;
  }
  return ref;
}

// Two-phase reference, written from the documented algorithm: chunk j of every rank encoded as
// tensor "<name>#j/n", decoded and summed in rank order, divided by n for the average, re-encoded
// as "<name>#j/n@server" (with a server-side residual when the compressor has error feedback),
// decoded into place.
inline Grid TwoPhaseReference(const std::string& spec, const Grid& in, const TensorInfo& tensor,
                              ReduceOp op) {
  const int n = static_cast<int>(in[0].size());
  auto c = Make(spec);
  const Compressor* server = c->inner() != nullptr ? c->inner() : c.get();
  std::vector<CompressContext> ctx;
  for (int r = 0; r < n; ++r) ctx.emplace_back(kSeed, r, n);
  std::vector<std::vector<float>> server_residual(n);
  Grid ref = in;
  for (size_t s = 0; s < in.size(); ++s) {
    std::vector<float> result(tensor.numel, 0.0f);
    for (int r = 0; r < n; ++r) ctx[r].set_step(s);
    for (int j = 0; j < n; ++j) {
      // Whole rows of the matrix view for a shaped tensor, else a block of elements.
      Block b = BlockPartition(tensor.numel, n, j);
      std::vector<int64_t> shape;
      if (tensor.shape.size() >= 2) {
        Block rows = BlockPartition(tensor.rows(), n, j);
        b = Block{rows.offset * tensor.cols(), rows.count * tensor.cols()};
        shape = {static_cast<int64_t>(rows.count), static_cast<int64_t>(tensor.cols())};
      }
      TensorInfo info(tensor.name + "#" + std::to_string(j) + "/" + std::to_string(n), b.count,
                      shape);
      TensorInfo server_info(info.name + "@server", b.count, shape);
      std::vector<float> partial(b.count, 0.0f);
      for (int r = 0; r < n; ++r) {
        std::vector<float> chunk(in[s][r].begin() + b.offset,
                                 in[s][r].begin() + b.offset + b.count);
        std::vector<std::byte> p = EncodeOrDie(*c, chunk, info, ctx[r]);
        EXPECT_TRUE(c->Decode(p, info, ctx[j], partial).ok());
      }
      Scale(partial, op, n);
      std::vector<float> to_send = partial;
      if (c->inner() != nullptr) {
        server_residual[j].resize(b.count, 0.0f);
        for (size_t i = 0; i < b.count; ++i) to_send[i] += server_residual[j][i];
      }
      std::vector<std::byte> p = EncodeOrDie(*server, to_send, server_info, ctx[j]);
      std::vector<float> decoded(b.count, 0.0f);
      EXPECT_TRUE(server->Decode(p, server_info, ctx[j], decoded).ok());
      if (c->inner() != nullptr) {
        for (size_t i = 0; i < b.count; ++i) server_residual[j][i] = to_send[i] - decoded[i];
      }
      std::copy(decoded.begin(), decoded.end(), result.begin() + b.offset);
    }
    for (int r = 0; r < n; ++r) ref[s][r] = result;
  }
  return ref;
}

}  // namespace frugal::testing_compress
