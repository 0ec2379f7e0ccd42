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
// MpiWork::Wait polls MPI_Test, which also drives Open MPI's progress engine (there is no
// progress thread). The poll backs off in three steps (WaitPolicy, BackOff): pure polling for
// `spin`, polling with sched_yield until kYieldTime, then polling with sleeps that grow with the
// time already waited, capped at kMaxSleep, so a long wait costs little CPU (the engine's
// communication thread shares the cores with the training threads) and at most ~1/16 of extra
// latency. `spin` depends on whether this machine runs more ranks than it has cores (counted
// once by World(), see RanksOnThisMachine): oversubscribed, a waiting rank yields after
// kOversubscribedSpin so that the rank it waits for can run; otherwise it polls for the whole
// kYieldTime like MPI's own blocking calls, because a yield on a busy machine can lose the core
// for a whole scheduler time slice (milliseconds) while the answer is on its way. On expiry a
// receive is cancelled with MPI_Cancel (Open MPI can cancel a receive that has not been matched)
// and Wait returns kTimeout naming the peer.
//
// Split(color, key, timeout): MPI_Comm_split is a blocking collective with no timeout. To give
// Split the timeout every wait in frugal has, every rank first sends its (color, key) to every
// other rank on `control_comm_` and waits for all of them with the timeout; the ranks that did
// not answer are named. Once every rank's pair has arrived, all of them are inside Split, and
// MPI_Comm_split (with colors renumbered densely, so any int is a valid color) completes without
// waiting on anyone absent. A rank that dies between the exchange and MPI_Comm_split can still
// block the others there: MPI gives no way to bound that call.
#include "frugal/mpi_transport.h"

// The C API only; Open MPI's deprecated C++ bindings are not used.
#define OMPI_SKIP_MPICXX 1
#include <fmt/format.h>
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "frugal/timer.h"

