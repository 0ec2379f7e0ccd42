// Alpha-beta-gamma cost models of the all-reduce algorithms and the alpha-beta fit.
//
// Model (Hockney; Thakur, Rabenseifner and Gropp 2005): a message of m bytes costs alpha + m beta,
// reducing m bytes costs m gamma, a rank can send one message and receive one at the same time
// (full duplex, one port). For n ranks and N bytes (p = largest power of two <= n):
//   ring          2(n-1) alpha + 2(n-1)/n N beta + (n-1)/n N gamma
//   rd            log2(p) (alpha + N beta + N gamma), plus, when n != p, the pre-step
//                 (alpha + N beta + N gamma) and the post-step (alpha + N beta)
//   rabenseifner  2 log2(p) alpha + 2 (p-1)/p N beta + (p-1)/p N gamma, plus the same pre/post
//                 steps when n != p
//   tree          segments of m bytes, S = ceil(N/m), h = height of the heap tree: the pipeline
//                 takes h + S - 1 stages; in a stage the busiest rank receives k segments from its
//                 children and one from its parent and sends the reverse (k = 2 for n >= 3, the
//                 reduce of one segment overlapping the broadcast of an earlier one) and adds k:
//                 (k+1) (h+S-1) (alpha + m beta) + k (h+S-1) m gamma, about 3 N beta for many
//                 segments (N beta for n = 2)
//   dbtree        the same with each tree carrying N/2 (m <= N/2), h the in-order trees' height and
//                 the load summed over both trees: a rank interior in one tree and a leaf in the
//                 other moves 4 half-size segments each way per stage: about 2 N beta, the ring's
//                 volume, which is the point of two trees
//   hier          L = ranks_per_host, H = ceil(n/L): the direct all-reduce inside each host (a
//                 host's ranks share memory), ring across the H leaders on N bytes, intra-host
//                 pipelined binomial broadcast (ceil(log2 L) S (alpha + m beta)); one host (L >= n)
//                 is the direct all-reduce, one rank per host the ring
//   torus         R rows, C = n/R columns: ring reduce-scatter over C ((C-1) alpha + (C-1)/C N
//                 (beta + gamma)), ring all-reduce over R on N/C bytes, ring allgather over C
//                 ((C-1) alpha + (C-1)/C N beta)
//
// FitAlphaBeta: ordinary least squares of seconds = alpha + beta * bytes, with
// r^2 = 1 - SS_residual / SS_total (1 when every sample has the same time and the fit is exact).
#include "frugal/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "collectives/internal.h"
#include "collectives/tree.h"

