// The parameter server's part of the cost model (see step_cost.h).
//
// The keys are the servers' sharding (PlanShards over what the servers hold, with the plan's
// servers and part size, as every rank of a job computes it): the trainable parameters, and
// under Local SGD (unless buffers=0) and FedAvg the float buffers after them. Every message is a
// 52-byte header and its payload: a key's floats, or with --compress (pushes) and --compress-pull
// (answers) the compressor's payload of the key (compress_wire.h: exact, or top-k's bound).
// Per exchange each worker pushes every key once and gets every key back once, so a worker sends
// sum_k push_k, receives sum_k answer_k, and server s receives W sum_{k on s} push_k and sends
// W sum_{k on s} answer_k. The strategies differ in how often they exchange and what a push holds:
//  - bsp, ssp, asp, backup: every step of a worker; lag: the same, a skipped push a header alone
//    (data-dependent: the model is the bound of no skip);
//  - local:period=H: every H steps, the model deltas (the figures per step are the exchange's / H);
//  - fedavg: every round; a worker that plays no sampled client of the round pushes the headers
//    alone (weight 0), the others the floats; the answers are the floats to every worker. Which
//    workers play a client follows the rounds' sampling (SampleClients with the plan's seed,
//    client c on worker c mod W): the figures are the mean over rounds 0 .. rounds - 1.
// Time per exchange: 2 alpha (a push and its answer) and the busiest NIC in beta. A server
// answers a key once the key's pushes of every worker arrived, and its NIC is full duplex: its
// keys k = 1 .. K in push order (the keys' order, as the workers submit them) pass its inbound
// link (in_k: the key's pushes of every worker, an idle worker's header alone under fedavg) and
// then its outbound link (out_k = W answer_k), a two-stage flow shop whose last answer leaves at
//   C = max_k ( in_1 + .. + in_k + out_k + .. + out_K )
// (the key whose answers wait for every push before them and hold back every answer after
// them). The busiest NIC is the largest of the servers' C, a worker's pushes and its answers.
// With dense keys (in_k = out_k) C is sum_k out_k + max_k out_k; with fewer uploads than
// workers, or compressed pushes or answers, the two links differ and the key where they meet
// decides. FedAvg: at the mean uploads over the rounds, which is at most the mean of the rounds'
// times (equal when the same key decides every round).
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "frugal/fedavg.h"
#include "ps/codec.h"
#include "ps/messages.h"
#include "ps/sharding.h"
#include "strategy/ps_strategy.h"
#include "strategy/step_cost_internal.h"

namespace frugal::strategy_internal {
namespace {

// The compressor of `spec` on one key, or null for dense floats; kInvalidArgument for one whose
// payload has no bound.
StatusOr<std::unique_ptr<Compressor>> KeyCompressor(const std::string& spec, const char* flag,
                                                    std::string_view command, bool* exact) {
  if (spec.empty()) return std::unique_ptr<Compressor>();
  FRUGAL_ASSIGN_OR_RETURN(
      std::unique_ptr<Compressor> c,
      ps_internal::MakeKeyCompressor(spec, ps_internal::KeyErrorFeedback::kWithout, flag));
  if (!c->MaxBodyBits(TensorInfo("probe", 1000)).has_value()) {
    return InvalidArgumentError(
        fmt::format("{}: {} {} has a payload size that depends on the data, without a bound (the "
                    "model covers compressors of a fixed payload size, and top-k's bound)",
                    command, flag, spec));
  }
  if (c->traits().variable_size) *exact = false;
  return c;
}

// The bytes of a two-stage flow shop: jobs k in order pass the first link (in[k] bytes), then
// the second (out[k]); max_k (in[0] + .. + in[k] + out[k] + .. + out[K-1]).
double FlowShopBytes(const std::vector<double>& in, const std::vector<double>& out) {
  double after = 0;  // out[k] + .. + out[K-1]
  for (double o : out) after += o;
  double before = 0, longest = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    before += in[k];
    longest = std::max(longest, before + after);
    after -= out[k];
  }
  return longest;
}

// The workers that play a sampled client, summed over rounds 0 .. rounds - 1.
uint64_t UploadingWorkers(const StrategyPlan& plan, int workers, int64_t rounds) {
  uint64_t uploads = 0;
  std::vector<char> plays(static_cast<size_t>(workers));
  for (int64_t r = 0; r < rounds; ++r) {
    std::fill(plays.begin(), plays.end(), 0);
    for (int64_t c : SampleClients(plan.seed, r, plan.sync.clients, plan.sync.fraction)) {
      plays[static_cast<size_t>(ClientRank(c, workers))] = 1;
    }
    uploads += static_cast<uint64_t>(std::count(plays.begin(), plays.end(), 1));
  }
  return uploads;
}

}  // namespace

