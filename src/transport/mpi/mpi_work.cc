// The MPI transport's Work and what it rests on.
//
// MpiWork::Wait polls MPI_Test, which also drives Open MPI's progress engine (there is no
// progress thread). The poll backs off in three steps (WaitPolicy, BackOff): pure polling for
// `spin`, polling with sched_yield until `yield`, then polling with sleeps that grow with the
// time already waited, capped at kMaxSleep, so a long wait costs little CPU (the engine's
// communication thread shares the cores with the training threads) and at most ~1/16 of extra
// latency.
//
// WaitPolicyFor: a rank with two cores of its own polls for kYieldTime like MPI's own blocking
// calls, because a yield on a busy machine can lose the core for a whole scheduler time slice
// (milliseconds) while the answer is on its way. Two, because a training rank runs its compute
// and the engine's waits at once: with one core per rank (2 ranks on 2 cores, or a rank bound to
// one core) 5 ms of polling per wait on an emulated link made a step's compute 1.7-2x as long
// while communication ran (docs/performance.md, "The wait policy with a core per rank"). Where
// ranks have less than that, a waiting rank yields after kOversubscribedSpin so that the threads
// it shares cores with can run, and sleeps after kOversubscribedYield: threads that call
// sched_yield stay runnable, and several of them on one core hand it to each other, so a yield
// phase of milliseconds per wait made the engine threads of 4 ranks on 2 cores (waiting on
// emulated 100 Mbit/s links) take a whole core from the training threads (docs/performance.md,
// "Overlap"). kOversubscribedYield still covers the waits of a shared-memory exchange, where the
// peer answers within a few hundred microseconds once it runs; with nothing else runnable a yield
// returns at once, so such waits poll as before.
//
// An MpiWork owns the memory MPI uses (Started::memory): the transport copies a send into a
// staging buffer before MPI_Isend and receives into a staging buffer that is copied to the
// caller's buffer when the receive completes; ISendShared and IRecvShared use the caller's shared
// memory instead, which the Work holds. A Work that times out or is destroyed unfinished
// hands its request and that memory to AbandonedRequests (receives are cancelled first, which
// Open MPI can do while no message has matched them); the caller's own buffers are free at once.
// A send made as a descriptor (peer_copy.h) completes when its acknowledgement has arrived too;
// given up, its acknowledgement's receive goes to AbandonedRequests with the memory the receiver
// may still be copying from. A receive given up after its descriptor arrived acknowledges it
// unread. AbandonedRequests tests its requests whenever the transport starts an operation and
// releases each one's memory when MPI has completed it; MpiRuntime finalises it just before
// MPI_Finalize and frees the memory only after MPI_Finalize has returned.
#include "transport/mpi/mpi_work.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>

#include "frugal/backoff.h"

namespace frugal::mpi_internal {
namespace {

constexpr auto kYieldTime = std::chrono::milliseconds(5);
constexpr auto kOversubscribedSpin = std::chrono::microseconds(50);
constexpr auto kOversubscribedYield = std::chrono::microseconds(500);
constexpr auto kMaxSleep = std::chrono::microseconds(500);
constexpr size_t kLargeBlockBytes = size_t{1} << 30;
// The pool keeps at most this many idle bytes, and at most kPerClass buffers of one capacity.
constexpr size_t kMaxCachedBytes = size_t{256} << 20;
constexpr size_t kPerClass = 1024;
constexpr size_t kPageBytes = 4096;

std::string MpiErrorString(int error) {
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int length = 0;
  if (MPI_Error_string(error, text.data(), &length) != MPI_SUCCESS) {
    return fmt::format("MPI error {}", error);
  }
  return std::string(text.data(), static_cast<size_t>(length));
}

bool MpiFinalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

}  // namespace

// Open MPI 4.1 has no error class for a failed process: when a rank dies, mpirun ends the job
// (or, with --enable-recovery, the survivors' operations with it stay pending and time out), so
// no MPI error means kPeerLost here.
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
    case MPI_ERR_OP:
    case MPI_ERR_ROOT:
      return InvalidArgumentError(std::move(message));
    case MPI_ERR_INTERN:
    case MPI_ERR_NO_MEM:
      return InternalError(std::move(message));
    default:
      return IoError(std::move(message));
  }
}