namespace frugal {
namespace {

int Log2Floor(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}

int CeilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// What one pipelined stage costs on the busiest rank of one or more trees run side by side:
// `load` segments on its busier port (full duplex: received and sent proceed at once; a stage
// carries the reduce of one segment and the broadcast of an earlier one), `adds` segments reduced
// per stage, and the trees' height.
struct TreeLoad {
  int height = 0;
  int load = 0;
  int adds = 0;
};

TreeLoad AnalyzeTrees(const std::vector<std::vector<coll::TreeNode>>& trees, bool broadcast) {
  TreeLoad result;
  const size_t n = trees.front().size();
  for (const auto& tree : trees) {
    for (size_t r = 0; r < n; ++r) {
      int depth = 0;
      for (int q = static_cast<int>(r); tree[static_cast<size_t>(q)].parent >= 0;
           q = tree[static_cast<size_t>(q)].parent) {
        ++depth;
      }
      result.height = std::max(result.height, depth);
    }
  }
  for (size_t r = 0; r < n; ++r) {
    int children = 0;
    int parents = 0;
    for (const auto& tree : trees) {
      for (int c : tree[r].children) children += c >= 0;
      parents += tree[r].parent >= 0;
    }
    // Received: children's segments (reduce) + the parent's (broadcast); sent: the reverse. The
    // pipeline overlaps the reduce of one segment with the broadcast of an earlier one.
    const int received = children + (broadcast ? parents : 0);
    const int sent = parents + (broadcast ? children : 0);
    const int load = std::max(received, sent);
    result.load = std::max(result.load, load);
    result.adds = std::max(result.adds, children);
  }
  return result;
}

std::vector<coll::TreeNode> HeapTreeNodes(int n) {
  std::vector<coll::TreeNode> nodes;
  for (int r = 0; r < n; ++r) nodes.push_back(coll::HeapTree(n, r, 0));
  return nodes;
}

CostTerms Ring(int n, double bytes) {
  if (n <= 1) return {};
  const double f = static_cast<double>(n - 1) / n;
  return {2.0 * (n - 1), 2.0 * f * bytes, f * bytes};
}

// The direct all-reduce of n ranks on one machine: three rounds of n - 1 messages; (n - 1)/n of
// the buffer read from the peers twice (sum, copy), at the beta of the machine's memory rather
// than of a network.
CostTerms Direct(int n, double bytes) {
  const double f = static_cast<double>(n - 1) / n;
  return {3.0 * (n - 1), 2.0 * f * bytes, f * bytes};
}

// A pipeline of the given height over `bytes` in segments of `segment` bytes.
struct Pipeline {
  double m;         // bytes per segment
  double segments;  // S
  double stages;    // h + S - 1
};
Pipeline Segmented(double bytes, double segment, int height) {
  const double m = (segment <= 0 || segment >= bytes) ? bytes : segment;
  const double s = std::ceil(bytes / m);
  return {m, s, height + s - 1};
}

CostTerms TreeCost(const TreeLoad& load, const Pipeline& pl) {
  return {load.load * pl.stages, load.load * pl.stages * pl.m, load.adds * pl.stages * pl.m};
}

}  // namespace

CostTerms AllreduceCost(AllreduceAlgorithm algorithm, const CostShape& shape) {
  const int n = shape.ranks;
  const double bytes = shape.bytes;
  if (n <= 1 || bytes <= 0) return {};
  const int lg = Log2Floor(n);
  const int p = 1 << lg;
  const bool folded = p != n;
  const double segment =
      shape.segment_bytes.value_or(static_cast<double>(DefaultSegmentBytes(algorithm)));
  switch (algorithm) {
    case AllreduceAlgorithm::kRing:
      return Ring(n, bytes);
    case AllreduceAlgorithm::kRecursiveDoubling: {
      CostTerms c{static_cast<double>(lg), lg * bytes, lg * bytes};
      if (folded) {
        c.latency_terms += 2;
        c.bandwidth_bytes += 2 * bytes;
        c.compute_bytes += bytes;
      }
      return c;
    }
    case AllreduceAlgorithm::kRabenseifner: {
      const double f = static_cast<double>(p - 1) / p;
      CostTerms c{2.0 * lg, 2 * f * bytes, f * bytes};
      if (folded) {
        c.latency_terms += 2;
        c.bandwidth_bytes += 2 * bytes;
        c.compute_bytes += bytes;
      }
      return c;
    }
    case AllreduceAlgorithm::kBinaryTree: {
      const TreeLoad load = AnalyzeTrees({HeapTreeNodes(n)}, /*broadcast=*/true);
      return TreeCost(load, Segmented(bytes, segment, load.height));
    }
    case AllreduceAlgorithm::kDoubleBinaryTree: {
      std::vector<std::vector<coll::TreeNode>> trees(2);
      for (int r = 0; r < n; ++r) {
        const auto both = coll::DoubleTree(n, r);
        trees[0].push_back(both[0]);
        trees[1].push_back(both[1]);
      }
      const TreeLoad load = AnalyzeTrees(trees, /*broadcast=*/true);
      return TreeCost(load, Segmented(bytes / 2, segment, load.height));
    }
    case AllreduceAlgorithm::kHierarchical: {
      const int local = std::clamp(shape.ranks_per_host, 1, n);
      if (local == n) return Direct(n, bytes);  // one host
      const int hosts = (n + local - 1) / local;
      CostTerms c = Ring(hosts, bytes);
      if (local > 1) {
        c += Direct(local, bytes);
        // Binomial broadcast: the leader sends each of the S segments once per level.
        const Pipeline pieces = Segmented(bytes, segment, 1);
        const double sends = CeilLog2(local) * pieces.segments;
        c.latency_terms += sends;
        c.bandwidth_bytes += sends * pieces.m;
      }
      return c;
    }
    case AllreduceAlgorithm::kTorus2D: {
      int rows = shape.torus_rows;
      if (rows <= 0 || rows > n || n % rows != 0) rows = coll::TorusRows(n, 0);
      const int cols = n / rows;
      const double fc = static_cast<double>(cols - 1) / cols;
      CostTerms c{2.0 * (cols - 1), 2 * fc * bytes, fc * bytes};
      const CostTerms vertical = Ring(rows, bytes / cols);
      c.latency_terms += vertical.latency_terms;
      c.bandwidth_bytes += vertical.bandwidth_bytes;
      c.compute_bytes += vertical.compute_bytes;
      return c;
    }
    case AllreduceAlgorithm::kDirect:
      return Direct(n, bytes);
  }
  return {};
}

StatusOr<LinearFit> FitAlphaBeta(std::span<const double> bytes, std::span<const double> seconds) {
  if (bytes.size() != seconds.size()) {
    return InvalidArgumentError(
        fmt::format("alpha-beta fit: {} sizes but {} times", bytes.size(), seconds.size()));
  }
  const size_t k = bytes.size();
  if (k < 2) return InvalidArgumentError("alpha-beta fit: needs at least two samples");
  double mean_x = 0;
  double mean_y = 0;
  for (size_t i = 0; i < k; ++i) {
    if (!std::isfinite(bytes[i]) || !std::isfinite(seconds[i])) {
      return InvalidArgumentError(fmt::format("alpha-beta fit: sample {} is not finite", i));
    }
    mean_x += bytes[i];
    mean_y += seconds[i];
  }
  mean_x /= static_cast<double>(k);
  mean_y /= static_cast<double>(k);
  double sxx = 0;
  double sxy = 0;
  double syy = 0;
  for (size_t i = 0; i < k; ++i) {
    const double dx = bytes[i] - mean_x;
    const double dy = seconds[i] - mean_y;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  if (sxx <= 0) {
    return InvalidArgumentError("alpha-beta fit: needs at least two distinct message sizes");
  }
  LinearFit fit;
  fit.beta = sxy / sxx;
  fit.alpha = mean_y - fit.beta * mean_x;
  double residual = 0;
  for (size_t i = 0; i < k; ++i) {
    const double e = seconds[i] - (fit.alpha + fit.beta * bytes[i]);
    residual += e * e;
  }
  fit.r2 = syy > 0 ? 1.0 - residual / syy : (residual <= 0 ? 1.0 : 0.0);
  return fit;
}

}  // namespace frugal