StatusOr<KeyCompressors> MakeKeyCompressors(const std::string& push_spec,
                                            const std::string& pull_spec, std::string_view command,
                                            bool* exact) {
  KeyCompressors codecs;
  FRUGAL_ASSIGN_OR_RETURN(codecs.push, KeyCompressor(push_spec, "--compress", command, exact));
  FRUGAL_ASSIGN_OR_RETURN(codecs.pull, KeyCompressor(pull_spec, "--compress-pull", command, exact));
  return codecs;
}

uint64_t KeyMessageBytes(const Compressor* c, const ps_internal::KeyPart& part) {
  return ps_internal::kHeaderBytes +
         (c != nullptr ? CompressedWireBytes(*c, ps_internal::KeyTensor(part)) : 4 * part.count);
}

StatusOr<StepCost> ParameterServerStepCost(const StepCostInput& in,
                                           const CompressorRegistry& registry) {
  const SyncSpec& sync = in.plan.sync;
  const bool local = sync.kind == SyncKind::kLocal;
  const bool fedavg = sync.kind == SyncKind::kFedAvg;
  if (local && (sync.start_epoch > 0 || sync.intra_period > 0 || sync.average_momenta)) {
    return InvalidArgumentError(
        "frugal cost: Local SGD over a parameter server has no start-epoch, intra-period or "
        "momenta=1");
  }
  if (fedavg && in.rounds < 1) return InvalidArgumentError("frugal cost: rounds must be >= 1");
  const int w = in.workers;
  const int servers = in.plan.arch.servers;
  if (servers < 1) return InvalidArgumentError("frugal cost: ps needs servers >= 1");
  StepCost cost;
  cost.exact = sync.kind != SyncKind::kLag;
  FRUGAL_ASSIGN_OR_RETURN(
      KeyCompressors codecs,
      MakeKeyCompressors(in.plan.push_compress, in.plan.pull_compress, "frugal cost", &cost.exact));
  const std::unique_ptr<Compressor>& push = codecs.push;
  const std::unique_ptr<Compressor>& pull = codecs.pull;
  // The configuration the ranks of a job of w workers derive (part size as the strategy's).
  const ParameterServerConfig config = ParameterServerConfigOf(in.plan, w + servers);
  std::vector<TensorSpec> tensors;
  for (const CostTensor& t : in.parameters) tensors.push_back(TensorSpec{t.name, t.numel});
  if ((local && sync.average_buffers) || fedavg) {
    for (const CostTensor& t : in.buffers) tensors.push_back(TensorSpec{t.name, t.numel});
  }
  const ps_internal::ShardPlan plan = ps_internal::PlanShards(tensors, servers, config.part_bytes);

  // One exchange: what a worker pushes (an uploading one under fedavg), the headers alone, what
  // it gets back; the same per server.
  const auto size = static_cast<size_t>(servers);
  std::vector<uint64_t> push_in(size, 0), headers_in(size, 0), answers_out(size, 0);
  std::vector<uint64_t> key_push(plan.parts.size()), key_answer(plan.parts.size());
  uint64_t push_sum = 0, answer_sum = 0, header_sum = 0;
  for (const ps_internal::KeyPart& part : plan.parts) {
    const uint64_t pushed = KeyMessageBytes(push.get(), part);
    const uint64_t answer = KeyMessageBytes(pull.get(), part);
    const size_t s = static_cast<size_t>(part.server);
    key_push[part.key] = pushed;
    key_answer[part.key] = answer;
    push_sum += pushed;
    answer_sum += answer;
    header_sum += ps_internal::kHeaderBytes;
    push_in[s] += pushed;
    headers_in[s] += ps_internal::kHeaderBytes;
    answers_out[s] += answer;
  }
  // Per exchange, summed over the workers: uploads of the whole push, the rest headers alone.
  double uploads = w;
  if (fedavg) {
    uploads = static_cast<double>(UploadingWorkers(in.plan, w, in.rounds)) /
              static_cast<double>(in.rounds);
    cost.uploading_workers = uploads;
    cost.idle_bytes_per_worker = header_sum;
  }
  const double idle = w - uploads;
  // Exchanges per step: 1, or 1/H under Local SGD (FedAvg: per round).
  const double per = local ? 1.0 / static_cast<double>(sync.period) : 1.0;
  const double sent =
      uploads * static_cast<double>(push_sum) + idle * static_cast<double>(header_sum);
  cost.bytes_sum = static_cast<uint64_t>(std::llround(sent * per));
  cost.bytes_per_worker = sent * per / w;
  cost.received_per_worker = static_cast<double>(answer_sum) * per;
  if (local) cost.average_bytes_sum = static_cast<uint64_t>(std::llround(sent));
  if (push) cost.compressed_bytes_sum = cost.bytes_sum;
  for (size_t s = 0; s < size; ++s) {
    cost.server_bytes_in.push_back(
        (uploads * static_cast<double>(push_in[s]) + idle * static_cast<double>(headers_in[s])) *
        per);
    cost.server_bytes_out.push_back(static_cast<double>(w) * static_cast<double>(answers_out[s]) *
                                    per);
  }
  uint64_t parameter_floats = 0;
  for (const CostTensor& t : in.parameters) parameter_floats += t.numel;
  cost.dense_ring_bytes_sum = AllreduceBytesSum(AllreduceAlgorithm::kRing, w, 4 * parameter_floats);
  // Each server's flow shop of its keys in push order (see the top), per exchange.
  double busiest = std::max(static_cast<double>(push_sum), static_cast<double>(answer_sum));
  for (size_t s = 0; s < size; ++s) {
    std::vector<double> in, out;
    for (uint32_t key : plan.by_server[s]) {
      in.push_back(uploads * static_cast<double>(key_push[key]) +
                   idle * static_cast<double>(ps_internal::kHeaderBytes));
      out.push_back(static_cast<double>(w) * static_cast<double>(key_answer[key]));
    }
    busiest = std::max(busiest, FlowShopBytes(in, out));
  }
  cost.terms.latency_terms = 2 * per;
  cost.terms.bandwidth_bytes = busiest * per;
  cost.seconds = cost.terms.Seconds(in.network);

  std::string what = "every step";
  if (local) what = fmt::format("every {} steps", sync.period);
  if (fedavg) what = "every round";
  if (sync.kind != SyncKind::kBsp && sync.kind != SyncKind::kLag && !local && !fedavg) {
    what = "every push of a worker";
  }
  cost.pattern = fmt::format(
      "{}: {} keys on {} server{}, each pushed by every worker ({}) and answered with its {} ({} "
      "floats, {} B of headers each way)",
      what, plan.parts.size(), servers, servers == 1 ? "" : "s",
      push ? push->spec() : (local ? "model delta" : (fedavg ? "weighted sum" : "gradient")),
      pull ? "change, " + pull->spec() : std::string("values"), parameter_floats, header_sum);
  if (sync.kind == SyncKind::kLag) {
    cost.pattern += "; a skipped push is its header alone (the bytes are the bound of no skip)";
  }
  if (fedavg) {
    cost.pattern += fmt::format(
        "; a worker that plays no sampled client pushes the headers alone ({} B): {} of {} "
        "workers upload, the mean over {} round{}",
        header_sum, uploads, w, in.rounds, in.rounds == 1 ? "" : "s");
    FRUGAL_ASSIGN_OR_RETURN(const std::string clients, FedAvgClientTraffic(in, registry, cost));
    cost.pattern += "; " + clients;
  }
  return cost;
}

}  // namespace frugal::strategy_internal
