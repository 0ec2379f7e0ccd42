// Recursive-doubling all-reduce (Thakur, Rabenseifner and Gropp 2005, section 4.4).
//
// Let p be the largest power of two <= n and rem = n - p. Pre-step (only when n is not a power
// of two): among the first 2*rem ranks each even rank r sends its whole buffer to r + 1 and
// takes no part in the main loop; the odd rank adds it into its own. The p ranks left get
// virtual ranks vr (r / 2 for the odd ranks below 2*rem, r - rem for the others). Main loop: for
// mask = 1, 2, ..., p/2, virtual ranks vr and vr ^ mask exchange their whole buffers and both
// add the other's into their own (ExchangeReduce: received in chunks of `segment_bytes` into a
// small scratch window, each chunk added as soon as it has arrived and its own send has left).
// Post-step: each odd rank below 2*rem sends the result to r - 1. log2(p) exchanges of the full
// buffer: latency-optimal, for small buffers.
//
// Sends of the main loop leave from the buffer itself (options.data_owner) except for buffers of
// at most kStagedExchangeBytes on one machine whose ranks have a core each: there they are staged.
// The peer reads a chunk and this rank then writes the sum over it, so every cache line the peer
// has just read must be taken back from the peer's cache before the write; on 2 ranks at 1 MB that
// cost 126 against 80 us at 512 KiB and 227 against 194 us at 1 MB, while a staged copy stays in
// the core's cache. From 2 MB up the staged copy no longer does and costs more than it saves
// (312 against 437 us), and where ranks share cores the extra copy costs more than the
// invalidations (docs/performance.md, "Recursive doubling's in-place sends").
//
// Determinism: both partners of an exchange add the same two partial sums; IEEE addition is
// commutative (a + b == b + a bit for bit), so after each step the two hold identical bits, and
// at the end all ranks do. Average scales the identical sums by the same 1/n on every rank.
#include "collectives/internal.h"

namespace frugal::coll {
namespace {

constexpr size_t kStagedExchangeBytes = size_t{1} << 20;

}  // namespace

Status RecursiveDoublingAllreduce(Transport& t, std::span<float> data,
                                  const AllreduceOptions& options) {
  const int n = t.size();
  const int r = t.rank();
  const size_t seg = SegmentElems(SegmentBytes(options));
  const Duration timeout = options.timeout;
  const int tag = kTagRecursiveDoubling;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  Scratch scratch;
  const DataIo io{options.data_owner};
  const std::span<std::byte> bytes = FloatBytes(data);
  const size_t seg_bytes = SegmentBytesOf(seg);

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
    const bool staged =
        bytes.size() <= kStagedExchangeBytes && t.SharesMemoryWithPeers() && t.CoreForEachRank();
    const DataIo exchange_io = staged ? DataIo{} : io;
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner = vr ^ mask;
      const int peer = partner < rem ? 2 * partner + 1 : partner + rem;
      FRUGAL_RETURN_IF_ERROR(
          ExchangeReduce(t, peer, tag, data, data, seg, timeout, scratch, exchange_io));
    }
    if (options.op == ReduceOp::kAverage) ScaleForAverage(data, n);
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
