// The MPI transport's peer copy: see peer_copy.h.
#include "transport/mpi/peer_copy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "transport/mpi/mpi_work.h"

namespace frugal::mpi_internal {
namespace {

constexpr uint32_t kMagic = 0x66706331;  // "fpc1"
// Progress runs at most this often, and spends at most a quarter of a wait's time: testing every
// registered receive costs a pass through MPI's progress engine each, and a ring of small
// segments registers hundreds (64 KiB segments of a 64 MB all-reduce over 4 ranks: 256).
constexpr auto kProgressInterval = std::chrono::microseconds(20);
// Acknowledgement tags stay below this even where MPI allows more.
constexpr int kMostAckTags = 1 << 30;

void Put(std::byte*& at, const void* value, size_t n) {
  std::memcpy(at, value, n);
  at += n;
}
void Get(const std::byte*& at, void* value, size_t n) {
  std::memcpy(value, at, n);
  at += n;
}

}  // namespace

std::array<std::byte, Descriptor::kBytes> Descriptor::Encode() const {
  std::array<std::byte, kBytes> out{};
  std::byte* at = out.data();
  Put(at, &kMagic, sizeof(kMagic));
  Put(at, &sequence, sizeof(sequence));
  Put(at, &region.segment, sizeof(region.segment));
  Put(at, &region.generation, sizeof(region.generation));
  Put(at, &region.offset, sizeof(region.offset));
  Put(at, &region.bytes, sizeof(region.bytes));
  return out;
}

std::optional<Descriptor> Descriptor::Decode(std::span<const std::byte> bytes) {
  if (bytes.size() != kBytes) return std::nullopt;
  const std::byte* at = bytes.data();
  uint32_t magic = 0;
  Get(at, &magic, sizeof(magic));
  if (magic != kMagic) return std::nullopt;
  Descriptor d;
  Get(at, &d.sequence, sizeof(d.sequence));
  Get(at, &d.region.segment, sizeof(d.region.segment));
  Get(at, &d.region.generation, sizeof(d.region.generation));
  Get(at, &d.region.offset, sizeof(d.region.offset));
  Get(at, &d.region.bytes, sizeof(d.region.bytes));
  return d;
}

bool AllowedByJob() {
  const char* btl = std::getenv("OMPI_MCA_btl");
  if (btl == nullptr || *btl == '\0') return true;
  std::string_view list(btl);
  const bool exclude = list.front() == '^';
  if (exclude) list.remove_prefix(1);
  bool named = false;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if (item == "vader" || item == "sm") named = true;
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return exclude ? !named : named;
}

std::shared_ptr<PeerCopy> PeerCopy::Make(MPI_Comm comm, std::unique_ptr<PeerMaps> maps,
                                         std::vector<std::string> names,
                                         std::shared_ptr<AbandonedRequests> keeper) {
  std::shared_ptr<PeerCopy> copy(new PeerCopy());
  copy->maps_ = std::move(maps);
  copy->names_ = std::move(names);
  copy->keeper_ = std::move(keeper);
  copy->next_sequence_.assign(copy->names_.size(), 0);
  int mine = copy->maps_->all_mapped() && AllowedByJob() ? 1 : 0;
  int all = 0;
  if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS || all != 1) {
    return copy;
  }
  if (MPI_Comm_dup(comm, &copy->ack_comm_) != MPI_SUCCESS) return copy;
  MPI_Comm_set_errhandler(copy->ack_comm_, MPI_ERRORS_RETURN);
  void* value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(copy->ack_comm_, MPI_TAG_UB, &value, &found);
  const int tag_ub = found ? *static_cast<int*>(value) : 32767;
  copy->ack_tags_ = std::min(tag_ub, kMostAckTags - 1) + 1;
  copy->active_ = true;
  return copy;
}

PeerCopy::~PeerCopy() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && ack_comm_ != MPI_COMM_NULL) MPI_Comm_free(&ack_comm_);
}