WaitPolicy WaitPolicyFor(int ranks, int cores, int own_cores) {
  if ((cores > 0 && 2 * ranks > cores) || own_cores == 1) {
    return WaitPolicy{kOversubscribedSpin, kOversubscribedYield};
  }
  return WaitPolicy{kYieldTime, kYieldTime};
}

void BackOff(const WaitPolicy& policy, Clock::duration waited) {
  frugal::BackOff(BackOffPolicy{policy.spin, policy.yield, kMaxSleep}, waited);
}

// ---- StagingPool ----

// Frees a buffer of a pool: a mappable pool's through its blocks, a plain one's with delete[].
void FreeBuffer(MappableBlocks* blocks, std::byte* data) {
  if (blocks != nullptr) {
    blocks->Free(data);
  } else {
    delete[] data;
  }
}

struct StagingDeleter {
  std::weak_ptr<StagingPool> pool;
  int size_class;                          // -1: not pooled
  std::shared_ptr<MappableBlocks> blocks;  // of a mappable pool (they outlive it)
  void operator()(std::byte* data) const {
    if (size_class >= 0) {
      if (std::shared_ptr<StagingPool> alive = pool.lock()) {
        alive->Release(data, size_class);
        return;
      }
    }
    FreeBuffer(blocks.get(), data);
  }
};

StagingPool::StagingPool(bool mappable)
    : blocks_(mappable ? std::make_shared<MappableBlocks>() : nullptr) {}

std::byte* StagingPool::Allocate(size_t capacity) {
  if (!blocks_) return new std::byte[capacity];
  return blocks_->Allocate(capacity).data;
}

void StagingPool::Free(std::byte* data) { FreeBuffer(blocks_.get(), data); }

std::shared_ptr<std::byte> StagingPool::Acquire(size_t bytes) {
  // A mappable buffer is at least a page (a memfd maps whole pages).
  const size_t least = blocks_ ? std::max<size_t>(bytes, kPageBytes) : std::max<size_t>(bytes, 1);
  const int size_class = static_cast<int>(std::bit_width(least - 1));
  if (size_class >= kClasses) {
    const size_t capacity = blocks_ ? (least + kPageBytes - 1) / kPageBytes * kPageBytes : least;
    return std::shared_ptr<std::byte>(Allocate(capacity), StagingDeleter{{}, -1, blocks_});
  }
  std::byte* data = nullptr;
  {
    std::lock_guard lock(mu_);
    auto& free = free_[static_cast<size_t>(size_class)];
    if (!free.empty()) {
      data = free.back();
      free.pop_back();
      cached_bytes_ -= size_t{1} << size_class;
    }
  }
  if (data == nullptr) data = Allocate(size_t{1} << size_class);
  return std::shared_ptr<std::byte>(data, StagingDeleter{weak_from_this(), size_class, blocks_});
}

void StagingPool::Release(std::byte* data, int size_class) {
  const size_t capacity = size_t{1} << size_class;
  {
    std::lock_guard lock(mu_);
    auto& free = free_[static_cast<size_t>(size_class)];
    if (free.size() < kPerClass && cached_bytes_ + capacity <= kMaxCachedBytes) {
      free.push_back(data);
      cached_bytes_ += capacity;
      return;
    }
  }
  Free(data);
}

size_t StagingPool::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cached_bytes_;
}

std::optional<PeerRegion> StagingPool::RegionOf(std::span<const std::byte> bytes) const {
  if (!blocks_) return std::nullopt;
  return blocks_->RegionOf(bytes);
}

StagingPool::~StagingPool() {
  for (auto& free : free_) {
    for (std::byte* data : free) Free(data);
  }
}