namespace frugal {
namespace {

constexpr auto kOversubscribedSpin = std::chrono::microseconds(50);
constexpr auto kYieldTime = std::chrono::milliseconds(5);
constexpr auto kMaxSleep = std::chrono::microseconds(500);
constexpr auto kCancelGrace = std::chrono::milliseconds(200);
constexpr size_t kLargeBlockBytes = size_t{1} << 30;
constexpr int kSplitTag = kTransportTags[0];

std::string MpiErrorString(int error) {
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int length = 0;
  if (MPI_Error_string(error, text.data(), &length) != MPI_SUCCESS) {
    return fmt::format("MPI error {}", error);
  }
  return std::string(text.data(), static_cast<size_t>(length));
}

// Maps an MPI error code to frugal's closed set of codes.
Status MpiError(int error, std::string_view what) {
  int error_class = MPI_ERR_OTHER;
  MPI_Error_class(error, &error_class);
  std::string message = fmt::format("{}: {}", what, MpiErrorString(error));
  switch (error_class) {
    case MPI_ERR_TRUNCATE:
      return MalformedError(std::move(message));
    case MPI_ERR_RANK:
    case MPI_ERR_TAG:
    case MPI_ERR_COUNT:
    case MPI_ERR_BUFFER:
    case MPI_ERR_ARG:
    case MPI_ERR_COMM:
    case MPI_ERR_TYPE:
      return InvalidArgumentError(std::move(message));
    case MPI_ERR_INTERN:
    case MPI_ERR_NO_MEM:
      return InternalError(std::move(message));
    default:
      return IoError(std::move(message));
  }
}

// A datatype and count describing `bytes` contiguous bytes. For bytes <= INT_MAX it is
// (MPI_BYTE, bytes); otherwise a committed derived type that the caller frees.
struct ByteType {
  MPI_Datatype type = MPI_BYTE;
  int count = 0;
  bool derived = false;
};

StatusOr<ByteType> MakeByteType(size_t bytes) {
  if (bytes <= static_cast<size_t>(INT_MAX)) return ByteType{MPI_BYTE, static_cast<int>(bytes)};
  const size_t blocks = bytes / kLargeBlockBytes;
  const size_t rest = bytes % kLargeBlockBytes;
  if (blocks > static_cast<size_t>(INT_MAX)) {
    return InvalidArgumentError(fmt::format("a message of {} bytes is too large for MPI", bytes));
  }
  MPI_Datatype block = MPI_DATATYPE_NULL;
  MPI_Datatype body = MPI_DATATYPE_NULL;
  int rc = MPI_Type_contiguous(static_cast<int>(kLargeBlockBytes), MPI_BYTE, &block);
  if (rc == MPI_SUCCESS) rc = MPI_Type_contiguous(static_cast<int>(blocks), block, &body);
  if (block != MPI_DATATYPE_NULL) MPI_Type_free(&block);
  if (rc != MPI_SUCCESS) return MpiError(rc, "building a large message type");
  MPI_Datatype whole = body;
  if (rest > 0) {
    std::array<int, 2> lengths = {1, static_cast<int>(rest)};
    std::array<MPI_Aint, 2> displacements = {0, static_cast<MPI_Aint>(blocks * kLargeBlockBytes)};
    std::array<MPI_Datatype, 2> types = {body, MPI_BYTE};
    rc = MPI_Type_create_struct(2, lengths.data(), displacements.data(), types.data(), &whole);
    MPI_Type_free(&body);
    if (rc != MPI_SUCCESS) return MpiError(rc, "building a large message type");
  }
  rc = MPI_Type_commit(&whole);
  if (rc != MPI_SUCCESS) {
    MPI_Type_free(&whole);
    return MpiError(rc, "committing a large message type");
  }
  return ByteType{whole, 1, true};
}

// Bytes received, from the status of a receive made with `type` (whose elements are all bytes).
// Open MPI 4.1 answers MPI_UNDEFINED for a derived type that the message fills only partly; the
// count in MPI_BYTE elements is the same number and is then used instead.
size_t ElementsOf(const MPI_Status& status, MPI_Datatype type) {
  MPI_Count count = MPI_UNDEFINED;
  if (MPI_Get_elements_x(&status, type, &count) != MPI_SUCCESS || count == MPI_UNDEFINED) {
    if (MPI_Get_elements_x(&status, MPI_BYTE, &count) != MPI_SUCCESS || count == MPI_UNDEFINED) {
      return 0;
    }
  }
  return static_cast<size_t>(count);
}

// How long a wait polls before it starts to yield the core.
struct WaitPolicy {
  Clock::duration spin = kYieldTime;
};

// Shared by a transport and every transport split from it.
struct Shared {
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> messages_sent{0};
  WaitPolicy policy;
};

// Sleeps or yields between polls according to how long the caller has waited already.
void BackOff(const WaitPolicy& policy, Clock::duration waited) {
  if (waited < policy.spin) return;
  if (waited < kYieldTime) {
    sched_yield();
    return;
  }
  auto sleep = std::min<Clock::duration>(waited / 16, kMaxSleep);
  std::this_thread::sleep_for(sleep);
}

// The number of ranks of `comm` that run on this machine's kernel, this one included. Ranks
// compare a hash of the kernel's boot id (MPI_Allgather), not their host names: ranks of
// emulated hosts (`--emulate`, one UTS namespace each) have their own host names, and Open MPI
// counts each as a node of its own, but they share the machine's cores. Without a readable boot
// id, the ranks that share memory (MPI_Comm_split_type) are counted instead.
int RanksOnThisMachine(MPI_Comm comm) {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(in, boot_id);
  // 0 marks "unknown"; if any rank has no boot id, all of them fall back to shared memory.
  const uint64_t mine = boot_id.empty() ? 0 : std::hash<std::string>{}(boot_id) | 1;
  int size = 1;
  MPI_Comm_size(comm, &size);
  std::vector<uint64_t> all(static_cast<size_t>(size));
  // Every rank sees the same `all`, so all of them take the same branch.
  if (MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm) == MPI_SUCCESS &&
      std::find(all.begin(), all.end(), uint64_t{0}) == all.end()) {
    return static_cast<int>(std::count(all.begin(), all.end(), mine));
  }
  int local_ranks = 1;
  MPI_Comm local = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    MPI_Comm_size(local, &local_ranks);
    MPI_Comm_free(&local);
  }
  return local_ranks;
}

// "rank 3" or, in a split transport, "rank 1 (world rank 3)".
std::string PeerName(int rank, const std::vector<int>& world_ranks) {
  if (rank < 0) return "any rank";
  if (rank < static_cast<int>(world_ranks.size()) && world_ranks[rank] != rank) {
    return fmt::format("rank {} (world rank {})", rank, world_ranks[rank]);
  }
  return fmt::format("rank {}", rank);
}

class MpiWork : public Work {
 public:
  // A Work that already failed when it was started.
  MpiWork(Status status, int peer) : done_(true), status_(std::move(status)), peer_(peer) {}

  MpiWork(MPI_Request request, ByteType type, bool is_recv, int peer, int tag, size_t size,
          std::string peer_name, WaitPolicy policy)
      : policy_(policy),
        request_(request),
        type_(type),
        is_recv_(is_recv),
        peer_(peer),
        tag_(tag),
        size_(size),
        bytes_(is_recv ? 0 : size),
        peer_name_(std::move(peer_name)) {}

