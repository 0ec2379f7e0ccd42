// Shapes of the trees (heap, in-order, double tree) and the torus grid choice.
#include "collectives/tree.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "collectives/internal.h"

namespace frugal::coll {
namespace {

// Checks that `nodes` is a spanning tree: one root, parent/child links agree, every rank reaches
// the root. Returns the root.
template <typename Make>
int ExpectSpanningTree(int n, Make make) {
  std::vector<TreeNode> nodes;
  for (int r = 0; r < n; ++r) nodes.push_back(make(r));
  int root = -1;
  for (int r = 0; r < n; ++r) {
    const TreeNode& node = nodes[static_cast<size_t>(r)];
    if (node.parent < 0) {
      EXPECT_EQ(root, -1) << "two roots in a tree of " << n;
      root = r;
    } else {
      EXPECT_LT(node.parent, n);
      const TreeNode& parent = nodes[static_cast<size_t>(node.parent)];
      EXPECT_TRUE(parent.children[0] == r || parent.children[1] == r)
          << "rank " << r << " not a child of its parent " << node.parent << " (n " << n << ")";
    }
    for (int child : node.children) {
      if (child < 0) continue;
      EXPECT_LT(child, n);
      EXPECT_EQ(nodes[static_cast<size_t>(child)].parent, r) << "n " << n;
    }
    EXPECT_TRUE(node.children[0] < 0 || node.children[0] != node.children[1]);
  }
  EXPECT_GE(root, 0);
  for (int r = 0; r < n; ++r) {
    int q = r;
    int steps = 0;
    while (nodes[static_cast<size_t>(q)].parent >= 0 && steps <= n) {
      q = nodes[static_cast<size_t>(q)].parent;
      ++steps;
    }
    EXPECT_EQ(q, root) << "rank " << r << " does not reach the root (n " << n << ")";
  }
  return root;
}

TEST(Trees, HeapTreeIsSpanningForAnyRoot) {
  for (int n = 1; n <= 70; ++n) {
    for (int root : {0, n / 2, n - 1}) {
      EXPECT_EQ(ExpectSpanningTree(n, [&](int r) { return HeapTree(n, r, root); }), root);
    }
  }
}

TEST(Trees, InOrderTreeIsSpanningWithEvenInteriorNodes) {
  for (int n = 1; n <= 70; ++n) {
    EXPECT_EQ(ExpectSpanningTree(n, [&](int r) { return InOrderTree(n, r); }), 0);
    for (int r = 1; r < n; r += 2) EXPECT_TRUE(InOrderTree(n, r).IsLeaf()) << n << " " << r;
  }
}

TEST(Trees, DoubleTreeInteriorNodesAreLeavesOfTheOtherTree) {
  for (int n = 2; n <= 70; ++n) {
    ExpectSpanningTree(n, [&](int r) { return DoubleTree(n, r)[0]; });
    ExpectSpanningTree(n, [&](int r) { return DoubleTree(n, r)[1]; });
    int interior_in_both = 0;
    for (int r = 0; r < n; ++r) {
      const auto trees = DoubleTree(n, r);
      if (!trees[0].IsLeaf() && !trees[1].IsLeaf()) ++interior_in_both;
    }
    if (n % 2 == 0) {
      EXPECT_EQ(interior_in_both, 0) << n;
    } else {
      EXPECT_LE(interior_in_both, 1) << n;
    }
  }
}

TEST(Torus, RowsClosestToSquare) {
  EXPECT_EQ(TorusRows(1, 0), 1);
  EXPECT_EQ(TorusRows(2, 0), 1);
  EXPECT_EQ(TorusRows(4, 0), 2);
  EXPECT_EQ(TorusRows(6, 0), 2);
  EXPECT_EQ(TorusRows(7, 0), 1);
  EXPECT_EQ(TorusRows(8, 0), 2);
  EXPECT_EQ(TorusRows(9, 0), 3);
  EXPECT_EQ(TorusRows(12, 0), 3);
  EXPECT_EQ(TorusRows(16, 0), 4);
  EXPECT_EQ(TorusRows(64, 0), 8);
  EXPECT_EQ(TorusRows(12, 4), 4);
}

}  // namespace
}  // namespace frugal::coll
