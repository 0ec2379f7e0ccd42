// The parameter server with compressed pushes and pulls, computed serially: what every worker
// and every server must hold after `steps` bsp steps, bit for bit. Shared by the tier-1 test
// (ranks as threads) and the tier-2 one (under mpirun).
//
// Per step k and key: worker w's gradient g (from its copy of the parameters); with push
// compression p = g + e_w (e_w its residual, with error feedback), payload = Encode(p) in the
// worker's context (rank w, step k), c_w = Decode(payload), e_w = p - c_w; the server averages the
// c_w in worker order and applies SGD; with pull compression it encodes x - x_hat in its context
// (rank = the server, step = the new version k + 1) and x_hat and every worker's copy add the
// decoded payload; without, the workers' copy is x.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ps/codec.h"
#include "ps/messages.h"
#include "ps/ps_test_util.h"
#include "ps/server_optimizer.h"
#include "ps/sharding.h"

namespace frugal::ps_test {

struct CompressCase {
  std::string push;
  bool push_error_feedback = false;
  std::string pull;
};

// Worker w's gradient of element i of tensor t at step k, from its copy's value x.
inline float CompressGradient(int w, size_t t, size_t i, uint64_t k, float x) {
  return (x - 0.05f * static_cast<float>(w + 1)) * 0.5f +
         0.01f * static_cast<float>((k + 1) * (t + 1)) - 0.003f * static_cast<float>(i % 7) +
         0.002f * static_cast<float>((i * (w + 3)) % 5);
}

inline ServerOptimizer CompressSgd() {
  ServerOptimizer opt;
  opt.lr = [](int64_t step) { return step < 2 ? 0.2 : 0.1; };
  opt.momentum = 0.9;
  opt.weight_decay = 0.001;
  return opt;
}

inline ParameterServerConfig CompressConfig(int workers, int servers, size_t part_bytes,
                                            const CompressCase& c) {
  ParameterServerConfig config = Config(workers, servers, part_bytes);
  config.push_compress = c.push;
  config.push_error_feedback = c.push_error_feedback;
  config.pull_compress = c.pull;
  config.seed = 7;
  return config;
}

struct CompressExpected {
  Model workers;                                      // every worker's model at the end
  std::map<std::string, std::vector<float>> servers;  // each key's parameters, by key name
  std::vector<uint64_t> push_bytes;                   // by worker: headers and payloads
  double server_residual = 0;                         // max |x - x_hat| over the keys at the end
};

inline std::unique_ptr<Compressor> ReferenceCompressor(const std::string& spec) {
  auto made = ps_internal::MakeKeyCompressor(spec, ps_internal::KeyErrorFeedback::kWithout, "ref");
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? std::move(*made) : nullptr;
}

inline CompressExpected CompressReference(const Model& initial, const ParameterServerConfig& config,
                                          const CompressCase& c, int steps) {
  const int workers = config.workers();
  std::vector<TensorSpec> specs;
  for (size_t t = 0; t < initial.names.size(); ++t) {
    specs.push_back({initial.names[t], initial.values[t].size()});
  }
  const ps_internal::ShardPlan plan =
      ps_internal::PlanShards(specs, config.servers(), config.part_bytes);
  std::unique_ptr<Compressor> push = c.push.empty() ? nullptr : ReferenceCompressor(c.push);
  std::unique_ptr<Compressor> pull = c.pull.empty() ? nullptr : ReferenceCompressor(c.pull);
  // Error feedback on the pushes: asked for, or the spec's own (efsign).
  bool push_ef = c.push_error_feedback;
  if (push) {
    auto as_specified =
        ps_internal::MakeKeyCompressor(c.push, ps_internal::KeyErrorFeedback::kAsSpecified, "ref");
    push_ef = push_ef || (as_specified.ok() && (*as_specified)->inner() != nullptr);
  }
  std::vector<CompressContext> encode_ctx, decode_ctx, server_ctx;
  for (int w = 0; w < workers; ++w) {
    encode_ctx.emplace_back(config.seed, w, workers);
    decode_ctx.emplace_back(config.seed, w, workers);
  }
  for (int s = 0; s < config.servers(); ++s)
    server_ctx.emplace_back(config.seed, s, config.servers());

  const size_t keys = plan.parts.size();
  std::vector<std::vector<float>> x(keys), x_hat(keys);
  std::vector<ps_internal::KeyOptimizerState> state(keys);
  std::vector<std::vector<std::vector<float>>> residual(static_cast<size_t>(workers),
                                                        std::vector<std::vector<float>>(keys));
  for (const ps_internal::KeyPart& part : plan.parts) {
    const std::vector<float>& v = initial.values[part.tensor];
    x[part.key].assign(v.begin() + static_cast<long>(part.offset),
                       v.begin() + static_cast<long>(part.offset + part.count));
    x_hat[part.key] = x[part.key];
    for (auto& r : residual) r[part.key].assign(part.count, 0.0f);
  }
  CompressExpected out;
  out.push_bytes.assign(static_cast<size_t>(workers), 0);
  std::vector<std::byte> payload;
  for (int k = 0; k < steps; ++k) {
    for (const ps_internal::KeyPart& part : plan.parts) {
      const TensorInfo tensor = ps_internal::KeyTensor(part);
      std::vector<float> sum;
      for (int w = 0; w < workers; ++w) {
        std::vector<float> g(part.count);
        for (size_t i = 0; i < part.count; ++i) {
          g[i] = CompressGradient(w, part.tensor, part.offset + i, k, x_hat[part.key][i]);
        }
        if (push) {
          std::vector<float>& e = residual[static_cast<size_t>(w)][part.key];
          if (push_ef) {
            for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] + e[i];
          }
          encode_ctx[static_cast<size_t>(w)].set_step(static_cast<uint64_t>(k));
          EXPECT_TRUE(push->Encode(g, tensor, encode_ctx[static_cast<size_t>(w)], payload).ok());
          out.push_bytes[static_cast<size_t>(w)] += ps_internal::kHeaderBytes + payload.size();
          std::vector<float> decoded(part.count, 0.0f);
          decode_ctx[static_cast<size_t>(w)].set_step(static_cast<uint64_t>(k));
          EXPECT_TRUE(
              push->Decode(payload, tensor, decode_ctx[static_cast<size_t>(w)], decoded).ok());
          if (push_ef) {
            for (size_t i = 0; i < g.size(); ++i) e[i] = g[i] - decoded[i];
          }
          g = decoded;
        } else {
          out.push_bytes[static_cast<size_t>(w)] +=
              ps_internal::kHeaderBytes + part.count * sizeof(float);
        }
        if (sum.empty()) {
          sum = g;
        } else {
          for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
        }
      }
      for (float& v : sum) v /= static_cast<float>(workers);
      const ServerOptimizer opt = CompressSgd();
      ps_internal::ApplySgd(opt, opt.lr(k), x[part.key], sum, state[part.key]);
      if (pull) {
        std::vector<float> change(part.count);
        for (size_t i = 0; i < part.count; ++i) change[i] = x[part.key][i] - x_hat[part.key][i];
        CompressContext& ctx = server_ctx[static_cast<size_t>(part.server)];
        ctx.set_step(static_cast<uint64_t>(k + 1));
        EXPECT_TRUE(pull->Encode(change, tensor, ctx, payload).ok());
        EXPECT_TRUE(pull->Decode(payload, tensor, ctx, x_hat[part.key]).ok());
      } else {
        x_hat[part.key] = x[part.key];
      }
    }
  }
  out.workers = initial;
  for (const ps_internal::KeyPart& part : plan.parts) {
    std::copy(x_hat[part.key].begin(), x_hat[part.key].end(),
              out.workers.values[part.tensor].begin() + static_cast<long>(part.offset));
    out.servers[part.name] = x[part.key];
    for (size_t i = 0; i < part.count; ++i) {
      out.server_residual = std::max(
          out.server_residual, std::abs(static_cast<double>(x[part.key][i]) - x_hat[part.key][i]));
    }
  }
  return out;
}

