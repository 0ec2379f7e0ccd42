// Topologies, mixing matrices and the spectral gap against hand-computed graphs and values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "frugal/gossip_graph.h"
#include "frugal/gossip_mixing.h"

namespace frugal {
namespace {

std::vector<int> Vec(std::span<const int> s) { return {s.begin(), s.end()}; }

Topology Make(std::string_view spec, int n, uint64_t seed = 1) {
  auto parsed = ParseTopologySpec(spec);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto t = Topology::Make(*parsed, n, seed);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

MixingMatrix Mix(const Topology& t, MixingKind kind) {
  auto w = MixingMatrix::Make(t, kind);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return std::move(w).value();
}

TEST(GossipTopology, Ring) {
  const Topology t = Make("ring", 5);
  EXPECT_TRUE(t.undirected());
  EXPECT_EQ(t.period(), 1);
  EXPECT_EQ(Vec(t.Out(0, 0)), (std::vector<int>{1, 4}));
  EXPECT_EQ(Vec(t.In(3, 7)), (std::vector<int>{2, 4}));
  EXPECT_EQ(t.EdgeCount(), 5u);
  // A ring of 2 is one edge; of 1, none.
  EXPECT_EQ(Vec(Make("ring", 2).Out(1, 0)), (std::vector<int>{0}));
  EXPECT_TRUE(Make("ring", 1).Out(0, 0).empty());
}

TEST(GossipTopology, TorusIsTheLargestSquareishGrid) {
  // 12 = 3 x 4: rank 5 = (1, 1) has (0,1)=1, (2,1)=9, (1,0)=4, (1,2)=6.
  const Topology t = Make("torus", 12);
  EXPECT_EQ(Vec(t.Out(5, 0)), (std::vector<int>{1, 4, 6, 9}));
  // 6 = 2 x 3: up and down are the same rank.
  EXPECT_EQ(Vec(Make("torus", 6).Out(0, 0)), (std::vector<int>{1, 2, 3}));
  // A prime is a 1 x n ring.
  EXPECT_EQ(Vec(Make("torus", 7).Out(0, 0)), (std::vector<int>{1, 6}));
}

TEST(GossipTopology, Exponential) {
  // 8 ranks: +-1, +-2, +-4.
  EXPECT_EQ(Vec(Make("exp", 8).Out(0, 0)), (std::vector<int>{1, 2, 4, 6, 7}));
  // 5 ranks: +-1, +-2, +-4 = complete.
  EXPECT_EQ(Vec(Make("exp", 5).Out(3, 0)), (std::vector<int>{0, 1, 2, 4}));
}

TEST(GossipTopology, OnePeerExponentialRotates) {
  const Topology t = Make("onepeer-exp", 8);
  EXPECT_FALSE(t.undirected());
  EXPECT_EQ(t.period(), 3);
  EXPECT_EQ(Vec(t.Out(6, 0)), (std::vector<int>{7}));
  EXPECT_EQ(Vec(t.Out(6, 1)), (std::vector<int>{0}));
  EXPECT_EQ(Vec(t.Out(6, 2)), (std::vector<int>{2}));
  EXPECT_EQ(Vec(t.Out(6, 3)), (std::vector<int>{7}));
  EXPECT_EQ(Vec(t.In(6, 2)), (std::vector<int>{2}));
  EXPECT_EQ(Make("onepeer-exp", 5).period(), 3);  // +1, +2, +4
  EXPECT_TRUE(Make("onepeer-exp", 1).Out(0, 0).empty());
}

TEST(GossipTopology, RandomRegularIsSeededRegularAndConnected) {
  for (int n : {4, 6, 8, 9, 16}) {
    for (int degree : {2, 3, 4, n - 1}) {
      if (degree >= n || (n * degree) % 2 != 0) continue;
      const std::string spec = "random-regular:degree=" + std::to_string(degree);
      const Topology a = Make(spec, n, 7);
      const Topology b = Make(spec, n, 7);
      EXPECT_TRUE(a.Connected());
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(a.Out(i, 0).size(), static_cast<size_t>(degree)) << spec << " n=" << n;
        EXPECT_EQ(Vec(a.Out(i, 0)), Vec(b.Out(i, 0)));
      }
    }
  }
  // Another seed, another graph (16 ranks of degree 3 have many).
  const Topology a = Make("random-regular:degree=3", 16, 1);
  const Topology b = Make("random-regular:degree=3", 16, 2);
  bool differ = false;
  for (int i = 0; i < 16; ++i) differ |= Vec(a.Out(i, 0)) != Vec(b.Out(i, 0));
  EXPECT_TRUE(differ);
}

TEST(GossipTopology, RandomRegularRefusals) {
  auto make = [](std::string_view spec, int n) {
    return Topology::Make(ParseTopologySpec(spec).value(), n, 1).status();
  };
  EXPECT_NE(make("random-regular:degree=3", 5).message().find("must be even"), std::string::npos);
  EXPECT_NE(make("random-regular:degree=4", 4).message().find("degree must be in [1, 3]"),
            std::string::npos);
  EXPECT_NE(make("random-regular:degree=1", 6).message().find("never connected"),
            std::string::npos);
  EXPECT_NE(ParseTopologySpec("random-regular").status().message().find("needs degree=D"),
            std::string::npos);
}

TEST(GossipTopology, EdgeFile) {
  const std::string path = ::testing::TempDir() + "gossip_edges.txt";
  {
    std::ofstream f(path);
    f << "# a path with a chord\n0 1\n1 2  # comment\n\n2 3\n3 0\n1 0\n";
  }
  const Topology t = Make("file:" + path, 4);
  EXPECT_TRUE(t.undirected());
  EXPECT_EQ(t.EdgeCount(), 4u);
  EXPECT_EQ(Vec(t.Out(0, 0)), (std::vector<int>{1, 3}));
  auto make = [&](int n) {
    return Topology::Make(ParseTopologySpec("file:" + path).value(), n, 1);
  };
  EXPECT_NE(make(3).status().message().find("line 5: rank 3 but the job has 3 ranks"),
            std::string::npos)
      << make(3).status().ToString();
  EXPECT_NE(make(6).status().message().find("not connected"), std::string::npos);
  {
    std::ofstream f(path);
    f << "0 1\n1 1\n";
  }
  EXPECT_NE(make(2).status().message().find("line 2: self loop at rank 1"), std::string::npos);
  {
    std::ofstream f(path);
    f << "0 1 2\n";
  }
  EXPECT_NE(make(3).status().message().find("expected two ranks"), std::string::npos);
  EXPECT_EQ(
      Topology::Make(ParseTopologySpec("file:/nonexistent/edges").value(), 2, 1).status().code(),
      StatusCode::kIoError);
}

// The edge list in the spec: the same graph as the file, the same checks.
TEST(GossipTopology, EdgesInTheSpec) {
  const Topology t = Make("edges:0-1/1-2/2-3/3-0/1-0", 4);
  EXPECT_TRUE(t.undirected());
  EXPECT_EQ(t.EdgeCount(), 4u);
  EXPECT_EQ(Vec(t.Out(0, 0)), (std::vector<int>{1, 3}));
  EXPECT_EQ(t.name(), "edges:0-1/1-2/2-3/3-0/1-0");
  // Rank 3 a leaf of a ring over the other seven: one neighbour, the others two or three.
  const Topology leaf = Make("edges:0-1/1-2/2-4/4-5/5-6/6-7/7-0/2-3", 8);
  EXPECT_EQ(Vec(leaf.Out(3, 0)), (std::vector<int>{2}));
  EXPECT_EQ(Vec(leaf.Out(2, 0)), (std::vector<int>{1, 3, 4}));
  auto make = [](std::string_view spec, int n) {
    return Topology::Make(ParseTopologySpec(spec).value(), n, 1).status();
  };
  EXPECT_NE(make("edges:0-1/1-3", 3)
                .message()
                .find("edges:0-1/1-3 edge 2: rank 3 but the job "
                      "has 3 ranks"),
            std::string::npos)
      << make("edges:0-1/1-3", 3).ToString();
  EXPECT_NE(make("edges:0-1/2-2", 3).message().find("edge 2: self loop at rank 2"),
            std::string::npos);
  EXPECT_NE(make("edges:0-1-2", 3).message().find("expected two ranks 'U-V'"), std::string::npos);
  EXPECT_NE(make("edges:0-1", 3).message().find("not connected"), std::string::npos);
  for (const char* bad : {"edges:", "edges:0 1", "edges:0-1,1-2", "edges:a-b"}) {
    const Status s = ParseTopologySpec(bad).status();
    EXPECT_NE(s.message().find("expected edges:U-V/U-V/..."), std::string::npos) << bad;
  }
}

TEST(GossipTopology, ParseRefusesUnknownNames) {
  EXPECT_NE(ParseTopologySpec("star").status().message().find("accepted: ring, torus"),
            std::string::npos);
  EXPECT_NE(ParseTopologySpec("ring:degree=2").status().message().find("degree"),
            std::string::npos);
  EXPECT_EQ(TopologySpecName(ParseTopologySpec("random-regular:degree=4").value()),
            "random-regular:degree=4");
}

TEST(GossipTopology, Bipartite) {
  std::vector<int> side;
  EXPECT_TRUE(Make("ring", 6).Bipartite(&side));
  EXPECT_EQ(side, (std::vector<int>{0, 1, 0, 1, 0, 1}));
  EXPECT_FALSE(Make("ring", 5).Bipartite(nullptr));
  EXPECT_TRUE(Make("torus", 16).Bipartite(nullptr));
  EXPECT_FALSE(Make("complete", 3).Bipartite(nullptr));
  EXPECT_FALSE(Make("onepeer-exp", 4).Bipartite(nullptr));  // directed
}

TEST(GossipMixing, UniformRingIsOneThird) {
  const MixingMatrix w = Mix(Make("ring", 5), MixingKind::kUniform);
  EXPECT_TRUE(w.DoublyStochastic());
  EXPECT_TRUE(w.Symmetric());
  EXPECT_DOUBLE_EQ(w.Weight(0, 4, 0), 1.0 / 3);
  EXPECT_DOUBLE_EQ(w.Weight(0, 0, 0), 1.0 / 3);
  EXPECT_DOUBLE_EQ(w.Weight(0, 2, 0), 0.0);
  ASSERT_EQ(w.Row(2, 0).size(), 3u);
  EXPECT_EQ(w.Row(2, 0)[0].rank, 1);
  EXPECT_EQ(w.Row(2, 0)[2].rank, 3);
}

TEST(GossipMixing, MetropolisOfAnIrregularGraph) {
  // A star with center 0 and leaves 1, 2, 3 plus the edge 2-3 (file): degrees 3, 1, 2, 2.
  const std::string path = ::testing::TempDir() + "gossip_star.txt";
  {
    std::ofstream f(path);
    f << "0 1\n0 2\n0 3\n2 3\n";
  }
  const Topology t = Make("file:" + path, 4);
  const MixingMatrix m = Mix(t, MixingKind::kMetropolis);
  EXPECT_TRUE(m.DoublyStochastic());
  EXPECT_TRUE(m.Symmetric());
  EXPECT_DOUBLE_EQ(m.Weight(0, 1, 0), 0.25);     // 1 / (1 + max(3, 1))
  EXPECT_DOUBLE_EQ(m.Weight(2, 3, 0), 1.0 / 3);  // 1 / (1 + max(2, 2))
  EXPECT_DOUBLE_EQ(m.Weight(1, 1, 0), 0.75);     // 1 - 1/4
  EXPECT_DOUBLE_EQ(m.Weight(2, 2, 0), 1 - 0.25 - 1.0 / 3);
  // Uniform weights on it are column- but not row-stochastic.
  const MixingMatrix u = Mix(t, MixingKind::kUniform);
  EXPECT_TRUE(u.ColumnStochastic());
  EXPECT_FALSE(u.RowStochastic());
  EXPECT_DOUBLE_EQ(u.Weight(1, 0, 0), 0.25);  // 0 splits its value in 4
  EXPECT_DOUBLE_EQ(u.Weight(0, 1, 0), 0.5);   // 1 splits its value in 2
}

TEST(GossipMixing, MetropolisRefusesDirectedGraphs) {
  const auto w = MixingMatrix::Make(Make("onepeer-exp", 4), MixingKind::kMetropolis);
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("needs an undirected graph"), std::string::npos);
  // A ring of 2 with metropolis is fine: [[1/2, 1/2], [1/2, 1/2]].
  const MixingMatrix two = Mix(Make("ring", 2), MixingKind::kMetropolis);
  EXPECT_DOUBLE_EQ(two.Weight(0, 1, 0), 0.5);
  EXPECT_DOUBLE_EQ(SpectralGap(two), 1.0);
}

TEST(GossipMixing, OnePeerExponentialUniformIsDoublyStochasticButNotSymmetric) {
  const MixingMatrix w = Mix(Make("onepeer-exp", 8), MixingKind::kUniform);
  EXPECT_TRUE(w.DoublyStochastic());
  EXPECT_FALSE(w.Symmetric());
  EXPECT_DOUBLE_EQ(w.Weight(3, 2, 0), 0.5);  // 2 -> 3 at phase 0
  EXPECT_DOUBLE_EQ(w.Weight(3, 1, 1), 0.5);  // 1 -> 3 at phase 1
  EXPECT_EQ(w.period(), 3);
}

// Spectral gaps with closed forms.
TEST(GossipMixing, SpectralGapClosedForms) {
  constexpr double kPi = 3.14159265358979323846;
  for (int n : {3, 4, 5, 8, 16, 31}) {
    // Uniform ring: eigenvalues (1 + 2 cos(2 pi k / n)) / 3; the second largest modulus is
    // max over k != 0 of |1 + 2 cos(2 pi k / n)| / 3.
    double second = 0;
    for (int k = 1; k < n; ++k) {
      second = std::max(second, std::fabs(1 + 2 * std::cos(2 * kPi * k / n)) / 3);
    }
    EXPECT_NEAR(SpectralGap(Mix(Make("ring", n), MixingKind::kMetropolis)), 1 - second, 1e-9) << n;
    // Complete graph, uniform: J, the exact average in one step.
    EXPECT_NEAR(SpectralGap(Mix(Make("complete", n), MixingKind::kUniform)), 1.0, 1e-9) << n;
  }
  EXPECT_DOUBLE_EQ(SpectralGap(Mix(Make("ring", 1), MixingKind::kUniform)), 1.0);
  // The one-peer exponential graph of 2^k ranks averages exactly in k steps (Ying et al. 2021):
  // the product over a period is J, whose second eigenvalue is 0. Eigen finds it to ~1e-16,
  // which the k-th root turns into ~1e-4.
  for (int n : {2, 4, 8, 16}) {
    EXPECT_NEAR(SpectralGap(Mix(Make("onepeer-exp", n), MixingKind::kUniform)), 1.0, 1e-3) << n;
  }
  // ... but not with 6 ranks.
  const double gap6 = SpectralGap(Mix(Make("onepeer-exp", 6), MixingKind::kUniform));
  EXPECT_GT(gap6, 0.0);
  EXPECT_LT(gap6, 0.99);
  // Larger degree, larger gap.
  const double ring = SpectralGap(Mix(Make("ring", 16), MixingKind::kMetropolis));
  const double torus = SpectralGap(Mix(Make("torus", 16), MixingKind::kMetropolis));
  const double exp = SpectralGap(Mix(Make("exp", 16), MixingKind::kMetropolis));
  EXPECT_LT(ring, torus);
  EXPECT_LT(torus, exp);
}

}  // namespace
}  // namespace frugal
