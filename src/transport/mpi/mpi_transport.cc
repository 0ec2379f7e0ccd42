// The Transport interface over Open MPI point-to-point calls.
//
// MpiRuntime::Init calls MPI_Init_thread asking for MPI_THREAD_SERIALIZED and refuses to go on
// when MPI provides less. Every communicator frugal makes uses MPI_ERRORS_RETURN, so an MPI
// failure becomes a Status instead of ending the process.
//
// MpiTransport holds two communicators with the same group: `comm_` carries the user's messages
// (ISend/IRecv/probes), `control_comm_` carries Split's exchange of (color, key), so that
// control traffic can never be matched by a user receive, whatever its tag.
//
// Messages are MPI_BYTE. A buffer longer than INT_MAX bytes is described by one derived datatype
// (MakeByteType: q blocks of kLargeBlockBytes plus a remainder) so that one frugal message is one
// MPI message on both sides; sizes are read back with MPI_Get_elements_x, which does not
// overflow.
//
// Operations run on staging buffers owned by their Work (mpi_work.cc): ISend copies the message
// into one, IRecv receives into one and copies it out when the receive completes. ISendShared and
// IRecvShared skip the staging: the caller's shared memory is the operation's memory. So a Work
// that times out or is destroyed unfinished leaves the caller's buffers alone: the runtime keeps
// the request and its staging buffer until MPI completes it (AbandonedRequests), which it tests
// whenever an operation starts. Staging buffers come from a pool shared by a transport and its
// splits. Between ranks that map each other's memory, large messages move as descriptors of the
// sender's memory instead (PeerCopy, peer_copy.h): StartSend sends the descriptor and waits for
// its acknowledgement, a receive that gets one copies the region where the message belongs.
//
// Waits poll MPI_Test with the back-off of mpi_work.cc. How long they spin, yield and sleep
// depends on how many cores each rank of this machine has (ranks and cores counted once by
// World(), see RanksOnThisMachine, and turned into a policy by WaitPolicyFor). On expiry Wait
// returns kTimeout naming the peer.
//
// Split(color, key, timeout): MPI_Comm_split is a blocking collective with no timeout. To give
// Split the timeout every wait in frugal has, every rank first sends its (color, key) to every
// other rank on `control_comm_` and waits for all of them with the timeout; the ranks that did
// not answer are named. Once every rank's pair has arrived, all of them are inside Split, and
// MPI_Comm_split (with colors renumbered densely, so any int is a valid color) completes without
// waiting on anyone absent. A rank that dies between the exchange and MPI_Comm_split can still
// block the others there: MPI gives no way to bound that call.
#include "frugal/mpi_transport.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "frugal/timer.h"
#include "transport/mpi/mpi_work.h"
#include "transport/mpi/peer_copy.h"
#include "transport/mpi/peer_memory.h"

