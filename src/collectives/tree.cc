// Tree shapes and the pipelined tree reduce/broadcast (TreePipeline).
//
// TreePipeline cuts `data` into segments of `seg` elements. For every child it keeps kWindow
// receives posted ahead into scratch slots. Step(s) waits for segment s of child 0 and then of
// child 1 and adds them into the own segment in that order (own + child 0 + child 1, the same on
// every run), reposts the slots, and sends the segment up to the parent without blocking. A leaf
// has nothing to wait for and sends all its segments up in Start(), so no rank ever waits for a
// leaf busy elsewhere. At the root the segment is final: it is scaled by root_scale (1/n for an
// average) and, when broadcasting, sent down to both children at once, so the broadcast of
// segment s overlaps the reduction of segment s + 1. A leaf receives the broadcast segment
// into the very region it sent up, so a non-root rank posts that receive only once its own
// up-send of the segment has completed; Step() ends with Progress(), which, without blocking, posts
// the receives whose up-sends are done and forwards every broadcast segment that has arrived to the
// children. Finish() does the rest blocking, in segment order. Slots, the sums an interior rank
// passes up and the broadcast segments it passes down are memory shared with the transport
// (Transport::NewShared), so the MPI transport copies none of them: an interior rank receives a
// broadcast segment into such memory, copies it into `data` and sends it on from there. When
// `data` itself is shared with the transport (DataIo), segments go from and into it directly.
// Everything a rank waits for in Step() comes from its subtree, so interleaving the steps of
// several pipelines (the double binary tree) cannot deadlock.
#include "collectives/tree.h"

#include <algorithm>