// ---- AbandonedRequests ----

AbandonedRequests::~AbandonedRequests() = default;

void AbandonedRequests::Add(MPI_Request request, bool cancel, Memory memory) {
  if (request == MPI_REQUEST_NULL || MpiFinalized()) return;
  if (cancel) MPI_Cancel(&request);
  std::lock_guard lock(mu_);
  entries_.push_back(Entry{request, std::move(memory)});
}

size_t AbandonedRequests::Reap() {
  std::lock_guard lock(mu_);
  if (entries_.empty() || MpiFinalized()) return entries_.size();
  std::erase_if(entries_, [](Entry& e) {
    int flag = 0;
    const int rc = MPI_Test(&e.request, &flag, MPI_STATUS_IGNORE);
    return rc != MPI_SUCCESS || flag != 0;
  });
  return entries_.size();
}

void AbandonedRequests::Finalize(Duration grace) {
  const auto start = Clock::now();
  while (Reap() > 0 && Clock::now() - start < grace) sched_yield();
  std::lock_guard lock(mu_);
  for (Entry& e : entries_) {
    if (!MpiFinalized()) MPI_Request_free(&e.request);
    after_finalize_.push_back(std::move(e.memory));
  }
  entries_.clear();
}

// ---- Byte types ----

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

Status TooLargeForBuffer(std::string_view what, size_t capacity) {
  return MalformedError(
      fmt::format("{}: the message is larger than the receive buffer of {} bytes", what, capacity));
}

// ---- MpiWork ----

MpiWork::MpiWork(Status status, int peer) : done_(true), status_(std::move(status)), peer_(peer) {}

MpiWork::MpiWork(Started started, WaitPolicy policy, std::shared_ptr<AbandonedRequests> abandoned)
    : op_(std::move(started)),
      policy_(policy),
      abandoned_(std::move(abandoned)),
      peer_(op_.peer),
      bytes_(op_.is_recv ? 0 : op_.bytes) {
  FRUGAL_INTERNAL_ASSERT(abandoned_ != nullptr, "an MPI Work without the runtime's keeper");
  if (op_.is_recv && op_.peer_copy) op_.peer_copy->Register(this);
}

MpiWork::~MpiWork() {
  if (!done_) Abandon();
  Finish();
}

Status MpiWork::Wait(Duration timeout) {
  const auto start = Clock::now();
  while (true) {
    if (IsCompleted()) return status_;
    const auto waited = Clock::now() - start;
    if (waited >= timeout) break;
    BackOff(policy_, waited);
  }
  Abandon();
  done_ = true;
  if (op_.timeout_message) {
    status_ = TimeoutError(op_.timeout_message(timeout));
  } else if (op_.is_recv) {
    status_ = TimeoutError(fmt::format("no message from {} within {} ms (tag {})", op_.peer_name,
                                       timeout.count(), op_.tag));
  } else {
    status_ = TimeoutError(fmt::format("{} did not take a message within {} ms (tag {})",
                                       op_.peer_name, timeout.count(), op_.tag));
  }
  Finish();
  return status_;
}

bool MpiWork::IsCompleted() {
  if (done_) return true;
  if (op_.stashed) {
    done_ = true;
    Received(op_.stashed->source, Descriptor::kBytes);
    Finish();
    return true;
  }
  int flag = 0;
  MPI_Status status;
  int rc = MPI_Test(&op_.request, &flag, &status);
  if (rc != MPI_SUCCESS) {
    // The request is complete (and freed by MPI) with an error.
    op_.request = MPI_REQUEST_NULL;
    done_ = true;
    int error_class = MPI_ERR_OTHER;
    MPI_Error_class(rc, &error_class);
    if (op_.is_recv && error_class == MPI_ERR_TRUNCATE) {
      status_ = TooLargeForBuffer(What(), op_.capacity);
    } else {
      status_ = MpiError(rc, What());
    }
    Finish();
    return true;
  }
  if (flag && op_.ack != MPI_REQUEST_NULL) {
    // A descriptor went out: the send completes when its receiver has copied the region.
    op_.request = MPI_REQUEST_NULL;
    rc = MPI_Test(&op_.ack, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      op_.ack = MPI_REQUEST_NULL;
      done_ = true;
      status_ = MpiError(rc, What());
      Finish();
      return true;
    }
  }
  if (!flag) {
    if (op_.peer_copy) op_.peer_copy->Progress();
    return false;
  }
  op_.request = MPI_REQUEST_NULL;
  done_ = true;
  if (op_.is_recv) Received(status.MPI_SOURCE, ElementsOf(status, op_.type.type));
  Finish();
  return true;
}