namespace frugal {
namespace {

constexpr Duration kFinalizeGrace = std::chrono::milliseconds(500);

using mpi_internal::AbandonedRequests;
using mpi_internal::BackOff;
using mpi_internal::ByteType;
using mpi_internal::Descriptor;
using mpi_internal::ElementsOf;
using mpi_internal::MakeByteType;
using mpi_internal::MpiError;
using mpi_internal::MpiWork;
using mpi_internal::PeerCopy;
using mpi_internal::StagingPool;
using mpi_internal::Started;
using mpi_internal::WaitPolicy;

// Shared by a transport and every transport split from it.
struct Shared {
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> messages_sent{0};
  WaitPolicy policy;
  bool core_for_each_rank = false;  // RanksOnThisMachine's count, for CoreForEachRank
  std::shared_ptr<StagingPool> pool = std::make_shared<StagingPool>();
  // NewShared's memory: blocks the ranks on this machine can map (peer_memory.h).
  std::shared_ptr<StagingPool> shared_pool = std::make_shared<StagingPool>(/*mappable=*/true);
  std::shared_ptr<AbandonedRequests> abandoned;  // the runtime's
};

// The ranks of `comm` that run on this machine's kernel (this one included) and the cores they may
// run on together. Ranks compare a hash of the kernel's boot id (MPI_Allgather), not their host
// names: ranks of emulated hosts (`--emulate`, one UTS namespace each) have their own host names,
// and Open MPI counts each as a node of its own, but they share the machine's cores. The cores are
// the union of those ranks' affinity masks: mpirun binds each of 2 ranks on 2 cores to a core of
// its own, so one rank's mask alone would count 1 core for 2 ranks. Without a readable boot id,
// the ranks that share memory (MPI_Comm_split_type) are counted instead, with this rank's mask.
struct MachineShare {
  int ranks = 1;
  int cores = 0;      // 0: unknown
  int own_cores = 0;  // this rank's affinity mask; 0: unknown
};
MachineShare RanksOnThisMachine(MPI_Comm comm) {
  struct Entry {
    uint64_t boot;  // 0 marks "unknown"; if any rank has no boot id, all fall back
    cpu_set_t cpus;
  };
  Entry mine{mpi_internal::BootIdHash(), {}};
  CPU_ZERO(&mine.cpus);
  const bool have_mask = sched_getaffinity(0, sizeof(mine.cpus), &mine.cpus) == 0;
  MachineShare share;
  share.cores = have_mask ? CPU_COUNT(&mine.cpus) : 0;
  share.own_cores = share.cores;
  int size = 1;
  MPI_Comm_size(comm, &size);
  std::vector<Entry> all(static_cast<size_t>(size));
  // Every rank sees the same `all`, so all of them take the same branch.
  if (MPI_Allgather(&mine, sizeof(Entry), MPI_BYTE, all.data(), sizeof(Entry), MPI_BYTE, comm) ==
          MPI_SUCCESS &&
      std::none_of(all.begin(), all.end(), [](const Entry& e) { return e.boot == 0; })) {
    cpu_set_t cores;
    CPU_ZERO(&cores);
    share.ranks = 0;
    for (const Entry& e : all) {
      if (e.boot != mine.boot) continue;
      ++share.ranks;
      CPU_OR(&cores, &cores, &e.cpus);
    }
    if (have_mask) share.cores = CPU_COUNT(&cores);
    return share;
  }
  MPI_Comm local = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    MPI_Comm_size(local, &share.ranks);
    MPI_Comm_free(&local);
  }
  return share;
}

// "rank 3" or, in a split transport, "rank 1 (world rank 3)".
std::string PeerName(int rank, const std::vector<int>& world_ranks) {
  if (rank < 0) return "any rank";
  if (rank < static_cast<int>(world_ranks.size()) && world_ranks[rank] != rank) {
    return fmt::format("rank {} (world rank {})", rank, world_ranks[rank]);
  }
  return fmt::format("rank {}", rank);
}

class MpiTransport : public Transport {
 public:
  // Takes ownership of both communicators (same group). Collective over them (PeerMaps, PeerCopy).
  MpiTransport(MPI_Comm comm, MPI_Comm control_comm, std::shared_ptr<Shared> shared)
      : comm_(comm), control_comm_(control_comm), shared_(std::move(shared)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    std::array<char, MPI_MAX_PROCESSOR_NAME> name{};
    int length = 0;
    MPI_Get_processor_name(name.data(), &length);
    hostname_.assign(name.data(), static_cast<size_t>(length));
    // World ranks of this communicator's ranks, for error messages.
    MPI_Group group = MPI_GROUP_NULL;
    MPI_Group world_group = MPI_GROUP_NULL;
    MPI_Comm_group(comm_, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    std::vector<int> ranks(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) ranks[r] = r;
    world_ranks_.assign(static_cast<size_t>(size_), -1);
    MPI_Group_translate_ranks(group, size_, ranks.data(), world_group, world_ranks_.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    std::vector<std::string> names;
    for (int r = 0; r < size_; ++r) names.push_back(PeerName(r, world_ranks_));
    copy_ = PeerCopy::Make(control_comm_, mpi_internal::PeerMaps::Exchange(control_comm_),
                           std::move(names), shared_->abandoned);
  }

  ~MpiTransport() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&comm_);
    MPI_Comm_free(&control_comm_);
  }

  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string hostname() const override { return hostname_; }

