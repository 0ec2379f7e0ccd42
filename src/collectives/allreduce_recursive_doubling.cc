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
// Reading rounds (one machine: Transport::SharesMemoryWithPeers, at least kReadingRoundsBytes and
// 4 ranks in the main loop). The partners read each other's buffers where they lie instead of
// messaging them: in round k each tells its partner where the buffer it reads lies (a
// RegionMessage, which also says the buffer is complete), writes the sum of its own and the
// partner's into a buffer nobody reads in that round, and says "read" (an empty message). The
// buffers alternate: round 0 reads the caller's buffer (or a copy in mappable memory when it does
// not lie in such memory), rounds before the last write one of two spare blocks from NewShared,
// and the last writes the caller's buffer, each only after the partners that read it earlier have
// said "read". Per round and rank: N read from the partner, N read and N written here, against a
// copy out of the partner's memory into a receive slot and the slot's sum through a message
// transport. With 4 ranks on 2 cores, 1-64 MB, that is 0.90-1.21x MPI_Allreduce against 0.79-0.96x;
// with 2 ranks (one round, which then needs a spare block and a copy back) it loses, and below 1
// MiB it gains nothing (docs/performance.md). Messages: kDirectRegionBytes and an empty one per
// round.
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

constexpr size_t kStagedExchangeBytes = size_t{1} << 20;
// Reading rounds from this size and 4 ranks in the main loop (docs/performance.md, "Recursive
// doubling reads its partners' buffers").
constexpr size_t kReadingRoundsBytes = size_t{1} << 20;
constexpr int kReadingRoundsRanks = 4;

// The main loop where the ranks read each other's memory (see the file's comment). partners[k] is
// the rank this one pairs with in round k.
class ReadingRounds {
 public:
  ReadingRounds(Transport& t, std::span<float> data, std::span<const int> partners,
                const AllreduceOptions& options)
      : t_(t), data_(data), partners_(partners), options_(options) {}

  Status Run();

 private:
  // The buffer round k writes: `data` in the last round, a spare buffer before (or when the last
  // round reads `data` itself).
  StatusOr<std::span<float>> Target(size_t k);
  // Waits until no partner still reads `buffer` (the partners of the rounds that read it so far).
  Status WaitUnread(std::span<const float> buffer, size_t rounds);
  // Tells the partners of rounds k.. that this rank cannot take part, then returns `error`.
  Status Abandon(size_t k, Status error);

  Transport& t_;
  std::span<float> data_;
  std::span<const int> partners_;
  const AllreduceOptions& options_;
  std::vector<std::span<float>> read_;       // read_[k]: the buffer the partner reads in round k
  std::vector<std::unique_ptr<Work>> done_;  // done_[k]: round k's partner has read read_[k]
  std::vector<std::unique_ptr<Work>> sends_;
  SharedBytes spare_[2];
};

StatusOr<std::span<float>> ReadingRounds::Target(size_t k) {
  const bool last = k + 1 == partners_.size();
  if (last && read_[k].data() != data_.data()) return data_;
  SharedBytes& spare = spare_[k % 2];
  if (spare.bytes.empty() && !data_.empty()) {
    spare = t_.NewShared(data_.size() * sizeof(float));
    if (!t_.RegionOf(spare.bytes)) return NoMemoryForPeers(t_.rank(), spare.bytes.size());
  }
  return std::span<float>(reinterpret_cast<float*>(spare.bytes.data()), data_.size());
}

Status ReadingRounds::WaitUnread(std::span<const float> buffer, size_t rounds) {
  for (size_t j = 0; j < rounds; ++j) {
    if (done_[j] && read_[j].data() == buffer.data()) {
      FRUGAL_RETURN_IF_ERROR(WaitRecv(*done_[j], 0, options_.timeout));
      done_[j].reset();
    }
  }
  return Status::Ok();
}

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
  const size_t rounds = partners_.size();
  const size_t bytes = data_.size() * sizeof(float);
  done_.resize(rounds);
  const ReadableBuffer first = PlaceForPeers(t_, data_, options_.data_owner != nullptr);
  if (!first.region) return Abandon(0, NoMemoryForPeers(t_.rank(), bytes));
  std::span<float> source = first.values;
  std::optional<PeerRegion> region = first.region;
  RegionMessage theirs{};
  for (size_t k = 0; k < rounds; ++k) {
    const int peer = partners_[k];
    read_.push_back(source);
    std::unique_ptr<Work> where =
        t_.IRecv(peer, tag, std::as_writable_bytes(std::span(&theirs, 1)));
    done_[k] = t_.IRecv(peer, tag, {});
    const RegionMessage mine = RegionMessageOf(region);
    sends_.push_back(t_.ISend(peer, tag, std::as_bytes(std::span(&mine, 1))));
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*where, sizeof(RegionMessage), timeout));
    StatusOr<const float*> peer_values = MapRegionMessage(t_, peer, theirs, bytes);
    if (!peer_values.ok()) return Abandon(k + 1, peer_values.status());
    StatusOr<std::span<float>> target = Target(k);
    if (!target.ok()) return Abandon(k + 1, target.status());
    FRUGAL_RETURN_IF_ERROR(WaitUnread(*target, k));
    AddTo(target->data(), source.data(), *peer_values, data_.size());
    sends_.push_back(t_.ISend(peer, tag, {}));
    source = *target;
    region = t_.RegionOf(FloatBytes(source));
  }
  if (source.data() != data_.data()) {
    FRUGAL_RETURN_IF_ERROR(WaitUnread(data_, rounds));
    std::memcpy(data_.data(), source.data(), bytes);
  }
  for (auto& d : done_) {
    if (d) FRUGAL_RETURN_IF_ERROR(WaitRecv(*d, 0, timeout));
  }
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
  if (vr >= 0 && p >= kReadingRoundsRanks && bytes.size() >= kReadingRoundsBytes &&
      t.SharesMemoryWithPeers()) {
    std::vector<int> partners;
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner = vr ^ mask;
      partners.push_back(partner < rem ? 2 * partner + 1 : partner + rem);
    }
    FRUGAL_RETURN_IF_ERROR(ReadingRounds(t, data, partners, options).Run());
    if (options.op == ReduceOp::kAverage) ScaleForAverage(data, n);
  } else if (vr >= 0) {
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