void MpiWork::Received(int source, size_t received) {
  peer_ = source;
  bytes_ = received;
  if (op_.peer_copy && received == Descriptor::kBytes) {
    std::array<std::byte, Descriptor::kBytes> message{};
    if (op_.stashed) {
      message = op_.stashed->message;
    } else {
      std::memcpy(message.data(), op_.landing.data(), message.size());
    }
    const std::span<std::byte> into = op_.deliver_to.empty() ? op_.landing : op_.deliver_to;
    status_ = op_.peer_copy->Deliver(source, message, into, &bytes_, What());
    return;
  }
  const size_t n = std::min({bytes_, op_.deliver_to.size(), op_.landing.size()});
  if (n > 0) std::memcpy(op_.deliver_to.data(), op_.landing.data(), n);
}

void MpiWork::Finish() {
  if (op_.peer_copy) {
    if (op_.is_recv) op_.peer_copy->Unregister(this);
    op_.peer_copy.reset();
  }
  op_.stashed.reset();
  op_.memory.reset();
  op_.landing = {};
  op_.deliver_to = {};
  if (op_.type.derived && !MpiFinalized()) MPI_Type_free(&op_.type.type);
  op_.type = ByteType{};
}

std::string MpiWork::What() const {
  if (!op_.what.empty()) return op_.what;
  return fmt::format("{} {} (tag {})", op_.is_recv ? "receive from" : "send to", op_.peer_name,
                     op_.tag);
}

void MpiWork::Abandon() {
  if (op_.is_recv && op_.peer_copy) {
    // A descriptor that arrived for a receive given up is acknowledged unread, so that its
    // sender completes; the caller's buffer is not written.
    std::optional<PeerCopy::Stashed> arrived = std::move(op_.stashed);
    int flag = 0;
    MPI_Status status;
    if (!arrived && op_.request != MPI_REQUEST_NULL &&
        MPI_Test(&op_.request, &flag, &status) == MPI_SUCCESS && flag &&
        ElementsOf(status, op_.type.type) == Descriptor::kBytes) {
      arrived.emplace();
      arrived->source = status.MPI_SOURCE;
      std::memcpy(arrived->message.data(), op_.landing.data(), Descriptor::kBytes);
    }
    if (flag) op_.request = MPI_REQUEST_NULL;
    if (arrived) op_.peer_copy->Discard(*arrived);
  }
  if (op_.request != MPI_REQUEST_NULL && op_.ack != MPI_REQUEST_NULL) {
    // A descriptor's send: small, so usually complete already.
    int flag = 0;
    if (MPI_Test(&op_.request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag) {
      op_.request = MPI_REQUEST_NULL;
    }
  }
  if (op_.request != MPI_REQUEST_NULL) abandoned_->Add(op_.request, op_.is_recv, op_.memory);
  // Until the acknowledgement comes, the receiver may still be copying from the memory.
  if (op_.ack != MPI_REQUEST_NULL) abandoned_->Add(op_.ack, /*cancel=*/false, op_.memory);
  op_.request = MPI_REQUEST_NULL;
  op_.ack = MPI_REQUEST_NULL;
  op_.memory.reset();
}

}  // namespace frugal::mpi_internal