  std::unique_ptr<Work> ISend(int dst, int tag, std::span<const std::byte> data) override {
    if (data.empty()) return StartSend(dst, tag, nullptr, data);
    // A message that travels as a descriptor is staged where the receiver can map it.
    StagingPool& pool = copy_->Carries(data.size()) ? *shared_->shared_pool : *shared_->pool;
    std::shared_ptr<std::byte> staging = pool.Acquire(data.size());
    std::memcpy(staging.get(), data.data(), data.size());
    const std::span<const std::byte> from(staging.get(), data.size());
    return StartSend(dst, tag, std::move(staging), from);
  }

  std::unique_ptr<Work> IRecv(int src, int tag, std::span<std::byte> data) override {
    if (data.empty()) return StartRecv(src, tag, nullptr, data, {});
    std::shared_ptr<std::byte> staging = shared_->pool->Acquire(data.size());
    const std::span<std::byte> into(staging.get(), data.size());
    return StartRecv(src, tag, std::move(staging), into, data);
  }

  // No staging: the operation holds `owner`, and an abandoned one hands it to the runtime's
  // keeper with the request.
  std::unique_ptr<Work> ISendShared(int dst, int tag, std::shared_ptr<const void> owner,
                                    std::span<const std::byte> data) override {
    return StartSend(dst, tag, std::const_pointer_cast<void>(std::move(owner)), data);
  }

  std::unique_ptr<Work> IRecvShared(int src, int tag, std::shared_ptr<void> owner,
                                    std::span<std::byte> data) override {
    return StartRecv(src, tag, std::move(owner), data, {});
  }

  SharedBytes NewShared(size_t bytes) override {
    std::shared_ptr<std::byte> memory = shared_->shared_pool->Acquire(bytes);
    const std::span<std::byte> view(memory.get(), bytes);
    return SharedBytes{std::move(memory), view};
  }

  bool SharesMemoryWithPeers() const override { return copy_->maps().all_mapped(); }
  bool CoreForEachRank() const override { return shared_->core_for_each_rank; }
  std::optional<PeerRegion> RegionOf(std::span<const std::byte> bytes) const override {
    return shared_->shared_pool->RegionOf(bytes);
  }
  StatusOr<const std::byte*> MapPeerRegion(int peer, const PeerRegion& region) override {
    FRUGAL_CHECK(peer >= 0 && peer < size_, "MapPeerRegion: rank ", peer, " of ", size_);
    if (!copy_->maps().all_mapped()) return Transport::MapPeerRegion(peer, region);
    return copy_->maps().Map(peer, region, PeerName(peer, world_ranks_));
  }

  StatusOr<ProbeResult> Probe(int src, int tag, Duration timeout) override {
    const auto start = Clock::now();
    while (true) {
      FRUGAL_ASSIGN_OR_RETURN(std::optional<ProbeResult> found, TryProbe(src, tag));
      if (found) return *found;
      const auto waited = Clock::now() - start;
      if (waited >= timeout) break;
      BackOff(shared_->policy, waited);
    }
    return TimeoutError(fmt::format("no message from {} within {} ms (tag {})",
                                    PeerName(src, world_ranks_), timeout.count(), tag));
  }

  StatusOr<std::optional<ProbeResult>> IProbe(int src, int tag) override {
    return TryProbe(src, tag);
  }