StatusOr<Descriptor> PeerCopy::ExpectAcknowledgement(int dst, const PeerRegion& region,
                                                     MPI_Request* ack) {
  Descriptor d;
  d.sequence = next_sequence_[static_cast<size_t>(dst)]++;
  d.region = region;
  const int tag = static_cast<int>(d.sequence % static_cast<uint64_t>(ack_tags_));
  const int rc = MPI_Irecv(nullptr, 0, MPI_BYTE, dst, tag, ack_comm_, ack);
  if (rc != MPI_SUCCESS) {
    return MpiError(rc,
                    fmt::format("send to {}: acknowledgement", names_[static_cast<size_t>(dst)]));
  }
  return d;
}

void PeerCopy::Acknowledge(int source, uint64_t sequence) {
  const int tag = static_cast<int>(sequence % static_cast<uint64_t>(ack_tags_));
  MPI_Request request = MPI_REQUEST_NULL;
  // A failed acknowledgement leaves the sender to its timeout, which names this rank.
  if (MPI_Isend(nullptr, 0, MPI_BYTE, source, tag, ack_comm_, &request) == MPI_SUCCESS) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) keeper_->Add(request, /*cancel=*/false, nullptr);
  }
}

Status PeerCopy::Deliver(int source, std::span<const std::byte> message, std::span<std::byte> into,
                         size_t* bytes, const std::string& what) {
  const std::optional<Descriptor> d = Descriptor::Decode(message);
  if (!d) {
    *bytes = message.size();
    return MalformedError(
        fmt::format("{}: a message of {} bytes that is not a descriptor", what, message.size()));
  }
  *bytes = static_cast<size_t>(d->region.bytes);
  Status status;
  if (d->region.bytes > into.size()) {
    status = TooLargeForBuffer(what, into.size());
  } else {
    StatusOr<const std::byte*> from =
        maps_->Map(source, d->region, names_[static_cast<size_t>(source)]);
    if (from.ok()) {
      std::memcpy(into.data(), *from, *bytes);
    } else {
      status = from.status().Annotate(what);
    }
  }
  Acknowledge(source, d->sequence);
  return status;
}

const PeerCopy::Stashed& PeerCopy::Stash(int source, int tag,
                                         const std::array<std::byte, Descriptor::kBytes>& message) {
  Stashed s{source, tag, Descriptor::kBytes, message};
  if (std::optional<Descriptor> d = Descriptor::Decode(message)) {
    s.bytes = static_cast<size_t>(d->region.bytes);
  }
  return stash_.emplace_back(s);
}

std::deque<PeerCopy::Stashed>::const_iterator PeerCopy::FirstStashed(int src, int tag) const {
  return std::find_if(stash_.begin(), stash_.end(), [&](const Stashed& s) {
    return s.tag == tag && (src == kAnySource || s.source == src);
  });
}

const PeerCopy::Stashed* PeerCopy::FindStashed(int src, int tag) const {
  const auto it = FirstStashed(src, tag);
  return it == stash_.end() ? nullptr : &*it;
}

std::optional<PeerCopy::Stashed> PeerCopy::TakeStashed(int src, int tag) {
  const auto it = FirstStashed(src, tag);
  if (it == stash_.end()) return std::nullopt;
  Stashed s = *it;
  stash_.erase(it);
  return s;
}

void PeerCopy::Discard(const Stashed& arrived) {
  if (std::optional<Descriptor> d = Descriptor::Decode(arrived.message)) {
    Acknowledge(arrived.source, d->sequence);
  }
}

void PeerCopy::Register(Progressable* receive) { receives_.push_back(receive); }

void PeerCopy::Unregister(Progressable* receive) {
  auto it = std::find(receives_.begin(), receives_.end(), receive);
  if (it != receives_.end()) receives_.erase(it);
}

void PeerCopy::Progress() {
  if (progressing_ || receives_.empty()) return;
  const Clock::time_point start = Clock::now();
  if (start < next_progress_) return;
  progressing_ = true;
  // A receive that completes unregisters itself, and only itself.
  for (size_t i = 0; i < receives_.size();) {
    Progressable* receive = receives_[i];
    if (!receive->IsCompleted() || (i < receives_.size() && receives_[i] == receive)) ++i;
  }
  progressing_ = false;
  const Clock::time_point end = Clock::now();
  next_progress_ = end + std::max<Clock::duration>(kProgressInterval, 3 * (end - start));
}

}  // namespace frugal::mpi_internal
