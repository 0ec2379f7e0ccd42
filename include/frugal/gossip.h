// Decentralized training: what `--arch gossip:...` asks for.
//
//   gossip[:topology=T][,mixing=M][,algorithm=A][,order=cta|atc][,gamma=G][,overlap=0|1]
//
// topology (gossip_graph.h): ring (default; onepeer-exp for sgp), torus, exp, onepeer-exp,
//   random-regular:degree=D, complete, file:PATH.
// mixing (gossip_mixing.h): uniform or metropolis; default metropolis on undirected graphs,
//   uniform on directed ones.
// algorithm:
//   dpsgd   D-PSGD (Lian et al. 2017). order=cta (default, the paper's): the model a rank had
//           before its local step is mixed and the step's update added,
//           x_i <- sum_j W_ij x_j + (local update); order=atc: the rank mixes the models after
//           the local step, x_i <- sum_j W_ij (x_j + local update_j).
//   choco   CHOCO-SGD (Koloskova et al. 2019) with the compressor of --compress and consensus
//           step `gamma` (default 0.9, the default consensus step of the authors' code).
//   dcd     DCD-PSGD (Tang et al. 2018): compressed differences of the models.
//   ecd     ECD-PSGD (Tang et al. 2018): compressed extrapolations of the models.
//   sgp     Stochastic Gradient Push (Assran et al. 2019): push-sum over a directed graph;
//           overlap=1 lets each round's messages arrive during the next step.
// The synchronization (--sync) decides when: bsp gossips after every step, local:period=H every
// H steps (D-PSGD's mixing), asp runs AD-PSGD (Lian et al. 2018). The strategy factory
// (strategy.h) checks which combinations run.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "frugal/gossip_graph.h"
#include "frugal/gossip_mixing.h"
#include "frugal/status.h"

namespace frugal {

enum class GossipAlgorithm { kDpsgd, kChoco, kDcd, kEcd, kSgp };

struct GossipSpec {
  TopologySpec topology;
  std::optional<MixingKind> mixing;  // unset: metropolis on undirected graphs, uniform otherwise
  GossipAlgorithm algorithm = GossipAlgorithm::kDpsgd;
  bool atc = false;      // dpsgd: mix after the local step
  double gamma = 0.9;    // choco: consensus step
  bool overlap = false;  // sgp: one-step overlap
};

std::string_view GossipAlgorithmName(GossipAlgorithm algorithm);

// The items after "gossip:" (empty: every default). kInvalidArgument naming what is accepted.
StatusOr<GossipSpec> ParseGossipSpec(std::string_view items);
// "topology=ring,mixing=metropolis,algorithm=dpsgd,order=cta" with every item spelled out.
std::string GossipSpecName(const GossipSpec& spec);

// The mixing matrix the spec asks for on `topology` (the default when unset).
MixingKind MixingOf(const GossipSpec& spec, const Topology& topology);

}  // namespace frugal
