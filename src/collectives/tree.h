// Binary trees over the ranks and the pipelined reduce(+broadcast) that runs along one of them.
// Used by the binary-tree, double-binary-tree and hierarchical all-reduces. Not installed.
#pragma once

#include <algorithm>
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

// What a pipeline along a tree works on: the rank's place in the tree, `data` cut into segments of
// `seg` elements (at least 1, at most the whole), the tag of its messages, the timeout, and the
// factor the root scales each finished segment by.
class TreeSegments {
 public:
  TreeSegments(const TreeSegments&) = delete;
  TreeSegments& operator=(const TreeSegments&) = delete;
  size_t segments() const { return segments_; }

 protected:
  TreeSegments(Transport& t, const TreeNode& node, std::span<float> data, size_t seg, int tag,
               Duration timeout, float root_scale);
  Block Segment(size_t s) const { return FixedChunk(data_.size(), seg_, s); }

  Transport& t_;
  TreeNode node_;
  std::span<float> data_;
  size_t seg_;
  int tag_;
  Duration timeout_;
  float root_scale_;
  size_t segments_;
};

// Reduce of `data` towards the tree's root, segment by segment, optionally followed by a
// broadcast of the result back down the same tree, pipelined:
//   Start(); for s in [0, segments()): Step(s); Finish();
// Step(s) waits for segment s from the children, adds them into `data` (own + child 0 + child
// 1, in that order), sends the segment to the parent (at the root: scales it by `root_scale` and,
// with broadcast, sends it down to the children), then advances the broadcast without blocking.
// Finish() completes the broadcast. Several pipelines (on distinct tags) may be interleaved.
class TreePipeline : public TreeSegments {
 public:
  // `io`: how `data` itself is sent and received (staged, or shared with the transport).
  TreePipeline(Transport& t, const TreeNode& node, std::span<float> data, size_t seg, int tag,
               Duration timeout, float root_scale, bool broadcast, DataIo io = {});

  Status Start();
  Status Step(size_t s);
  Status Finish();

 private:
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

  bool broadcast_;
  DataIo io_;
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

// The same reduce + broadcast on one machine, where every rank maps the others' memory
// (Transport::SharesMemoryWithPeers): the ranks read their children's partial sums and their
// parent's results where they lie and pass only empty messages (tree_reading.cc). Same interface
// and the same bits as TreePipeline with broadcast.
class ReadingTreePipeline : public TreeSegments {
 public:
  // `data_owner`: `data` lies in memory shared with the transport (read in place; otherwise a
  // copy is read and the result copied back).
  ReadingTreePipeline(Transport& t, const TreeNode& node, std::span<float> data, size_t seg,
                      int tag, Duration timeout, float root_scale, bool data_owner);

  Status Start();
  Status Step(size_t s);
  Status Finish();

 private:
  void Signal(int peer);        // an empty message
  Status Await(int peer);       // waits for one
  Status Progress(bool block);  // copies the segments the parent has said are final

  bool data_owner_;
  ReadableBuffer placed_;
  float* mine_ = nullptr;
  const float* parent_ = nullptr;
  std::array<const float*, 2> children_{nullptr, nullptr};
  std::unique_ptr<Work> final_;  // the parent's next "final" message
  RegionMessage region_{};       // sent from here: outlives the sends
  std::vector<std::unique_ptr<Work>> sends_;
  size_t copied_ = 0;  // segments copied from the parent
};

// The tree all-reduces read in place (ReadingTreePipeline) on one machine from kReadingTreeBytes,
// on 2 ranks from `two_ranks_bytes` (docs/performance.md, "The trees read in place": on 4 ranks
// both trees gain from 128 KiB; on 2 the tree from 512 KiB, the double tree, whose two trees of
// two then take turns as each other's root, from 4 MiB).
inline constexpr size_t kReadingTreeBytes = size_t{128} << 10;
inline bool TreeReads(const Transport& t, size_t bytes, size_t two_ranks_bytes) {
  const size_t bound = t.size() == 2 ? two_ranks_bytes : kReadingTreeBytes;
  return t.size() > 1 && bytes >= bound && t.SharesMemoryWithPeers();
}

// Runs one pipeline to the end.
template <class Pipeline>
Status RunPipeline(Pipeline& p) {
  FRUGAL_RETURN_IF_ERROR(p.Start());
  for (size_t s = 0; s < p.segments(); ++s) FRUGAL_RETURN_IF_ERROR(p.Step(s));
  return p.Finish();
}

// Runs two pipelines stepped alternately, segment by segment (the double binary tree).
template <class Pipeline>
Status RunPipelines(Pipeline& first, Pipeline& second) {
  FRUGAL_RETURN_IF_ERROR(first.Start());
  FRUGAL_RETURN_IF_ERROR(second.Start());
  const size_t steps = std::max(first.segments(), second.segments());
  for (size_t s = 0; s < steps; ++s) {
    if (s < first.segments()) FRUGAL_RETURN_IF_ERROR(first.Step(s));
    if (s < second.segments()) FRUGAL_RETURN_IF_ERROR(second.Step(s));
  }
  FRUGAL_RETURN_IF_ERROR(first.Finish());
  return second.Finish();
}

}  // namespace frugal::coll