  StatusOr<std::unique_ptr<Transport>> Split(int color, int key, Duration timeout) override {
    // 1. Exchange (color, key) with every rank on the control communicator, with the timeout.
    // The pairs are owned by the requests: on a timeout they go to the runtime's keeper.
    auto pairs_memory = std::make_shared<std::vector<std::array<int, 2>>>(size_);
    std::vector<std::array<int, 2>>& pairs = *pairs_memory;
    pairs[rank_] = {color, key};
    std::vector<MPI_Request> sends;
    std::vector<MPI_Request> recvs(static_cast<size_t>(size_), MPI_REQUEST_NULL);
    auto give_up = [&] {
      for (MPI_Request& request : recvs) shared_->abandoned->Add(request, true, pairs_memory);
      for (MPI_Request& request : sends) shared_->abandoned->Add(request, false, pairs_memory);
    };
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      int rc = MPI_Irecv(pairs[r].data(), 2, MPI_INT, r, kSplitTag, control_comm_, &recvs[r]);
      if (rc != MPI_SUCCESS) {
        give_up();
        return MpiError(rc, "split: receive");
      }
    }
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request request = MPI_REQUEST_NULL;
      int rc = MPI_Isend(pairs[rank_].data(), 2, MPI_INT, r, kSplitTag, control_comm_, &request);
      if (rc != MPI_SUCCESS) {
        give_up();
        return MpiError(rc, "split: send");
      }
      sends.push_back(request);
    }
    const auto start = Clock::now();
    int pending = size_ - 1;
    while (pending > 0) {
      pending = 0;
      for (int r = 0; r < size_; ++r) {
        if (recvs[r] == MPI_REQUEST_NULL) continue;
        int flag = 0;
        int rc = MPI_Test(&recvs[r], &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
          recvs[r] = MPI_REQUEST_NULL;
          give_up();
          return MpiError(rc, "split: receive");
        }
        if (!flag) ++pending;
      }
      if (pending == 0) break;
      copy_->Progress();
      const auto waited = Clock::now() - start;
      if (waited >= timeout) {
        std::string missing;
        for (int r = 0; r < size_; ++r) {
          if (recvs[r] == MPI_REQUEST_NULL) continue;
          missing += (missing.empty() ? "" : ", ") + PeerName(r, world_ranks_);
        }
        give_up();
        return TimeoutError(
            fmt::format("split: no answer from {} within {} ms", missing, timeout.count()));
      }
      BackOff(shared_->policy, waited);
    }
    // Every send was received, so they complete now.
    int rc = MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return MpiError(rc, "split: send");

    // 2. Renumber colors densely (MPI colors must be non-negative) and split both communicators.
    std::map<int, int> dense;
    for (const auto& pair : pairs) dense.emplace(pair[0], 0);
    int next = 0;
    for (auto& [c, index] : dense) index = next++;
    MPI_Comm child = MPI_COMM_NULL;
    rc = MPI_Comm_split(comm_, dense[color], key, &child);
    if (rc != MPI_SUCCESS) return MpiError(rc, "split: MPI_Comm_split");
    MPI_Comm child_control = MPI_COMM_NULL;
    rc = MPI_Comm_split(control_comm_, dense[color], key, &child_control);
    if (rc != MPI_SUCCESS) {
      MPI_Comm_free(&child);
      return MpiError(rc, "split: MPI_Comm_split");
    }
    MPI_Comm_set_errhandler(child, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(child_control, MPI_ERRORS_RETURN);
    return std::unique_ptr<Transport>(
        std::make_unique<MpiTransport>(child, child_control, shared_));
  }

  uint64_t bytes_sent() const override {
    return shared_->bytes_sent.load(std::memory_order_relaxed);
  }
  uint64_t messages_sent() const override {
    return shared_->messages_sent.load(std::memory_order_relaxed);
  }

 private:
  friend std::unique_ptr<Work> mpi_internal::WorkForRequest(
      Transport& t, MPI_Request request, mpi_internal::Memory memory, std::string what,
      std::function<std::string(Duration)> timeout_message);

