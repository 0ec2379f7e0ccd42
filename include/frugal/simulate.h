// A discrete-event simulation of data-parallel training steps (`frugal simulate`): per-layer
// forward and backward times, the engine's overlap policies, the all-reduce's message pattern
// over a network of hosts and racks, compression, stragglers. Pure functions.
//
// The model. One training thread and one communication channel per worker; BSP keeps the
// workers in lock step, so one worker is simulated, with the compute of the slowest
// (straggler_factor) and the network seen by the ring's busiest link.
//  - Compute: step s runs the layers' forward in order, then their backward in reverse order;
//    the gradient of layer i is ready when its backward ends. While the channel moves a message
//    the compute runs `contention` times slower (simulate_allreduce.cc).
//  - Units: what the channel moves. kNone: after the whole backward, the buckets of
//    PlanBuckets(bucket_cap_bytes) over the gradients in ready order; kWfbp: each layer's
//    gradient as it is ready; kFusion: when the channel frees, every ready gradient not yet sent
//    (up to fusion_bytes) as one message; kPriority: each gradient cut into partitions of
//    partition_bytes (the engine's rule), the channel always taking the ready unit of the lowest
//    layer index.
//  - Updates: kNone, kWfbp, kFusion step the optimizer when every unit of the step has been
//    reduced, and the next forward starts then; kPriority updates layer by layer: the forward of
//    layer i in step s + 1 waits for the units of layer i of step s only.
//  - A unit of N bytes, dense: ring all-reduce, 2 (n - 1) (alpha + (N / n) / B). Compressed
//    (tensors of at least min_bytes; smaller ones dense): the compressor's payload W (exact, or
//    top-k's bound: step_cost.h) on its aggregation path: allgather or vote (n - 1)(2 alpha + (W +
//    8) / B); two-phase (n - 1) alpha + (n - 1) / n sum_j W_j / B_a2a + (n - 1)(2 alpha + W / n /
//    B); all-reduce the ring of its body; a custom aggregation made of all-reduces (PowerSGD's
//    P and Q, Compressor::AggregateAllreduceFloats) the ring of each; plus encoding 4 N_floats /
//    encode rate and decoding (n payloads on the allgather path, 2 on the others) at the decode
//    rate.
//  - Bandwidth B of a ring: one host (n <= ranks_per_host): host_bytes_per_s; else the NIC,
//    each host carrying one ring edge out and one in (ranks numbered host by host); with racks,
//    min(NIC, rack uplink) - a rack's uplink carries one edge. B_a2a of the two-phase scatter:
//    each host sends L (n - L) / n of every rank's chunks through its NIC (L ranks per host).
//
// Local SGD over all-reduce (sync local:period=H[,overlap=1], simulate_local.cc): no gradient
// leaves a worker; after every H-th step's compute the workers average their models as
// ModelAverager does: dense, one ring all-reduce of all the layers' floats; compressed, each
// layer's change since the last average as one unit above (the tensor whole). The next step
// starts when the average ends, or with overlap=1 at once: the average runs beside the next H
// local steps and the next averaging step waits for it. The layers are the model (no buffers);
// start-epoch, intra-period and momenta=1 are refused.
//
// FedAvg over all-reduce (sync fedavg:clients=K,fraction=C,local-steps=S or local-epochs=E,
// simulate_fedavg.cc): each round SampleClients draws the m clients with `seed`, worker c mod n
// plays client c, and each client trains S steps, or E x ceil(client_samples[c] / batch_size)
// (the layers' compute), and, compressed, encodes and decodes the model at the measured rates;
// then one ring all-reduce of the model's floats and the weight. The round takes the busiest
// worker's clients plus the all-reduce, over `rounds` rounds (at least 64 by default); the
// result's step is one client step at the run's throughput, the rounds' time x n over their
// clients' steps.
//
// Other architectures (arch; sync bsp, and local:period=H over gossip):
//  - ps:servers=S (simulate_ps.cc): the keys of the servers' sharding (PlanShards of the layers'
//    gradients, S servers, shard-mb), each server on a host of its own. A key becomes ready with
//    its layer's gradient; the worker's NIC pushes the ready keys one at a time (kPriority: the
//    lowest layer first, otherwise the earliest ready; kNone: all after the backward), each
//    push of m bytes: 52 + 4 c, or with push_compress 52 + the compressor's payload of the key
//    (the bytes of `frugal cost`: exact, or top-k's bound), after encoding the key's 4 c bytes at
//    encode_bytes_per_s on the worker's channel. Every worker pushes the same key at the same
//    time, so the server's NIC takes W messages: its inbound channel is busy alpha + W m / B per
//    key, in the order the pushes come; compressed pushes are decoded one after another as they
//    arrive (4 c / decode_bytes_per_s each); the server then applies the update (the optimizer
//    layers' time, shared over the keys in proportion to their floats: the workers do not run the
//    optimizer), with pull_compress encodes the change once (4 c / pull_encode_bytes_per_s), and
//    its outbound channel sends the W answers of a = 52 + 4 c bytes or 52 + the pull compressor's
//    payload, alpha + W a / B. A key is back at the worker when its answer has also passed the
//    worker's NIC (a / B, the answers of all servers one after the other) and, compressed, been
//    decoded (4 c / pull_decode_bytes_per_s). Updates as above (kPriority: layer by layer;
//    otherwise after the last key). comm_busy_s is the largest inbound time of a
//    server, server_out_busy_s the largest outbound.
//  - gossip (simulate_gossip.cc): the algorithm's message (step_cost.h) to the out-neighbours of
//    the round's phase of the topology; a round is alpha + d M / B (d the largest out- or
//    in-degree of the phase: a rank's messages go at once through its NIC, full duplex; B the
//    network's round_bytes_per_s when it is set, the NIC's rate otherwise) plus,
//    for the compressed algorithms, encoding the model and decoding the messages they decode; on
//    the training thread, the model's passes through memory at copy_bytes_per_s
//    (GossipModelPasses). D-PSGD (cta) sends the model the step starts from, so its round runs
//    during the step's forward and backward (the compute `contention` times slower while it moves)
//    and the step ends when both are done; the others (atc, CHOCO, DCD, ECD, SGP, and
//    --sync local:period=H every H steps) run their round after the optimizer's step; SGP with
//    overlap=1 lets its round run during the next step. The layers are the model (no buffers).
// Asynchronous models (asp, ssp, backup, lag) and AD-PSGD are not simulated: without stragglers
// they move the same messages as the lock step, and with stragglers their steps are not
// simulated by one worker.
//
// Results: the step time in steady state (simulated `steps` steps: the mean of steps 2..S,
// from the end of one step's last update to the end of the next), the compute per step, the
// busy time of the channel, the exposed communication (step - compute), its share of the step,
// and the scaling efficiency, the compute of one undisturbed worker over the step time
// (throughput of n workers over n times that of one).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frugal/compressor.h"
#include "frugal/status.h"
#include "frugal/strategy.h"

