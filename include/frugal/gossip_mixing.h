// Mixing matrices of gossip: the weights with which a rank combines its neighbours' values.
//
// A gossip step computes x_i <- sum_j W_ij x_j over j in In(i, s) and i itself. W has one phase per
// phase of the topology. The matrices (--arch gossip:...,mixing=M):
//   uniform      every rank splits its value equally over itself and its out-neighbours:
//                W_ji = 1 / (|Out(i)| + 1) for j in Out(i) and j = i. Columns sum to 1 on any
//                graph (push-sum's need); rows too when all in-degrees equal the out-degrees'
//                common value (regular undirected graphs, the one-peer exponential graph).
//   metropolis   Metropolis-Hastings weights of an undirected graph: W_ij = 1 / (1 + max(d_i,
//                d_j)) for an edge {i, j}, W_ii = 1 - sum of the others. Symmetric and doubly
//                stochastic on any undirected graph; refused on a directed one.
//
// SpectralGap: 1 - the second largest eigenvalue modulus of W (symmetric W: 1 - max(|l_2|, |l_n|),
// the factor by which one gossip step at least shrinks the distance to the average). A
// time-varying W is measured over one period, W_T-1 ... W_0, as 1 - |l_2(product)|^(1/T).
// Eigenvalues come from Eigen (Debian libeigen3-dev).
//
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "frugal/gossip_graph.h"
#include "frugal/status.h"

namespace frugal {

enum class MixingKind { kUniform, kMetropolis };

// "uniform" or "metropolis"; kInvalidArgument naming both otherwise.
StatusOr<MixingKind> ParseMixingKind(std::string_view text);
std::string_view MixingKindName(MixingKind kind);

class MixingMatrix {
 public:
  struct Entry {
    int rank;       // j
    double weight;  // W_ij (a row) or W_ji (a column)
  };

  // kInvalidArgument for metropolis on a directed topology.
  static StatusOr<MixingMatrix> Make(const Topology& topology, MixingKind kind);

  MixingKind kind() const { return kind_; }
  int size() const { return n_; }
  int period() const { return static_cast<int>(rows_.size()); }

  // Row i at step s: (j, W_ij) for j in In(i, s) and i, ascending j. What rank i combines.
  std::span<const Entry> Row(int i, uint64_t step) const;
  // Column i at step s: (j, W_ji) for j in Out(i, s) and i, ascending j. What rank i sends where.
  std::span<const Entry> Column(int i, uint64_t step) const;
  // W_ij at step s (0 when there is no edge).
  double Weight(int i, int j, uint64_t step) const;

  // Within 1e-12, in every phase.
  bool RowStochastic() const;
  bool ColumnStochastic() const;
  bool DoublyStochastic() const { return RowStochastic() && ColumnStochastic(); }
  bool Symmetric() const;

  // The dense matrix of phase `phase`, row-major n x n.
  std::vector<double> Dense(int phase) const;

 private:
  MixingKind kind_ = MixingKind::kUniform;
  int n_ = 0;
  std::vector<std::vector<std::vector<Entry>>> rows_;  // [phase][i]
  std::vector<std::vector<std::vector<Entry>>> cols_;
};

// See above. 0 <= gap <= 1; 1 for a single rank.
double SpectralGap(const MixingMatrix& w);

}  // namespace frugal