  // Sends `from`, which lies in `memory` (owned by the operation from now on): as a descriptor
  // where the peer copy carries it (peer_copy.h), otherwise with MPI_Isend.
  std::unique_ptr<Work> StartSend(int dst, int tag, mpi_internal::Memory memory,
                                  std::span<const std::byte> from) {
    FRUGAL_CHECK(dst >= 0 && dst < size_, "ISend: destination rank ", dst, " of ", size_);
    FRUGAL_CHECK(tag >= 0 && tag <= kMaxTag, "ISend: tag ", tag, " outside [0, ", kMaxTag, "]");
    shared_->abandoned->Reap();
    if (copy_->Carries(from.size())) {
      std::optional<PeerRegion> region = shared_->shared_pool->RegionOf(from);
      if (!region) {
        std::shared_ptr<std::byte> mappable = shared_->shared_pool->Acquire(from.size());
        std::memcpy(mappable.get(), from.data(), from.size());
        from = {mappable.get(), from.size()};
        memory = std::move(mappable);
        region = shared_->shared_pool->RegionOf(from);
      }
      if (region) return StartDescriptorSend(dst, tag, std::move(memory), from.size(), *region);
      // No memfd could be made (out of file descriptors): MPI carries it, unless its size is
      // the descriptor's own, which the receiver would take for one.
      if (from.size() == Descriptor::kBytes) {
        return std::make_unique<MpiWork>(
            IoError(fmt::format("send to {} (tag {}): no memory the receiver can map",
                                PeerName(dst, world_ranks_), tag)),
            dst);
      }
    }
    Started op = Operation(/*is_recv=*/false, dst, tag);
    op.bytes = from.size();
    op.peer_copy = Progressing();
    auto type = MakeByteType(from.size());
    if (!type.ok()) return std::make_unique<MpiWork>(type.status(), dst);
    op.type = *type;
    op.memory = std::move(memory);
    int rc = MPI_Isend(from.data(), type->count, type->type, dst, tag, comm_, &op.request);
    if (rc != MPI_SUCCESS) {
      if (type->derived) MPI_Type_free(&type->type);
      return std::make_unique<MpiWork>(
          MpiError(rc, fmt::format("send to {} (tag {})", op.peer_name, tag)), dst);
    }
    Count(from.size());
    return std::make_unique<MpiWork>(std::move(op), shared_->policy, shared_->abandoned);
  }

  // Sends the descriptor of `region` (the `bytes` bytes of the message, in `memory`) and receives
  // its acknowledgement.
  std::unique_ptr<Work> StartDescriptorSend(int dst, int tag, mpi_internal::Memory memory,
                                            size_t bytes, const PeerRegion& region) {
    Started op = Operation(/*is_recv=*/false, dst, tag);
    op.bytes = bytes;
    op.peer_copy = copy_;
    StatusOr<Descriptor> descriptor = copy_->ExpectAcknowledgement(dst, region, &op.ack);
    if (!descriptor.ok()) return std::make_unique<MpiWork>(descriptor.status(), dst);
    struct Message {
      mpi_internal::Memory region;
      std::array<std::byte, Descriptor::kBytes> bytes;
    };
    auto message = std::make_shared<Message>(Message{std::move(memory), descriptor->Encode()});
    op.memory = message;
    int rc = MPI_Isend(message->bytes.data(), static_cast<int>(Descriptor::kBytes), MPI_BYTE, dst,
                       tag, comm_, &op.request);
    if (rc != MPI_SUCCESS) {
      shared_->abandoned->Add(op.ack, /*cancel=*/true, std::move(op.memory));
      return std::make_unique<MpiWork>(
          MpiError(rc, fmt::format("send to {} (tag {})", op.peer_name, tag)), dst);
    }
    Count(bytes);
    return std::make_unique<MpiWork>(std::move(op), shared_->policy, shared_->abandoned);
  }

  void Count(size_t bytes) {
    shared_->bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
    shared_->messages_sent.fetch_add(1, std::memory_order_relaxed);
  }

  // The peer copy, for operations that only make progress for it (null when it is off).
  std::shared_ptr<PeerCopy> Progressing() const { return copy_->active() ? copy_ : nullptr; }

