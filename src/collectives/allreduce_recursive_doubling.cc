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
// Sends of the main loop leave from the buffer itself (options.data_owner) except on one machine
// whose ranks have a core each (there the reading rounds below take over from
// kReadingRoundsBytes): there they are staged. The peer reads a chunk and this rank then writes
// the sum over it, so every cache line the peer has just read must be taken back from the peer's
// cache before the write, while a staged copy stays in the core's cache; where ranks share cores
// the extra copy costs more than the invalidations (docs/performance.md, "Recursive doubling's
// in-place sends").
//
// Reading rounds (one machine: Transport::SharesMemoryWithPeers, at least kReadingRoundsBytes). The
// partners read each other's buffers where they lie instead of messaging them, and each sums half
// of the pair's buffer in place: in round k each tells its partner where its buffer lies (a
// RegionMessage, which also says the buffer holds the previous round's result), the lower rank adds
// the partner's first half into its own first half and the higher its partner's second half into
// its own second half (each writes the half of its own buffer the partner does not read), says
// "summed" (an empty message), copies the half the partner summed out of the partner's buffer, and
// says "copied". Before it writes its buffer in the next round it waits for the previous partner's
// "copied". No spare buffers; per round and rank N read and N/2 written for the sum, N/2 read and
// N/2 written for the copy: 2.5N through memory against 3N for a sum of the whole buffer into a
// spare one, and against the copy out of the partner's memory into a receive slot and the slot's
// sum through a message transport: on 2 and 4 ranks from 128 KiB to 64 MiB 1.1-3.0x MPI_Allreduce,
// against 0.8-1.7x for those (at 64 KiB it gains nothing; docs/performance.md, "Recursive doubling
// sums half in place"). Messages per round: kDirectRegionBytes and two empty ones.
//
// Determinism: both partners of an exchange add the same two partial sums; IEEE addition is
// commutative (a + b == b + a bit for bit), so after each step the two hold identical bits, and
// at the end all ranks do. Average scales the identical sums by the same 1/n on every rank.
#include <cstring>
#include <optional>
#include <vector>

#include "collectives/internal.h"

namespace frugal::coll {
namespace {

// Reading rounds from this size (docs/performance.md, "Recursive doubling sums half in place").
constexpr size_t kReadingRoundsBytes = size_t{128} << 10;
constexpr size_t kFloatsPerCacheLine = 64 / sizeof(float);

// The main loop where the ranks read each other's memory (see the file's comment). partners[k] is
// the rank this one pairs with in round k.
class ReadingRounds {
 public:
  ReadingRounds(Transport& t, std::span<float> data, std::span<const int> partners,
                const AllreduceOptions& options)
      : t_(t), data_(data), partners_(partners), options_(options) {}

  Status Run();

 private:
  // Tells the partners of rounds k.. that this rank cannot take part, then returns `error`.
  Status Abandon(size_t k, Status error);

  Transport& t_;
  std::span<float> data_;
  std::span<const int> partners_;
  const AllreduceOptions& options_;
  RegionMessage region_{};  // sent from here: outlives the sends
  std::vector<std::unique_ptr<Work>> sends_;
};

Status ReadingRounds::Abandon(size_t k, Status error) {
  const RegionMessage none = RegionMessageOf(std::nullopt);
  for (size_t j = k; j < partners_.size(); ++j) {
    sends_.push_back(
        t_.ISend(partners_[j], kTagRecursiveDoubling, std::as_bytes(std::span(&none, 1))));
  }
  (void)WaitAll(sends_, options_.timeout);
  return error;
}

Status ReadingRounds::Run() {
  const int tag = kTagRecursiveDoubling;
  const Duration timeout = options_.timeout;
  const size_t n = data_.size();
  const size_t bytes = n * sizeof(float);
  // The halves meet on a cache line, so the two writers never share one.
  const size_t half = n / 2 / kFloatsPerCacheLine * kFloatsPerCacheLine;
  const ReadableBuffer placed = PlaceForPeers(t_, data_, options_.data_owner != nullptr);
  if (!placed.region) return Abandon(0, NoMemoryForPeers(t_.rank(), bytes));
  float* const mine = placed.values.data();
  region_ = RegionMessageOf(placed.region);
  std::unique_ptr<Work> copied;  // the previous round's partner has copied its half of `mine`
  for (size_t k = 0; k < partners_.size(); ++k) {
    const int peer = partners_[k];
    RegionMessage theirs{};
    std::unique_ptr<Work> where =
        t_.IRecv(peer, tag, std::as_writable_bytes(std::span(&theirs, 1)));
    std::unique_ptr<Work> summed = t_.IRecv(peer, tag, {});
    std::unique_ptr<Work> peer_copied = t_.IRecv(peer, tag, {});
    sends_.push_back(t_.ISend(peer, tag, std::as_bytes(std::span(&region_, 1))));
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*where, sizeof(RegionMessage), timeout));
    StatusOr<const float*> theirs_values = MapRegionMessage(t_, peer, theirs, bytes);
    if (!theirs_values.ok()) return Abandon(k + 1, theirs_values.status());
    const bool lower = t_.rank() < peer;
    const size_t own_begin = lower ? 0 : half;
    const size_t own_end = lower ? half : n;
    const size_t their_begin = lower ? half : 0;
    const size_t their_end = lower ? n : half;
    if (copied) FRUGAL_RETURN_IF_ERROR(WaitRecv(*copied, 0, timeout));
    AddInto(mine + own_begin, *theirs_values + own_begin, own_end - own_begin);
    sends_.push_back(t_.ISend(peer, tag, {}));
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*summed, 0, timeout));
    std::memcpy(mine + their_begin, *theirs_values + their_begin,
                (their_end - their_begin) * sizeof(float));
    sends_.push_back(t_.ISend(peer, tag, {}));
    copied = std::move(peer_copied);
  }
  if (copied) FRUGAL_RETURN_IF_ERROR(WaitRecv(*copied, 0, timeout));
  if (mine != data_.data()) std::memcpy(data_.data(), mine, bytes);
  return WaitAll(sends_, timeout);
}

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
  if (vr >= 0 && p >= 2 && bytes.size() >= kReadingRoundsBytes && t.SharesMemoryWithPeers()) {
    std::vector<int> partners;
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner = vr ^ mask;
      partners.push_back(partner < rem ? 2 * partner + 1 : partner + rem);
    }
    FRUGAL_RETURN_IF_ERROR(ReadingRounds(t, data, partners, options).Run());
    if (options.op == ReduceOp::kAverage) ScaleForAverage(data, n);
  } else if (vr >= 0) {
    const bool staged = t.SharesMemoryWithPeers() && t.CoreForEachRank();
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