namespace frugal {

struct SimLayer {
  std::string name;
  size_t floats = 0;  // gradient elements (0: compute only)
  std::vector<int64_t> shape;
  double forward_s = 0;
  double backward_s = 0;
  // The optimizer's step (floats 0): a parameter server runs it on the servers.
  bool optimizer = false;
};

enum class SimOverlap { kNone, kWfbp, kFusion, kPriority };
StatusOr<SimOverlap> ParseSimOverlap(std::string_view name);

// The share of a NIC's rate that each direction keeps while the NIC sends and receives at once,
// measured with messages of `bytes` (`frugal bench exchange`, mode both against one way).
struct DuplexPoint {
  double bytes = 0;
  double share = 1;
};

struct SimNetwork {
  double alpha_s = 50e-6;
  double nic_bytes_per_s = 125e6;  // 1 Gbit/s
  double host_bytes_per_s = 5e9;   // between ranks of one host
  int ranks_per_host = 1;
  int hosts_per_rack = 0;       // 0: all hosts in one rack
  double rack_bytes_per_s = 0;  // a rack's uplink (0: as fast as a NIC)
  // Gossip: the rate at which a host's NIC carries a round's concurrent flows (d M / round, as
  // `frugal bench round` measures it on the graph); 0: the NIC's rate.
  double round_bytes_per_s = 0;
  // Parameter server: the share of the NIC's rate that each direction of a NIC sending and
  // receiving at once carries, for every push and answer (with small keys a server's pushes in
  // and answers out overlap for most of the step; on emulated hosts such flows go slower than one
  // direction alone). In (0, 1].
  double duplex_share = 1;
  // The same share by message size (ascending bytes): when given, each push and answer takes the
  // share of its own size instead of duplex_share (DuplexShareAt). Small messages keep less of
  // the NIC than large ones (TCP's flows restart and queue behind the other direction's).
  std::vector<DuplexPoint> duplex_by_bytes;
};

// The duplex share of a message of `bytes` on `network`: duplex_share without duplex_by_bytes;
// otherwise linear in log(bytes) between the two measured sizes around it, the nearest measured
// size's share below the smallest or above the largest.
double DuplexShareAt(const SimNetwork& network, double bytes);

struct SimOptions {
  std::vector<SimLayer> layers;  // forward order
  int workers = 1;
  SimNetwork network;
  SimOverlap overlap = SimOverlap::kPriority;
  size_t bucket_cap_bytes = size_t{25} << 20;
  size_t fusion_bytes = size_t{64} << 20;
  size_t partition_bytes = size_t{4} << 20;
  // Unset: dense. Otherwise the compressor, its path and min_bytes (PlanStrategy's).
  std::optional<CompressedReducerOptions> compressed;
  double encode_bytes_per_s = 0;  // input bytes per second; 0: free
  double decode_bytes_per_s = 0;
  // Gossip: the rate at which a rank copies the model (as `frugal bench round` measures it), for
  // the model's passes through memory on the training thread around a round; 0: free.
  double copy_bytes_per_s = 0;
  double straggler_factor = 1;  // compute of the slowest worker, relative
  // All-reduce (bsp and local:...,overlap=1) and gossip (D-PSGD cta, SGP overlap=1): compute
  // runs this many times slower while the channel moves a message, for the CPU that moving it
  // takes from the training thread on the same cores (`frugal bench contention` measures it on
  // the hosts). >= 1.
  double contention = 1;
  int steps = 4;
  // FedAvg with local-epochs: each client's training samples (as many as the clients) and the
  // batch size of its steps.
  std::vector<int64_t> client_samples;
  int64_t batch_size = 64;
  // FedAvg: the rounds simulated, the seed's draws from round 0 on (0: max(steps, 64)).
  int64_t rounds = 0;
  // The architecture (all-reduce: its ring), and the synchronization (bsp; over all-reduce and
  // gossip also local:period=H), as PlanStrategy parses them.
  ArchSpec arch;
  SyncSpec sync;
  uint64_t seed = 0;  // gossip: random-regular graphs
  // --arch ps: the compressor specs of the pushes and of the answers (StrategyPlan's
  // push_compress and pull_compress; empty: dense). The pushes' rates are encode_bytes_per_s and
  // decode_bytes_per_s, the answers' these (0: free).
  std::string push_compress;
  std::string pull_compress;
  double pull_encode_bytes_per_s = 0;
  double pull_decode_bytes_per_s = 0;
};

struct SimResult {
  double step_s = 0;
  double compute_s = 0;
  double comm_busy_s = 0;
  double exposed_comm_s = 0;
  double comm_share = 0;
  double scaling_efficiency = 0;
  double server_out_busy_s = 0;  // ps: the busiest server's outbound NIC time per step
};

// kInvalidArgument for a bad option or a compressor the byte model refuses (step_cost.h).
StatusOr<SimResult> Simulate(const SimOptions& options, const CompressorRegistry& registry);

// The time of one unit of `floats` elements (shape as the tensor's) on the channel, as above.
StatusOr<double> UnitSeconds(const SimOptions& options, const CompressorRegistry& registry,
                             size_t floats, const std::vector<int64_t>& shape);

}  // namespace frugal
