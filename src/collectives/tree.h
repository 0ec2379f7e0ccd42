// Binary trees over the ranks and the pipelined reduce(+broadcast) that runs along one of them.
// Used by the binary-tree, double-binary-tree and hierarchical all-reduces. Not installed.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "collectives/internal.h"

namespace frugal::coll {

struct TreeNode {
  int parent = -1;                      // -1 at the root
  std::array<int, 2> children{-1, -1};  // -1 where absent
  bool IsLeaf() const { return children[0] < 0 && children[1] < 0; }
};

// The heap-ordered binary tree rooted at `root`: with vr = (rank - root) mod n, the parent of vr
// is (vr - 1) / 2 and its children are 2 vr + 1 and 2 vr + 2.
TreeNode HeapTree(int n, int rank, int root);

// NCCL's in-order binary tree rooted at rank 0: a rank whose lowest set bit is b has children
// rank - b/2 and rank + b/2 (the latter moved down to rank + b/4, ... when it is >= n); rank 0
// has the single child 2^floor(log2(n-1)). Its interior nodes are the even ranks.
TreeNode InOrderTree(int n, int rank);

// The two trees of the double binary tree: tree 0 is InOrderTree; tree 1 is tree 0 mirrored
// (rank -> n-1-rank) when n is even, shifted by one (rank -> rank+1 mod n) when n is odd, so that
// the interior nodes of one tree are leaves of the other (for odd n one rank is interior in both).
std::array<TreeNode, 2> DoubleTree(int n, int rank);

// Reduce of `data` towards the tree's root, segment by segment, optionally followed by a
// broadcast of the result back down the same tree, pipelined:
//   Start(); for s in [0, segments()): Step(s); Finish();
// Step(s) waits for segment s from the children, adds them into `data` (own + child 0 + child
// 1, in that order), sends the segment to the parent (at the root: scales it by `root_scale` and,
// with broadcast, sends it down to the children), then advances the broadcast without blocking.
// Finish() completes the broadcast. Several pipelines (on distinct tags) may be interleaved.
class TreePipeline {
 public:
  // `io`: how `data` itself is sent and received (staged, or shared with the transport).
  TreePipeline(Transport& t, const TreeNode& node, std::span<float> data, size_t seg, int tag,
               Duration timeout, float root_scale, bool broadcast, DataIo io = {});
  TreePipeline(const TreePipeline&) = delete;
  TreePipeline& operator=(const TreePipeline&) = delete;

  size_t segments() const { return segments_; }
  Status Start();
  Status Step(size_t s);
  Status Finish();

 private:
  Block Segment(size_t s) const { return FixedChunk(data_.size(), seg_, s); }
  std::span<float> SegmentData(size_t s) {
    const Block b = Segment(s);
    return data_.subspan(b.offset, b.count);
  }
  float* Slot(int child, size_t s) {
    return slots_ + (static_cast<size_t>(child) * window_ + s % window_) * seg_;
  }
  void PostChildRecv(int child, size_t s);
  void SendDown(size_t s);
  void PostDownRecv(size_t s);   // the broadcast receive of segment s
  Status ForwardDown(size_t s);  // waits for it; an interior rank copies it and sends it on
  Status Progress(size_t reduced);

  Transport& t_;
  TreeNode node_;
  std::span<float> data_;
  size_t seg_;
  int tag_;
  Duration timeout_;
  float root_scale_;
  bool broadcast_;
  DataIo io_;
  size_t segments_;
  size_t window_;
  Scratch scratch_;  // declared before the Work vectors: outlives every posted receive
  float* slots_ = nullptr;
  std::array<std::vector<std::unique_ptr<Work>>, 2> child_recvs_;
  std::vector<std::unique_ptr<Work>> up_sends_;
  std::vector<SharedFloats> down_relay_;  // interior ranks: broadcast segments received
  std::vector<std::unique_ptr<Work>> down_recvs_;
  std::vector<std::unique_ptr<Work>> down_sends_;
  size_t down_posted_ = 0;     // segments whose broadcast receive has been posted
  size_t down_forwarded_ = 0;  // segments received from the parent and sent on
};

}  // namespace frugal::coll
