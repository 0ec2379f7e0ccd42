// Rabenseifner's all-reduce: recursive-halving reduce-scatter + recursive-doubling allgather
// (Rabenseifner 2004; Thakur, Rabenseifner and Gropp 2005, section 4.5, including the steps for
// a number of ranks that is not a power of two).
//
// Let p be the largest power of two <= n and rem = n - p. Pre-step: among the first 2*rem ranks,
// each even rank r sends its whole buffer to r + 1 and sits out; the odd rank adds it into its
// own. The p remaining ranks get virtual ranks vr (r / 2 below 2*rem, r - rem above); peer(v)
// maps a virtual rank back. The buffer is cut into p blocks by BlockPartition (or
// AllreduceOptions::block_counts) and each virtual rank tracks the range [lo, hi) of blocks it is
// responsible for, initially [0, p).
// Reduce-scatter by recursive halving: for mask = p/2, p/4, ..., 1, vr pairs with vr ^ mask; the
// lower of the two keeps the lower half [lo, mid) of the range and sends the upper half, the
// other keeps the upper half; each adds the partner's copy of its kept half into its own
// (ExchangeReduce, chunked through a small scratch window). After log2(p) steps vr owns block vr
// fully reduced (scaled by 1/n here for kAverage). Allgather by recursive doubling: for mask =
// 1, 2, ..., p/2, vr and vr ^ mask swap their ranges straight into place (Exchange), doubling
// them. Post-step: each odd rank below 2*rem sends the result to r - 1.
// Each rank sends 2 (p-1)/p of the buffer in 2 log2(p) messages (plus the pre/post steps).
//
// Determinism: every block is summed by exactly one chain of pairwise additions ending on its
// owner and is then copied, so all ranks end with bit-identical results.
#include "collectives/internal.h"

namespace frugal::coll {

Status RabenseifnerAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options) {
  const int n = t.size();
  const int r = t.rank();
  const size_t seg = SegmentElems(SegmentBytes(options));
  const size_t seg_bytes = SegmentBytesOf(seg);
  const Duration timeout = options.timeout;
  const int tag = kTagRabenseifner;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  auto peer_of = [rem](int v) { return v < rem ? 2 * v + 1 : v + rem; };
  Scratch scratch;
  const DataIo io{options.data_owner};
  const std::span<std::byte> bytes = FloatBytes(data);

  int vr = r - rem;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      FRUGAL_RETURN_IF_ERROR(Exchange(t, r + 1, tag, bytes, {}, seg_bytes, timeout, io));
      vr = -1;
    } else {
      FRUGAL_RETURN_IF_ERROR(ExchangeReduce(t, r - 1, tag, {}, data, seg, timeout, scratch, io));
      vr = r / 2;
    }
  }
  if (vr >= 0) {
    const std::vector<Block> blocks = BlocksOf(data.size(), p, options);
    // Elements of the block range [lo, hi).
    auto range = [&](int lo, int hi) {
      const size_t begin = blocks[static_cast<size_t>(lo)].offset;
      const size_t end = hi == p ? data.size() : blocks[static_cast<size_t>(hi)].offset;
      return data.subspan(begin, end - begin);
    };
    int lo = 0;
    int hi = p;
    for (int mask = p / 2; mask >= 1; mask >>= 1) {
      const int mid = lo + (hi - lo) / 2;
      const bool lower = (vr & mask) == 0;
      const std::span<float> keep = lower ? range(lo, mid) : range(mid, hi);
      const std::span<float> give = lower ? range(mid, hi) : range(lo, mid);
      FRUGAL_RETURN_IF_ERROR(
          ExchangeReduce(t, peer_of(vr ^ mask), tag, give, keep, seg, timeout, scratch, io));
      if (lower) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    FRUGAL_INTERNAL_ASSERT(lo == vr && hi == vr + 1, "rabenseifner: owns [", lo, ", ", hi, ")");
    if (options.op == ReduceOp::kAverage) ScaleForAverage(range(lo, hi), n);
    for (int mask = 1; mask < p; mask <<= 1) {
      const bool upper = (vr & mask) != 0;
      const int other_lo = upper ? lo - mask : hi;
      const int other_hi = upper ? lo : hi + mask;
      FRUGAL_RETURN_IF_ERROR(Exchange(t, peer_of(vr ^ mask), tag, FloatBytes(range(lo, hi)),
                                      FloatBytes(range(other_lo, other_hi)), seg_bytes, timeout,
                                      io));
      lo = std::min(lo, other_lo);
      hi = std::max(hi, other_hi);
    }
  }
  if (r < 2 * rem) {
    if (r % 2 == 1) {
      FRUGAL_RETURN_IF_ERROR(Exchange(t, r - 1, tag, bytes, {}, seg_bytes, timeout, io));
    } else {
      FRUGAL_RETURN_IF_ERROR(Exchange(t, r + 1, tag, {}, bytes, seg_bytes, timeout, io));
    }
  }
  return Status::Ok();
}

}  // namespace frugal::coll
