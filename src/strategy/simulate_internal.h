// The parts of the step simulator (frugal/simulate.h) for the parameter server and gossip, and
// what they share with the all-reduce part.
#pragma once

#include <vector>

#include "frugal/simulate.h"

namespace frugal::strategy_internal {

// The compute of one step of an undisturbed worker: the layers' forward and backward times (the
// slowest worker's is straggler_factor times it).
double StepComputeSeconds(const SimOptions& options);

// The results from the end times of the steps of the steady state (the step is their mean
// spacing) and the channel's busy time per step.
SimResult SummarizeSteps(const SimOptions& options, const std::vector<double>& step_end,
                         double busy_per_step);

// The bandwidth of the ring's busiest link, and the time of a ring all-reduce of `bytes` over
// options.workers ranks on it (simulate.h).
double RingBandwidth(const SimOptions& options);
double RingAllreduceSeconds(const SimOptions& options, double bytes);

// The end of `work` seconds of compute started at `start` while the channel is busy until
// `busy_until`: `contention` times slower until then, at full speed after.
double ComputeEnd(double start, double work, double busy_until, double contention);

// options.arch.kind == kAllreduce, options.sync.kind == kBsp (simulate_allreduce.cc).
StatusOr<SimResult> SimulateAllreduce(const SimOptions& options,
                                      const CompressorRegistry& registry);

// options.arch.kind == kParameterServer.
StatusOr<SimResult> SimulateParameterServer(const SimOptions& options);

// The model's passes through memory on the training thread in a step with a gossip round whose
// largest out- or in-degree is d (a pass reads the model and writes it once; a loop over three
// model-sized vectors is 1.5). Every exchange packs the model into the round's buffer and unpacks
// it after (2 passes). The dense algorithms (D-PSGD, SGP; gossip Local SGD, which runs D-PSGD
// after the step) also copy the model the round sends from (D-PSGD's snapshot, SGP's numerator),
// copy it once per message into the transport (d), and mix the d received models with their own
// (d + 1). D-PSGD cta splits them: before the compute the exchange that starts the round (pack,
// snapshot, d messages, unpack: 3 + d), after it the exchange that mixes (pack, d + 1, unpack:
// 3 + d). The others do all of them after the compute. The compressed algorithms
// (compressed_message.h) decode messages into their vectors: CHOCO x - x̂ (1.5) and x += gamma
// (s - x̂) (2), d + 2 decodes (its own into x̂, the row into s); DCD z (2) and x = x_i (1), d + 2
// decodes; ECD x^{t+1} and z (2.5), s scaled (1) and two copies (2), d + 1 decodes. A decode
// that is weighted (the row's, W_ij != 1) adds 1.5 passes unless the compressor decodes sparsely
// (traits().sparse_decode: it touches only the entries it carries).
struct ModelPasses {
  double before = 0;
  double after = 0;
  int decodes = 0;  // messages decoded by the training thread after the round
};
ModelPasses GossipModelPasses(GossipAlgorithm algorithm, bool cta, int d, bool sparse_decode);

// options.arch.kind == kAllreduce, options.sync.kind == kLocal (simulate_local.cc).
StatusOr<SimResult> SimulateLocalAverage(const SimOptions& options,
                                         const CompressorRegistry& registry);

// options.arch.kind == kAllreduce, options.sync.kind == kFedAvg (simulate_fedavg.cc).
StatusOr<SimResult> SimulateFedAvg(const SimOptions& options);

// options.arch.kind == kGossip, options.sync.kind kBsp or kLocal.
StatusOr<SimResult> SimulateGossip(const SimOptions& options, const CompressorRegistry& registry);

}  // namespace frugal::strategy_internal
