// The tree reduce + broadcast where the ranks read each other's buffers (ReadingTreePipeline,
// tree.h): one machine, every rank maps the others' memory.
//
// In Start() every rank places its buffer where peers can map it (the caller's buffer itself when
// it lies in memory shared with the transport, a copy otherwise), sends its region to its parent
// and children (RegionMessage) and maps theirs; a leaf then says "ready s" (an empty message) for
// every segment at once. Reduce, segment s: an interior rank waits for "ready s" from each child,
// adds the children's segment s into its own where it lies (own + child 0 +
// child 1, one pass), and says "ready s" to its parent; the root scales the segment and says
// "final s" to its children. Broadcast: a rank that hears "final s" from its parent copies the
// parent's segment s into its own and says "final s" to its children; at the end it says "done"
// to its parent, and a rank returns only when its children have said "done" (until then they may
// read its buffer). A segment of a rank is written only after every reader of its previous values
// has said so: the parent reads the partial sum before it passes "ready s" on, and "final s" comes
// back only after the root has summed s. Per rank and segment no values pass through a message:
// an interior rank reads its own and two children's segments and writes its own once, every rank
// but the root then reads the parent's and writes its own.
//
// As in TreePipeline the root computes every sum and the others copy it: bit-identical results.
// Everything Step() waits for comes from the rank's subtree, and Finish() waits for the parent's
// "final" messages before its children's "done", so interleaved pipelines cannot deadlock.
#include <cstring>

#include "collectives/tree.h"

namespace frugal::coll {

ReadingTreePipeline::ReadingTreePipeline(Transport& t, const TreeNode& node, std::span<float> data,
                                         size_t seg, int tag, Duration timeout, float root_scale,
                                         bool data_owner)
    : TreeSegments(t, node, data, seg, tag, timeout, root_scale), data_owner_(data_owner) {}

void ReadingTreePipeline::Signal(int peer) { sends_.push_back(t_.ISend(peer, tag_, {})); }

Status ReadingTreePipeline::Await(int peer) {
  std::unique_ptr<Work> w = t_.IRecv(peer, tag_, {});
  return WaitRecv(*w, 0, timeout_);
}

Status ReadingTreePipeline::Start() {
  const size_t bytes = data_.size() * sizeof(float);
  placed_ = PlaceForPeers(t_, data_, data_owner_);
  region_ = RegionMessageOf(placed_.region);
  std::vector<int> peers;
  if (node_.parent >= 0) peers.push_back(node_.parent);
  for (int child : node_.children) {
    if (child >= 0) peers.push_back(child);
  }
  std::vector<RegionMessage> theirs(peers.size());
  std::vector<std::unique_ptr<Work>> recvs;
  for (size_t i = 0; i < peers.size(); ++i) {
    recvs.push_back(t_.IRecv(peers[i], tag_, std::as_writable_bytes(std::span(&theirs[i], 1))));
    sends_.push_back(t_.ISend(peers[i], tag_, std::as_bytes(std::span(&region_, 1))));
  }
  if (!placed_.region) return NoMemoryForPeers(t_.rank(), bytes);
  mine_ = placed_.values.data();
  size_t i = 0;
  if (node_.parent >= 0) {
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*recvs[i], sizeof(RegionMessage), timeout_));
    FRUGAL_ASSIGN_OR_RETURN(parent_, MapRegionMessage(t_, node_.parent, theirs[i], bytes));
    ++i;
  }
  for (size_t k = 0; k < 2; ++k) {
    if (node_.children[k] < 0) continue;
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*recvs[i], sizeof(RegionMessage), timeout_));
    FRUGAL_ASSIGN_OR_RETURN(children_[k],
                            MapRegionMessage(t_, node_.children[k], theirs[i], bytes));
    ++i;
  }
  if (node_.parent >= 0) {
    final_ = t_.IRecv(node_.parent, tag_, {});
    // A leaf's values are ready at once: it says so for every segment now, so no rank waits for a
    // leaf busy elsewhere.
    if (node_.IsLeaf()) {
      for (size_t s = 0; s < segments_; ++s) Signal(node_.parent);
    }
  }
  return Status::Ok();
}

Status ReadingTreePipeline::Step(size_t s) {
  const Block b = Segment(s);
  float* own = mine_ + b.offset;
  for (int child : node_.children) {
    if (child >= 0) FRUGAL_RETURN_IF_ERROR(Await(child));
  }
  if (children_[0] && children_[1]) {
    AddTwoInto(own, children_[0] + b.offset, children_[1] + b.offset, b.count);
  } else if (children_[0] || children_[1]) {
    AddInto(own, (children_[0] ? children_[0] : children_[1]) + b.offset, b.count);
  }
  if (node_.parent >= 0) {
    if (!node_.IsLeaf()) Signal(node_.parent);
    return Progress(/*block=*/false);
  }
  if (root_scale_ != 1.0f) ScaleInPlace(own, b.count, root_scale_);
  for (int child : node_.children) {
    if (child >= 0) Signal(child);
  }
  return Status::Ok();
}

Status ReadingTreePipeline::Progress(bool block) {
  while (copied_ < segments_ && final_) {
    if (!block && !final_->IsCompleted()) return Status::Ok();
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*final_, 0, timeout_));
    const Block b = Segment(copied_);
    std::memcpy(mine_ + b.offset, parent_ + b.offset, b.count * sizeof(float));
    for (int child : node_.children) {
      if (child >= 0) Signal(child);
    }
    ++copied_;
    final_ = copied_ < segments_ ? t_.IRecv(node_.parent, tag_, {}) : nullptr;
  }
  return Status::Ok();
}

Status ReadingTreePipeline::Finish() {
  if (node_.parent >= 0) {
    FRUGAL_RETURN_IF_ERROR(Progress(/*block=*/true));
    Signal(node_.parent);
  }
  for (int child : node_.children) {
    if (child >= 0) FRUGAL_RETURN_IF_ERROR(Await(child));
  }
  if (mine_ != nullptr && mine_ != data_.data()) {
    std::memcpy(data_.data(), mine_, data_.size() * sizeof(float));
  }
  return WaitAll(sends_, timeout_);
}

}  // namespace frugal::coll