// A worker's `steps` bsp steps with CompressGradient.
inline Status CompressTrain(int w, ParameterClient& client, Model& x, int steps) {
  for (int k = 0; k < steps; ++k) {
    std::vector<std::vector<float>> buffers = x.values;
    for (size_t t = 0; t < buffers.size(); ++t) {
      for (size_t i = 0; i < buffers[t].size(); ++i) {
        buffers[t][i] = CompressGradient(w, t, i, static_cast<uint64_t>(k), x.values[t][i]);
      }
    }
    FRUGAL_RETURN_IF_ERROR(PushPull(client, x, static_cast<uint64_t>(k), buffers));
    x.values = buffers;
  }
  return Status::Ok();
}

// The servers' keys against the reference, exactly.
inline void ExpectServersEqual(const std::vector<ServerReport>& reports,
                               const CompressExpected& expected, const std::string& where) {
  size_t keys = 0;
  for (const ServerReport& report : reports) {
    for (size_t k = 0; k < report.key_names.size(); ++k) {
      auto it = expected.servers.find(report.key_names[k]);
      ASSERT_NE(it, expected.servers.end()) << where << " key " << report.key_names[k];
      EXPECT_EQ(report.key_values[k], it->second) << where << " key " << report.key_names[k];
      ++keys;
    }
  }
  EXPECT_EQ(keys, expected.servers.size()) << where;
}

}  // namespace frugal::ps_test