  ~MpiWork() override {
    if (request_ != MPI_REQUEST_NULL) Abandon();
    FreeType();
  }

  MpiWork(const MpiWork&) = delete;
  MpiWork& operator=(const MpiWork&) = delete;

  Status Wait(Duration timeout) override {
    const auto start = Clock::now();
    while (true) {
      if (IsCompleted()) return status_;
      const auto waited = Clock::now() - start;
      if (waited >= timeout) break;
      BackOff(policy_, waited);
    }
    Abandon();
    done_ = true;
    status_ = is_recv_ ? TimeoutError(fmt::format("no message from {} within {} ms (tag {})",
                                                  peer_name_, timeout.count(), tag_))
                       : TimeoutError(fmt::format("{} did not take a message within {} ms (tag {})",
                                                  peer_name_, timeout.count(), tag_));
    return status_;
  }

  bool IsCompleted() override {
    if (done_) return true;
    int flag = 0;
    MPI_Status status;
    int rc = MPI_Test(&request_, &flag, &status);
    if (rc != MPI_SUCCESS) {
      // The request is complete (and freed by MPI) with an error.
      request_ = MPI_REQUEST_NULL;
      done_ = true;
      int error_class = MPI_ERR_OTHER;
      MPI_Error_class(rc, &error_class);
      if (is_recv_ && error_class == MPI_ERR_TRUNCATE) {
        status_ = MalformedError(
            fmt::format("message from {} (tag {}) is larger than the receive buffer of {} bytes",
                        peer_name_, tag_, size_));
      } else {
        status_ = MpiError(rc, fmt::format("{} {} (tag {})", is_recv_ ? "receive from" : "send to",
                                           peer_name_, tag_));
      }
      FreeType();
      return true;
    }
    if (!flag) return false;
    request_ = MPI_REQUEST_NULL;
    done_ = true;
    if (is_recv_) {
      peer_ = status.MPI_SOURCE;
      bytes_ = ElementsOf(status, type_.type);
    }
    FreeType();
    return true;
  }

  int peer() const override { return peer_; }
  size_t bytes() const override { return bytes_; }

 private:
  // Gives up on a request that has not completed: cancels a receive (and gives MPI a moment to
  // confirm), releases a send to complete in the background. Never blocks for long.
  void Abandon() {
    if (request_ == MPI_REQUEST_NULL) return;
    if (is_recv_) {
      MPI_Cancel(&request_);
      const auto start = Clock::now();
      while (Clock::now() - start < kCancelGrace) {
        int flag = 0;
        MPI_Status status;
        if (MPI_Test(&request_, &flag, &status) != MPI_SUCCESS || flag) {
          request_ = MPI_REQUEST_NULL;
          return;
        }
        sched_yield();
      }
    }
    MPI_Request_free(&request_);
    request_ = MPI_REQUEST_NULL;
  }

  void FreeType() {
    if (type_.derived) {
      MPI_Type_free(&type_.type);
      type_ = ByteType{};
    }
  }

  WaitPolicy policy_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  ByteType type_;
  bool is_recv_ = false;
  bool done_ = false;
  Status status_;
  int peer_ = -1;
  int tag_ = -1;
  size_t size_ = 0;
  size_t bytes_ = 0;
  std::string peer_name_;
};

