// Communication graphs of decentralized (gossip) training: which rank talks to which.
//
// A Topology is a graph over the ranks 0..n-1, static or time-varying. A time-varying graph has
// `period` phases and step s uses phase s mod period. Edges are directed: j in Out(i, s) means
// rank i sends to rank j at step s, and then i is in In(j, s). An undirected graph holds both
// directions of every edge, so Out(i, s) == In(i, s). No self loops; neighbour lists ascending.
//
// The graphs (TopologySpec, spelled as in --arch gossip:topology=...):
//   ring             i <-> i+1 mod n (a ring of 2 is one edge, a ring of 1 has none)
//   torus            2D torus of r x c = n ranks, r the largest divisor of n with r <= sqrt(n);
//                    i = (row, col) <-> (row +- 1, col), (row, col +- 1), wrapping
//   exp              undirected exponential graph: i <-> i +- 2^k mod n for 2^k < n
//   onepeer-exp      directed, time-varying: at step s, i -> i + 2^(s mod tau) mod n, with
//                    tau = ceil(log2 n) phases (Assran et al.'s one-peer exponential graph)
//   random-regular:degree=D
//                    a random undirected D-regular graph, drawn from `seed` (the same graph on
//                    every rank without communication), redrawn until it is simple and connected
//   complete         every pair
//   file:PATH        undirected edges from a text file: one "u v" pair of ranks per line, '#'
//                    starts a comment, blank lines are ignored, repeated edges count once
//
// Thread safety: a Topology is immutable after construction.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"

namespace frugal {

enum class TopologyKind {
  kRing,
  kTorus,
  kExp,
  kOnePeerExp,
  kRandomRegular,
  kComplete,
  kFile,
  kEdges
};

struct TopologySpec {
  TopologyKind kind = TopologyKind::kRing;
  int degree = 0;     // kRandomRegular
  std::string path;   // kFile
  std::string edges;  // kEdges: "0-1/1-2/..."
};

// "ring", "torus", "exp", "onepeer-exp", "random-regular:degree=D", "complete", "file:PATH"
// (undirected edges "u v", one per line) or "edges:U-V/U-V/..." (the same edges in the spec).
// kInvalidArgument naming what is accepted.
StatusOr<TopologySpec> ParseTopologySpec(std::string_view text);
std::string TopologySpecName(const TopologySpec& spec);

class Topology {
 public:
  // The graph of `spec` over `n` ranks. `seed` draws random-regular graphs. kInvalidArgument
  // when the graph cannot be built for n (random-regular: D >= n, or n x D odd; file: a rank out
  // of range, a self loop, a line that is not two ranks) or, for n > 1, is not connected; kIoError
  // when the file cannot be read.
  static StatusOr<Topology> Make(const TopologySpec& spec, int n, uint64_t seed);

  // From out-neighbour lists, out[phase][rank] (any order, no duplicates, no self loops).
  static StatusOr<Topology> FromOutNeighbours(std::string name,
                                              std::vector<std::vector<std::vector<int>>> out);

  const std::string& name() const { return name_; }
  int size() const { return n_; }
  int period() const { return static_cast<int>(out_.size()); }
  // Every phase holds both directions of every edge.
  bool undirected() const { return undirected_; }

  std::span<const int> Out(int rank, uint64_t step) const;
  std::span<const int> In(int rank, uint64_t step) const;

  // The union over all phases (as an undirected graph when it is one) is connected.
  bool Connected() const;
  // An undirected graph whose ranks split into two sides with every edge between the sides;
  // `side` (if not null) receives the side of each rank (rank 0 on side 0).
  bool Bipartite(std::vector<int>* side) const;
  // The number of edges (undirected: pairs) over all phases.
  size_t EdgeCount() const;

 private:
  std::string name_;
  int n_ = 0;
  bool undirected_ = true;
  std::vector<std::vector<std::vector<int>>> out_;  // [phase][rank], ascending
  std::vector<std::vector<std::vector<int>>> in_;
};

}  // namespace frugal
