// SC list encoding (Tal and Vardy 2015, min-sum metrics), recursive over the code tree.
//
// Node(l, s, offset) receives P paths, each with the s LLRs of the node (path-major in `l`) and a
// metric, and returns at most `list` survivors: for each, the entering path it descends from
// (origin), its codeword of the node and its metric. At a leaf, a frozen position decides 0 and
// adds |LLR| to the metric when the LLR is negative; an information position splits every path
// into the decision that follows the sign (metric unchanged) and the other one (metric + |LLR|),
// and the `list` candidates of smallest metric survive (a stable sort: path order, then the
// sign-following decision first). An inner node runs its left child on f of the LLRs, its right
// child on g of the LLRs of each left survivor's origin with that survivor's partial sums, and
// composes each final survivor's codeword (x_left ^ x_right, x_right) and origin.
//
// Randomized rounding replaces the choice at an information leaf by a draw: 1 with probability
// 1 / (1 + exp(llr_scale * LLR)).
#include "compress/polar_list.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "compress/polar_sc.h"
#include "frugal/check.h"

namespace frugal::polar {
namespace {

struct Survivors {
  std::vector<uint32_t> origin;
  std::vector<uint8_t> x;  // survivor-major, s bits each
  std::vector<double> metric;
  size_t count() const { return origin.size(); }
};

struct Candidate {
  uint32_t path;
  uint8_t bit;
  double metric;
};

class ListEncoder {
 public:
  ListEncoder(const InfoSet& set, const ListOptions& options) : set_(set), options_(options) {}

  void Node(const std::vector<float>& l, size_t s, size_t offset, const std::vector<double>& metric,
            Survivors* out) {
    const size_t paths = metric.size();
    if (s == 1) {
      Leaf(l, offset, metric, out);
      return;
    }
    const size_t h = s / 2;
    std::vector<float> child(paths * h);
    for (size_t p = 0; p < paths; ++p) {
      const float* lp = l.data() + p * s;
      for (size_t i = 0; i < h; ++i) child[p * h + i] = MinSumF(lp[i], lp[h + i]);
    }
    Survivors left;
    Node(child, h, offset, metric, &left);
    child.assign(left.count() * h, 0.0f);
    for (size_t t = 0; t < left.count(); ++t) {
      const float* lp = l.data() + left.origin[t] * s;
      const uint8_t* xa = left.x.data() + t * h;
      for (size_t i = 0; i < h; ++i) child[t * h + i] = MinSumG(lp[h + i], lp[i], xa[i] != 0);
    }
    Survivors right;
    Node(child, h, offset + h, left.metric, &right);
    out->origin.resize(right.count());
    out->x.resize(right.count() * s);
    out->metric = right.metric;
    for (size_t t = 0; t < right.count(); ++t) {
      const uint32_t a = right.origin[t];
      out->origin[t] = left.origin[a];
      const uint8_t* xa = left.x.data() + a * h;
      const uint8_t* xb = right.x.data() + t * h;
      uint8_t* x = out->x.data() + t * s;
      for (size_t i = 0; i < h; ++i) {
        x[i] = xa[i] ^ xb[i];
        x[h + i] = xb[i];
      }
    }
  }

 private:
  void Leaf(const std::vector<float>& l, size_t offset, const std::vector<double>& metric,
            Survivors* out) {
    const size_t paths = metric.size();
    std::vector<Candidate> candidates;
    for (size_t p = 0; p < paths; ++p) {
      const float llr = l[p];
      const auto follow = static_cast<uint8_t>(llr < 0.0f);
      const double cost = std::fabs(static_cast<double>(llr));
      const auto path = static_cast<uint32_t>(p);
      if (!set_.info(offset)) {
        candidates.push_back({path, 0, metric[p] + (follow ? cost : 0.0)});
      } else if (options_.randomized) {
        const double one = 1.0 / (1.0 + std::exp(options_.llr_scale * static_cast<double>(llr)));
        const auto bit = static_cast<uint8_t>(options_.rng->UniformDouble() < one);
        candidates.push_back({path, bit, metric[p] + (bit != follow ? cost : 0.0)});
      } else {
        candidates.push_back({path, follow, metric[p]});
        candidates.push_back({path, static_cast<uint8_t>(1 - follow), metric[p] + cost});
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.metric < b.metric; });
    const size_t keep = std::min(candidates.size(), static_cast<size_t>(options_.list));
    out->origin.resize(keep);
    out->x.resize(keep);
    out->metric.resize(keep);
    for (size_t t = 0; t < keep; ++t) {
      out->origin[t] = candidates[t].path;
      out->x[t] = candidates[t].bit;
      out->metric[t] = candidates[t].metric;
    }
  }

  const InfoSet& set_;
  const ListOptions& options_;
};

}  // namespace

void ListEncode(std::span<const float> llr, const InfoSet& set, const ListOptions& options,
                std::span<uint64_t> x_words) {
  const size_t size = set.size();
  FRUGAL_CHECK_EQ(llr.size(), size, "LLRs of a polar block");
  FRUGAL_CHECK_EQ(x_words.size(), set.mask.size(), "codeword words of a polar block");
  FRUGAL_CHECK(options.list >= 1, "SC list of ", options.list, " paths");
  FRUGAL_CHECK(!options.randomized || (options.list == 1 && options.rng != nullptr),
               "randomized rounding needs one path and a random stream");
  ListEncoder encoder(set, options);
  Survivors survivors;
  encoder.Node(std::vector<float>(llr.begin(), llr.end()), size, 0, std::vector<double>{0.0},
               &survivors);
  size_t best = 0;
  double best_objective = 0;
  for (size_t t = 0; t < survivors.count(); ++t) {
    const uint8_t* x = survivors.x.data() + t * size;
    double objective = 0;
    for (size_t i = 0; i < size; ++i) {
      objective += x[i] ? -static_cast<double>(llr[i]) : static_cast<double>(llr[i]);
    }
    if (t == 0 || objective > best_objective) {
      best = t;
      best_objective = objective;
    }
  }
  std::fill(x_words.begin(), x_words.end(), 0);
  const uint8_t* x = survivors.x.data() + best * size;
  for (size_t i = 0; i < size; ++i) x_words[i / 64] |= uint64_t{x[i]} << (i % 64);
}

}  // namespace frugal::polar