  // MPI_Irecv into `into`, which lies in `memory` (owned by the operation from now on); when
  // `deliver_to` is not empty (a staged receive) the message is copied there at completion.
  std::unique_ptr<Work> StartRecv(int src, int tag, mpi_internal::Memory memory,
                                  std::span<std::byte> into, std::span<std::byte> deliver_to) {
    FRUGAL_CHECK(src == kAnySource || (src >= 0 && src < size_), "IRecv: source rank ", src, " of ",
                 size_);
    FRUGAL_CHECK(tag >= 0 && tag <= kMaxTag, "IRecv: tag ", tag, " outside [0, ", kMaxTag, "]");
    shared_->abandoned->Reap();
    Started op = Operation(/*is_recv=*/true, src, tag);
    op.capacity = into.size();
    op.landing = into;
    op.deliver_to = deliver_to;
    op.memory = std::move(memory);
    op.peer_copy = Progressing();
    if (op.peer_copy) {
      // A descriptor a probe took already came before anything MPI holds.
      op.stashed = copy_->TakeStashed(src, tag);
      if (op.stashed)
        return std::make_unique<MpiWork>(std::move(op), shared_->policy, shared_->abandoned);
    }
    auto type = MakeByteType(into.size());
    if (!type.ok()) return std::make_unique<MpiWork>(type.status(), src);
    op.type = *type;
    int rc = MPI_Irecv(into.data(), type->count, type->type,
                       src == kAnySource ? MPI_ANY_SOURCE : src, tag, comm_, &op.request);
    if (rc != MPI_SUCCESS) {
      if (type->derived) MPI_Type_free(&type->type);
      return std::make_unique<MpiWork>(
          MpiError(rc, fmt::format("receive from {} (tag {})", op.peer_name, tag)), src);
    }
    return std::make_unique<MpiWork>(std::move(op), shared_->policy, shared_->abandoned);
  }

  Started Operation(bool is_recv, int peer, int tag) const {
    Started op;
    op.is_recv = is_recv;
    op.peer = peer;
    op.tag = tag;
    op.peer_name = PeerName(peer, world_ranks_);
    return op;
  }

  StatusOr<std::optional<ProbeResult>> TryProbe(int src, int tag) {
    FRUGAL_CHECK(src == kAnySource || (src >= 0 && src < size_), "probe: source rank ", src, " of ",
                 size_);
    FRUGAL_CHECK(tag >= 0 && tag <= kMaxTag, "probe: tag ", tag, " outside [0, ", kMaxTag, "]");
    if (copy_->active()) {
      copy_->Progress();
      if (const PeerCopy::Stashed* s = copy_->FindStashed(src, tag)) {
        return std::optional<ProbeResult>(ProbeResult{s->source, s->tag, s->bytes});
      }
    }
    int flag = 0;
    MPI_Status status;
    int rc = MPI_Iprobe(src == kAnySource ? MPI_ANY_SOURCE : src, tag, comm_, &flag, &status);
    if (rc != MPI_SUCCESS) return MpiError(rc, "probe");
    if (!flag) return std::optional<ProbeResult>();
    const size_t bytes = ElementsOf(status, MPI_BYTE);
    if (copy_->active() && bytes == Descriptor::kBytes) {
      // A descriptor: taken off MPI's queue (the same source's first message with this tag) and
      // kept for its receive, so that the size of the message it names can be told.
      MPI_Message message = MPI_MESSAGE_NULL;
      rc = MPI_Improbe(status.MPI_SOURCE, tag, comm_, &flag, &message, &status);
      if (rc != MPI_SUCCESS) return MpiError(rc, "probe");
      if (!flag) return std::optional<ProbeResult>();
      std::array<std::byte, Descriptor::kBytes> bytes_of{};
      rc = MPI_Mrecv(bytes_of.data(), static_cast<int>(bytes_of.size()), MPI_BYTE, &message,
                     &status);
      if (rc != MPI_SUCCESS) return MpiError(rc, "probe: receiving a descriptor");
      const PeerCopy::Stashed& s = copy_->Stash(status.MPI_SOURCE, tag, bytes_of);
      return std::optional<ProbeResult>(ProbeResult{s.source, s.tag, s.bytes});
    }
    return std::optional<ProbeResult>(ProbeResult{status.MPI_SOURCE, status.MPI_TAG, bytes});
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm control_comm_ = MPI_COMM_NULL;
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<PeerCopy> copy_;
  int rank_ = 0;
  int size_ = 1;
  std::string hostname_;
  std::vector<int> world_ranks_;
};

}  // namespace

