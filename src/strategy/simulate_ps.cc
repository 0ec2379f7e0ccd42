// The parameter server in the step simulator (see simulate.h).
//
// One worker stands for all (lock step, every worker pushes the same key at the same time). Per
// step: the forward (kPriority: layer i waits for its keys of the previous step; otherwise the
// whole previous step), then the backward, which makes each layer's keys ready. The worker's
// channel takes the next ready key by the policy when it frees, encodes it (compressed pushes)
// and sends it; for a key of c floats on server s, with pushes of m bytes and answers of a bytes
// (KeyMessageBytes, the cost model's), push encoding e, push decoding d, pull encoding e' and
// pull decoding d' (4 c bytes at each rate, 0 when dense or not given):
//   start      = max(nic_out, ready) + e
//   push_end   = start + m / B                                    (the worker's NIC)
//   in_end     = max(max(in[s], start) + alpha + W m / B, push_end + alpha)
//                                                                 (server s's NIC, W pushes)
//   decoded    = in_end + d + max(0, (W - 1) (d - m / B))         (the W pushes decoded in turn
//                                                                  as they arrive)
//   out_end    = max(out[s], decoded + apply + e') + alpha + W a / B   (W answers)
//   back       = max(out_end, max(nic_in, out_end - a / B) + a / B) + d'
//                                                                 (the worker's NIC receives)
// where apply is the optimizer layers' time times the key's share of the floats, and B the NIC's
// rate times the duplex share of the message's size (DuplexShareAt: m's for the push, a's for
// the answers). Channel busy time is the largest inbound time of a server; server_out_busy_s the
// largest outbound.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "ps/sharding.h"
#include "strategy/simulate_internal.h"
#include "strategy/step_cost_internal.h"