namespace frugal::coll {

TreeNode HeapTree(int n, int rank, int root) {
  TreeNode node;
  const int vr = Mod(rank - root, n);
  if (vr > 0) node.parent = Mod((vr - 1) / 2 + root, n);
  for (int k = 0; k < 2; ++k) {
    const int child = 2 * vr + 1 + k;
    if (child < n) node.children[static_cast<size_t>(k)] = Mod(child + root, n);
  }
  return node;
}

TreeNode InOrderTree(int n, int rank) {
  TreeNode node;
  if (n <= 1) return node;
  int bit = 1;
  while (bit < n && (bit & rank) == 0) bit <<= 1;
  if (rank == 0) {
    // bit is now the smallest power of two >= n; the root's only child heads the whole tree.
    node.children[0] = bit >> 1;
    return node;
  }
  int up = (rank ^ bit) | (bit << 1);
  if (up >= n) up = rank ^ bit;
  node.parent = up;
  int low = bit >> 1;
  if (low > 0) {
    node.children[0] = rank - low;
    while (low > 0 && rank + low >= n) low >>= 1;
    if (low > 0) node.children[1] = rank + low;
  }
  return node;
}

std::array<TreeNode, 2> DoubleTree(int n, int rank) {
  std::array<TreeNode, 2> trees;
  trees[0] = InOrderTree(n, rank);
  const bool shift = n % 2 == 1;
  auto to_tree1 = [&](int r) { return shift ? Mod(r - 1, n) : n - 1 - r; };
  auto from_tree1 = [&](int r) { return r < 0 ? -1 : (shift ? Mod(r + 1, n) : n - 1 - r); };
  const TreeNode image = InOrderTree(n, to_tree1(rank));
  trees[1].parent = from_tree1(image.parent);
  trees[1].children = {from_tree1(image.children[0]), from_tree1(image.children[1])};
  return trees;
}

TreeSegments::TreeSegments(Transport& t, const TreeNode& node, std::span<float> data, size_t seg,
                           int tag, Duration timeout, float root_scale)
    : t_(t),
      node_(node),
      data_(data),
      seg_(std::max<size_t>(1, std::min(seg, data.size()))),
      tag_(tag),
      timeout_(timeout),
      root_scale_(root_scale),
      segments_(ChunkCount(data.size(), seg_)) {}

TreePipeline::TreePipeline(Transport& t, const TreeNode& node, std::span<float> data, size_t seg,
                           int tag, Duration timeout, float root_scale, bool broadcast, DataIo io)
    : TreeSegments(t, node, data, seg, tag, timeout, root_scale),
      broadcast_(broadcast),
      io_(std::move(io)),
      window_(std::min(kWindow, segments_)) {}

void TreePipeline::PostChildRecv(int child, size_t s) {
  const Block b = Segment(s);
  child_recvs_[static_cast<size_t>(child)][s] =
      scratch_.Recv(t_, node_.children[static_cast<size_t>(child)], tag_, Slot(child, s), b.count);
}

void TreePipeline::SendDown(size_t s) {
  for (int child : node_.children) {
    if (child >= 0) down_sends_.push_back(io_.Send(t_, child, tag_, FloatBytes(SegmentData(s))));
  }
}

void TreePipeline::PostDownRecv(size_t s) {
  if (node_.IsLeaf() || io_.shared()) {
    down_recvs_[s] = io_.Recv(t_, node_.parent, tag_, FloatBytes(SegmentData(s)));
    return;
  }
  down_relay_[s] = NewSharedFloats(t_, Segment(s).count);
  const SharedBytes& relay = down_relay_[s].memory;
  down_recvs_[s] = t_.IRecvShared(node_.parent, tag_, relay.owner, relay.bytes);
}

Status TreePipeline::ForwardDown(size_t s) {
  const Block b = Segment(s);
  FRUGAL_RETURN_IF_ERROR(WaitRecv(*down_recvs_[s], b.count * sizeof(float), timeout_));
  down_recvs_[s].reset();
  if (node_.IsLeaf()) return Status::Ok();
  if (io_.shared()) {
    SendDown(s);
    return Status::Ok();
  }
  SharedFloats relay = std::move(down_relay_[s]);
  std::copy_n(relay.data(), b.count, data_.data() + b.offset);
  for (int child : node_.children) {
    if (child >= 0) down_sends_.push_back(SendShared(t_, child, tag_, relay));
  }
  return Status::Ok();
}

Status TreePipeline::Start() {
  if (segments_ == 0) return Status::Ok();
  if (!node_.IsLeaf()) slots_ = scratch_.Get(t_, 2 * window_ * seg_);
  for (int k = 0; k < 2; ++k) {
    if (node_.children[static_cast<size_t>(k)] < 0) continue;
    child_recvs_[static_cast<size_t>(k)].resize(segments_);
    for (size_t s = 0; s < window_; ++s) PostChildRecv(k, s);
  }
  if (node_.parent >= 0) {
    up_sends_.resize(segments_);
    if (broadcast_) {
      down_recvs_.resize(segments_);
      down_relay_.resize(segments_);
    }
    if (node_.IsLeaf()) {
      for (size_t s = 0; s < segments_; ++s) {
        up_sends_[s] = io_.Send(t_, node_.parent, tag_, FloatBytes(SegmentData(s)));
      }
    }
  }
  return Status::Ok();
}

Status TreePipeline::Step(size_t s) {
  const Block b = Segment(s);
  // An interior rank below the root of a reduce + broadcast only passes its sum up (the
  // broadcast overwrites the segment later): the sum goes into memory shared with the transport
  // and is sent from there, and the segment of `data` keeps the own values.
  const bool pass_up = broadcast_ && node_.parent >= 0 && !node_.IsLeaf();
  SharedFloats sum;
  float* into = data_.data() + b.offset;
  if (pass_up) {
    sum = NewSharedFloats(t_, b.count);
    into = sum.data();
  }
  bool first = true;
  for (int k = 0; k < 2; ++k) {
    if (node_.children[static_cast<size_t>(k)] < 0) continue;
    auto& recv = child_recvs_[static_cast<size_t>(k)][s];
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*recv, b.count * sizeof(float), timeout_));
    recv.reset();
    if (pass_up && first) {
      AddTo(into, data_.data() + b.offset, Slot(k, s), b.count);
    } else {
      AddInto(into, Slot(k, s), b.count);
    }
    first = false;
    if (s + window_ < segments_) PostChildRecv(k, s + window_);
  }
  if (node_.parent < 0) {
    if (root_scale_ != 1.0f) ScaleInPlace(data_.data() + b.offset, b.count, root_scale_);
    if (broadcast_) SendDown(s);
    return Status::Ok();
  }
  if (pass_up) {
    up_sends_[s] = SendShared(t_, node_.parent, tag_, std::move(sum));
  } else if (!node_.IsLeaf()) {
    up_sends_[s] = io_.Send(t_, node_.parent, tag_, FloatBytes(SegmentData(s)));
  }
  return Progress(s + 1);
}

Status TreePipeline::Progress(size_t reduced) {
  if (!broadcast_ || node_.parent < 0) return Status::Ok();
  while (down_posted_ < reduced && up_sends_[down_posted_]->IsCompleted()) {
    FRUGAL_RETURN_IF_ERROR(up_sends_[down_posted_]->Wait(timeout_));
    up_sends_[down_posted_].reset();
    PostDownRecv(down_posted_);
    ++down_posted_;
  }
  while (down_forwarded_ < down_posted_ && down_recvs_[down_forwarded_]->IsCompleted()) {
    FRUGAL_RETURN_IF_ERROR(ForwardDown(down_forwarded_));
    ++down_forwarded_;
  }
  return Status::Ok();
}

Status TreePipeline::Finish() {
  if (node_.parent >= 0) {
    if (broadcast_) {
      for (; down_posted_ < segments_; ++down_posted_) {
        FRUGAL_RETURN_IF_ERROR(up_sends_[down_posted_]->Wait(timeout_));
        up_sends_[down_posted_].reset();
        PostDownRecv(down_posted_);
      }
      for (; down_forwarded_ < segments_; ++down_forwarded_) {
        FRUGAL_RETURN_IF_ERROR(ForwardDown(down_forwarded_));
      }
    } else {
      FRUGAL_RETURN_IF_ERROR(WaitAll(up_sends_, timeout_));
    }
  }
  return WaitAll(down_sends_, timeout_);
}

}  // namespace frugal::coll