StatusOr<std::unique_ptr<MpiRuntime>> MpiRuntime::Init(int* argc, char*** argv) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized || finalized) {
    return FailedPreconditionError(
        "MPI was already initialised in this process; frugal's MpiRuntime must be the only one");
  }
  // Set only where the job has not: an explicit `mpirun --mca` wins (see mpi_transport.h).
  const std::string eager = std::to_string(kTcpEagerBytes);
  setenv("OMPI_MCA_btl_tcp_eager_limit", eager.c_str(), /*overwrite=*/0);
  setenv("OMPI_MCA_btl_tcp_max_send_size", eager.c_str(), /*overwrite=*/0);
  int provided = MPI_THREAD_SINGLE;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) return FailedPreconditionError("MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return FailedPreconditionError(
        fmt::format("MPI provides thread level {} but frugal needs MPI_THREAD_SERIALIZED ({})",
                    provided, static_cast<int>(MPI_THREAD_SERIALIZED)));
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::unique_ptr<MpiRuntime> runtime(new MpiRuntime());
  runtime->abandoned_ = std::make_shared<AbandonedRequests>();
  MPI_Comm_rank(MPI_COMM_WORLD, &runtime->world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &runtime->world_size_);
  return runtime;
}

StatusOr<std::unique_ptr<MpiRuntime>> MpiRuntime::InitOrAdopt(int* argc, char*** argv) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized && !finalized) return Init(argc, argv);
  if (finalized) return FailedPreconditionError("MPI was finalised in this process already");
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    return FailedPreconditionError(fmt::format(
        "MPI was initialised with thread level {} but frugal needs MPI_THREAD_SERIALIZED ({}) or "
        "more",
        provided, static_cast<int>(MPI_THREAD_SERIALIZED)));
  }
  std::unique_ptr<MpiRuntime> runtime(new MpiRuntime());
  runtime->owns_mpi_ = false;
  runtime->abandoned_ = std::make_shared<AbandonedRequests>();
  MPI_Comm_rank(MPI_COMM_WORLD, &runtime->world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &runtime->world_size_);
  return runtime;
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // Abandoned operations get a last chance to complete; their memory is released only after
  // MPI_Finalize, when MPI can no longer touch it (abandoned_ is destroyed after this body).
  // MPI adopted from its owner stays initialised: its operations get the same chance.
  abandoned_->Finalize(kFinalizeGrace);
  if (owns_mpi_) MPI_Finalize();
}

StatusOr<std::unique_ptr<Transport>> MpiRuntime::World() {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm control = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_dup");
  rc = MPI_Comm_dup(MPI_COMM_WORLD, &control);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&comm);
    return MpiError(rc, "MPI_Comm_dup");
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
  // Ranks on this machine against the cores this process may run on.
  auto shared = std::make_shared<Shared>();
  shared->abandoned = abandoned_;
  const MachineShare machine = RanksOnThisMachine(comm);
  ranks_on_this_machine_ = machine.ranks;
  const int cores =
      machine.cores > 0 ? machine.cores : static_cast<int>(std::thread::hardware_concurrency());
  shared->policy = mpi_internal::WaitPolicyFor(machine.ranks, cores, machine.own_cores);
  shared->core_for_each_rank = cores > 0 && machine.ranks <= cores;
  return std::unique_ptr<Transport>(std::make_unique<MpiTransport>(comm, control, shared));
}

size_t MpiRuntime::abandoned_operations() { return abandoned_->Reap(); }

void MpiRuntime::Abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

namespace mpi_internal {

bool IsMpiTransport(const Transport& t) { return dynamic_cast<const MpiTransport*>(&t) != nullptr; }

std::unique_ptr<Work> WorkForRequest(Transport& t, MPI_Request request, Memory memory,
                                     std::string what,
                                     std::function<std::string(Duration)> timeout_message) {
  auto* mpi = dynamic_cast<MpiTransport*>(&t);
  FRUGAL_CHECK(mpi != nullptr, "WorkForRequest needs an MPI transport");
  Started op;
  op.request = request;
  op.memory = std::move(memory);
  op.what = std::move(what);
  op.timeout_message = std::move(timeout_message);
  op.peer_copy = mpi->Progressing();
  return std::make_unique<MpiWork>(std::move(op), mpi->shared_->policy, mpi->shared_->abandoned);
}

}  // namespace mpi_internal
}  // namespace frugal
