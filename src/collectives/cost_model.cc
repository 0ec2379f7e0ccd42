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
//   tree          segments of m bytes, S = ceil(N/m), h = height of the heap tree; the pipeline
//                 takes h + S - 1 stages for the reduce and as many for the broadcast, and an
//                 interior rank receives two segments per reduce stage and sends two per
//                 broadcast stage: 4 (h+S-1) alpha + 4 (h+S-1) m beta + 2 (h+S-1) m gamma
//                 (about 4 N beta for large S)
//   dbtree        the same with each tree carrying N/2 (m <= N/2) and h the in-order tree's height;
//                 a rank is interior in one tree and a leaf in the other, so per stage it still
//                 moves two segments each way: 4 (h+S-1) (alpha + m beta) + 2 (h+S-1) m gamma,
//                 about 2 N beta for large S, which is the point of two trees
//   hier          L = ranks_per_host, H = ceil(n/L): intra-host pipelined tree reduce over L
//                 (2 (hL+S-1) (alpha + m beta + m gamma)), ring across the H leaders on N bytes,
//                 intra-host pipelined binomial broadcast (ceil(log2 L) S (alpha + m beta))
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

// Height (edges on the longest root-to-leaf path) of a tree given by its parent function.
template <typename ParentOf>
int TreeHeight(int n, ParentOf parent_of) {
  int height = 0;
  for (int r = 0; r < n; ++r) {
    int depth = 0;
    for (int q = r; parent_of(q) >= 0; q = parent_of(q)) ++depth;
    height = std::max(height, depth);
  }
  return height;
}

CostTerms Ring(int n, double bytes) {
  if (n <= 1) return {};
  const double f = static_cast<double>(n - 1) / n;
  return {2.0 * (n - 1), 2.0 * f * bytes, f * bytes};
}

// A pipeline of the given height over `bytes` in segments of `segment` bytes.
struct Pipeline {
  double m;       // bytes per segment
  double stages;  // h + S - 1
};
Pipeline Segmented(double bytes, double segment, int height) {
  const double m = (segment <= 0 || segment >= bytes) ? bytes : segment;
  const double s = std::ceil(bytes / m);
  return {m, height + s - 1};
}

}  // namespace

CostTerms AllreduceCost(AllreduceAlgorithm algorithm, const CostShape& shape) {
  const int n = shape.ranks;
  const double bytes = shape.bytes;
  if (n <= 1 || bytes <= 0) return {};
  const int lg = Log2Floor(n);
  const int p = 1 << lg;
  const bool folded = p != n;
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
      const int h = TreeHeight(n, [n](int r) { return coll::HeapTree(n, r, 0).parent; });
      const Pipeline pl = Segmented(bytes, shape.segment_bytes, h);
      return {4 * pl.stages, 4 * pl.stages * pl.m, 2 * pl.stages * pl.m};
    }
    case AllreduceAlgorithm::kDoubleBinaryTree: {
      const int h = TreeHeight(n, [n](int r) { return coll::InOrderTree(n, r).parent; });
      const Pipeline pl = Segmented(bytes / 2, shape.segment_bytes, h);
      return {4 * pl.stages, 4 * pl.stages * pl.m, 2 * pl.stages * pl.m};
    }
    case AllreduceAlgorithm::kHierarchical: {
      const int local = std::clamp(shape.ranks_per_host, 1, n);
      const int hosts = (n + local - 1) / local;
      CostTerms c = Ring(hosts, bytes);
      if (local > 1) {
        const int h =
            TreeHeight(local, [local](int r) { return coll::HeapTree(local, r, 0).parent; });
        const Pipeline reduce = Segmented(bytes, shape.segment_bytes, h);
        c.latency_terms += 2 * reduce.stages;
        c.bandwidth_bytes += 2 * reduce.stages * reduce.m;
        c.compute_bytes += 2 * reduce.stages * reduce.m;
        // Binomial broadcast: the leader sends each of the S segments once per level.
        const double segments = reduce.stages - h + 1;
        const double sends = CeilLog2(local) * segments;
        c.latency_terms += sends;
        c.bandwidth_bytes += sends * reduce.m;
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