class MpiTransport : public Transport {
 public:
  // Takes ownership of both communicators (same group).
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
    FRUGAL_CHECK(dst >= 0 && dst < size_, "ISend: destination rank ", dst, " of ", size_);
    FRUGAL_CHECK(tag >= 0 && tag <= kMaxTag, "ISend: tag ", tag, " outside [0, ", kMaxTag, "]");
    auto type = MakeByteType(data.size());
    if (!type.ok()) return std::make_unique<MpiWork>(type.status(), dst);
    MPI_Request request = MPI_REQUEST_NULL;
    // MPI's C binding takes `const void*`, the buffer is not written.
    int rc = MPI_Isend(data.data(), type->count, type->type, dst, tag, comm_, &request);
    if (rc != MPI_SUCCESS) {
      if (type->derived) MPI_Type_free(&type->type);
      return std::make_unique<MpiWork>(
          MpiError(rc, fmt::format("send to {}", PeerName(dst, world_ranks_))), dst);
    }
    shared_->bytes_sent.fetch_add(data.size(), std::memory_order_relaxed);
    shared_->messages_sent.fetch_add(1, std::memory_order_relaxed);
    return std::make_unique<MpiWork>(request, *type, /*is_recv=*/false, dst, tag, data.size(),
                                     PeerName(dst, world_ranks_), shared_->policy);
  }

  std::unique_ptr<Work> IRecv(int src, int tag, std::span<std::byte> data) override {
    FRUGAL_CHECK(src == kAnySource || (src >= 0 && src < size_), "IRecv: source rank ", src, " of ",
                 size_);
    FRUGAL_CHECK(tag >= 0 && tag <= kMaxTag, "IRecv: tag ", tag, " outside [0, ", kMaxTag, "]");
    auto type = MakeByteType(data.size());
    if (!type.ok()) return std::make_unique<MpiWork>(type.status(), src);
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = MPI_Irecv(data.data(), type->count, type->type,
                       src == kAnySource ? MPI_ANY_SOURCE : src, tag, comm_, &request);
    if (rc != MPI_SUCCESS) {
      if (type->derived) MPI_Type_free(&type->type);
      return std::make_unique<MpiWork>(
          MpiError(rc, fmt::format("receive from {}", PeerName(src, world_ranks_))), src);
    }
    return std::make_unique<MpiWork>(request, *type, /*is_recv=*/true, src, tag, data.size(),
                                     PeerName(src, world_ranks_), shared_->policy);
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

  std::optional<ProbeResult> IProbe(int src, int tag) override {
    auto found = TryProbe(src, tag);
    if (!found.ok()) return std::nullopt;
    return *found;
  }

  StatusOr<std::unique_ptr<Transport>> Split(int color, int key, Duration timeout) override {
    // 1. Exchange (color, key) with every rank on the control communicator, with the timeout.
    std::vector<std::array<int, 2>> pairs(static_cast<size_t>(size_));
    pairs[rank_] = {color, key};
    std::vector<MPI_Request> sends;
    std::vector<MPI_Request> recvs(static_cast<size_t>(size_), MPI_REQUEST_NULL);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      int rc = MPI_Irecv(pairs[r].data(), 2, MPI_INT, r, kSplitTag, control_comm_, &recvs[r]);
      if (rc != MPI_SUCCESS) return MpiError(rc, "split: receive");
    }
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request request = MPI_REQUEST_NULL;
      int rc = MPI_Isend(pairs[rank_].data(), 2, MPI_INT, r, kSplitTag, control_comm_, &request);
      if (rc != MPI_SUCCESS) return MpiError(rc, "split: send");
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
        if (rc != MPI_SUCCESS) return MpiError(rc, "split: receive");
        if (!flag) ++pending;
      }
      if (pending == 0) break;
      const auto waited = Clock::now() - start;
      if (waited >= timeout) {
        std::string missing;
        for (int r = 0; r < size_; ++r) {
          if (recvs[r] == MPI_REQUEST_NULL) continue;
          missing += (missing.empty() ? "" : ", ") + PeerName(r, world_ranks_);
          MPI_Cancel(&recvs[r]);
          MPI_Request_free(&recvs[r]);
        }
        for (MPI_Request& request : sends) MPI_Request_free(&request);
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
  StatusOr<std::optional<ProbeResult>> TryProbe(int src, int tag) {
    FRUGAL_CHECK(src == kAnySource || (src >= 0 && src < size_), "probe: source rank ", src, " of ",
                 size_);
    FRUGAL_CHECK(tag >= 0 && tag <= kMaxTag, "probe: tag ", tag, " outside [0, ", kMaxTag, "]");
    int flag = 0;
    MPI_Status status;
    int rc = MPI_Iprobe(src == kAnySource ? MPI_ANY_SOURCE : src, tag, comm_, &flag, &status);
    if (rc != MPI_SUCCESS) return MpiError(rc, "probe");
    if (!flag) return std::optional<ProbeResult>();
    return std::optional<ProbeResult>(
        ProbeResult{status.MPI_SOURCE, status.MPI_TAG, ElementsOf(status, MPI_BYTE)});
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm control_comm_ = MPI_COMM_NULL;
  std::shared_ptr<Shared> shared_;
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
  MPI_Comm_rank(MPI_COMM_WORLD, &runtime->world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &runtime->world_size_);
  return runtime;
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
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
  const int local_ranks = RanksOnThisMachine(comm);
  ranks_on_this_machine_ = local_ranks;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int cores = sched_getaffinity(0, sizeof(cpus), &cpus) == 0
                        ? CPU_COUNT(&cpus)
                        : static_cast<int>(std::thread::hardware_concurrency());
  if (cores > 0 && local_ranks > cores) shared->policy.spin = kOversubscribedSpin;
  return std::unique_ptr<Transport>(std::make_unique<MpiTransport>(comm, control, shared));
}

void MpiRuntime::Abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace frugal