namespace frugal::strategy_internal {

StatusOr<SimResult> SimulateParameterServer(const SimOptions& o) {
  const int servers = o.arch.servers;
  if (servers < 1) return InvalidArgumentError("frugal simulate: ps needs servers >= 1");
  if (o.compressed.has_value()) {
    return InvalidArgumentError(
        "frugal simulate: a parameter server compresses its keys with push_compress and "
        "pull_compress, not the reducer's compressed options");
  }
  bool exact = true;
  FRUGAL_ASSIGN_OR_RETURN(
      const KeyCompressors codecs,
      MakeKeyCompressors(o.push_compress, o.pull_compress, "frugal simulate", &exact));
  const int layers = static_cast<int>(o.layers.size());
  const double f = o.straggler_factor;
  const double w = o.workers;
  const double nic = o.network.nic_bytes_per_s;
  const double alpha = o.network.alpha_s;
  // The keys, as the servers cut them.
  std::vector<TensorSpec> tensors;
  std::vector<int> layer_of;  // tensor index -> layer
  double optimizer_s = 0;
  size_t floats = 0;
  for (int i = 0; i < layers; ++i) {
    const SimLayer& l = o.layers[static_cast<size_t>(i)];
    if (l.optimizer) optimizer_s += f * l.forward_s;
    if (l.floats == 0) continue;
    tensors.push_back(TensorSpec{l.name, l.floats});
    layer_of.push_back(i);
    floats += l.floats;
  }
  const size_t part_bytes = std::max<size_t>(
      sizeof(float), static_cast<size_t>(o.arch.shard_mb * static_cast<double>(1 << 20)));
  const ps_internal::ShardPlan plan = ps_internal::PlanShards(tensors, servers, part_bytes);
  const size_t keys = plan.parts.size();
  // Each key's messages and its compression times.
  struct KeyTimes {
    double push = 0, answer = 0;                                      // bytes
    double encode = 0, decode = 0, pull_encode = 0, pull_decode = 0;  // seconds
    double push_s = 0, answer_s = 0;  // a push's and an answer's time on a NIC
  };
  const auto seconds = [](const std::unique_ptr<Compressor>& c, double bytes, double rate) {
    return c != nullptr && rate > 0 ? bytes / rate : 0.0;
  };
  std::vector<KeyTimes> key_times;
  for (const ps_internal::KeyPart& part : plan.parts) {
    const double dense = 4.0 * static_cast<double>(part.count);
    KeyTimes k{static_cast<double>(KeyMessageBytes(codecs.push.get(), part)),
               static_cast<double>(KeyMessageBytes(codecs.pull.get(), part)),
               seconds(codecs.push, dense, o.encode_bytes_per_s),
               seconds(codecs.push, dense, o.decode_bytes_per_s),
               seconds(codecs.pull, dense, o.pull_encode_bytes_per_s),
               seconds(codecs.pull, dense, o.pull_decode_bytes_per_s)};
    k.push_s = k.push / (nic * DuplexShareAt(o.network, k.push));
    k.answer_s = k.answer / (nic * DuplexShareAt(o.network, k.answer));
    key_times.push_back(k);
  }

  std::vector<double> step_end(static_cast<size_t>(o.steps), 0);
  std::vector<double> layer_updated(static_cast<size_t>(layers), 0);
  std::vector<double> in(static_cast<size_t>(servers), 0);
  std::vector<double> out(static_cast<size_t>(servers), 0);
  std::vector<double> busy_in(static_cast<size_t>(servers), 0);
  std::vector<double> busy_out(static_cast<size_t>(servers), 0);
  double nic_out = 0;
  double nic_in = 0;
  double now = 0;
  for (int s = 0; s < o.steps; ++s) {
    for (int i = 0; i < layers; ++i) {
      const SimLayer& l = o.layers[static_cast<size_t>(i)];
      if (o.overlap == SimOverlap::kPriority) now = std::max(now, layer_updated[i]);
      if (!l.optimizer) now += f * l.forward_s;
    }
    std::vector<double> ready_at(static_cast<size_t>(layers));
    for (int i = layers - 1; i >= 0; --i) {
      now += f * o.layers[static_cast<size_t>(i)].backward_s;
      ready_at[static_cast<size_t>(i)] = now;
    }
    const double backward_end = now;
    std::vector<double> ready(keys);
    for (size_t k = 0; k < keys; ++k) {
      const int layer = layer_of[plan.parts[k].tensor];
      ready[k] = o.overlap == SimOverlap::kNone ? backward_end : ready_at[layer];
    }
    std::vector<bool> sent(keys, false);
    std::fill(layer_updated.begin(), layer_updated.end(), 0.0);
    double all_done = backward_end;
    for (size_t left = keys; left > 0; --left) {
      double earliest = std::numeric_limits<double>::infinity();
      for (size_t k = 0; k < keys; ++k) {
        if (!sent[k]) earliest = std::min(earliest, ready[k]);
      }
      const double t = std::max(nic_out, earliest);
      size_t best = keys;
      for (size_t k = 0; k < keys; ++k) {
        if (sent[k] || ready[k] > t) continue;
        const int layer = layer_of[plan.parts[k].tensor];
        const bool better = best == keys || (o.overlap == SimOverlap::kPriority
                                                 ? layer < layer_of[plan.parts[best].tensor]
                                                 : ready[k] < ready[best]);
        if (better) best = k;
      }
      sent[best] = true;
      const ps_internal::KeyPart& part = plan.parts[best];
      const KeyTimes& times = key_times[best];
      const size_t server = static_cast<size_t>(part.server);
      const double apply =
          floats > 0 ? optimizer_s * static_cast<double>(part.count) / static_cast<double>(floats)
                     : 0;
      const double start = t + times.encode;
      nic_out = start + times.push_s;
      const double in_start = std::max(in[server], start);
      const double in_end = std::max(in_start + alpha + w * times.push_s, nic_out + alpha);
      busy_in[server] += in_end - in_start;
      in[server] = in_end;
      const double decoded =
          in_end + times.decode + std::max(0.0, (w - 1) * (times.decode - times.push_s));
      const double out_start = std::max(out[server], decoded + apply + times.pull_encode);
      out[server] = out_start + alpha + w * times.answer_s;
      busy_out[server] += out[server] - out_start;
      nic_in = std::max(nic_in, out[server] - times.answer_s) + times.answer_s;
      const double back = std::max(out[server], nic_in) + times.pull_decode;
      const int layer = layer_of[part.tensor];
      layer_updated[layer] = std::max(layer_updated[layer], back);
      all_done = std::max(all_done, back);
    }
    if (o.overlap != SimOverlap::kPriority) now = all_done;
    step_end[static_cast<size_t>(s)] = all_done;
  }
  SimResult r =
      SummarizeSteps(o, step_end, *std::max_element(busy_in.begin(), busy_in.end()) / o.steps);
  r.server_out_busy_s = *std::max_element(busy_out.begin(), busy_out.end()) / o.steps;
  return r;
}

}  // namespace frugal::strategy_internal
