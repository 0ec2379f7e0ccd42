// The communication engine: a background thread per rank that negotiates, fuses, schedules and
// reduces the tensors other threads submit.
//
// Submission: Submit() and Call() append an Item to `incoming_` (under `mutex_`) and wake the
// engine thread. The engine thread moves tensor items into `pending_` (a FIFO per name; the head
// of each is what this rank offers) until it meets a Call, which runs once nothing of this rank
// is pending, queued or in a session; items behind a Call wait for it.
//
// Sessions and cycles: while this rank has pending tensors (or agreed work is queued, or the last
// cycle showed tensors pending on some rank) the engine is "in session" and runs negotiation
// cycles, at most one per cycle_time while nothing is executable. RunCycle builds this rank's
// CycleMessage (a bit per cached tensor whose head is pending with the cached description, a
// descriptor otherwise, the waiting flag, rank 0's merge plan once), exchanges it all to all
// with tag kNegotiationTag (Exchange: ISend to every peer, then IProbe/IRecv from each until all
// have answered, inspecting stalls meanwhile and bounded by options.timeout), and evaluates the
// messages with EvaluateCycle. Every rank sees the same messages, so every rank derives the same
// agreed tensors, failures, plan and end of session; a rank without pending tensors does not
// start a session and its peers wait for it in Exchange until it submits.
//
// Agreed tensors become Units (one per tensor, or one per partition of partition_bytes under
// kPriority) in `queue_`, ordered by agreement (kFifo) or by (priority, agreement, partition)
// (kPriority). Execute() then forms buckets from the queue, the same on every rank:
//   kFifo, kOff     one bucket per unit, in queue order;
//   kFifo, kCycle   consecutive units packed up to fusion_threshold_bytes (Horovod's fusion);
//   kFifo, kMgWfbp  before the plan: as kOff; with the plan: a group's units are held until every
//                   member is queued and then reduced as one bucket; units outside the plan alone;
//   kPriority       the front of the queue packed up to partition_bytes, ONE bucket, then back to
//                   negotiation, so that a tensor agreed meanwhile with a lower priority value
//                   overtakes the partitions still queued (P3 / ByteScheduler preemption).
// ReduceBucket reduces a single unit in place in the caller's buffer, and several units through
// the fusion buffer (copied in, reduced, copied out); a tensor's Work completes when all its
// units are reduced.
//
// Unmatched names: when every rank waits (a thread blocked on a tensor the rank has reported),
// nothing was agreed, nothing is executable and tensors are pending on some ranks only, no rank
// can make progress: held MG-WFBP units are flushed on their own if there are any, otherwise every
// pending tensor fails on every rank with UnmatchedMessage.
//
// Stall inspector: while waiting in Exchange, each head pending here longer than stall_warning
// and missing on some rank (according to each rank's latest message) is reported once, by the
// lowest rank that submitted it; after stall_shutdown the engine sends a shutdown message to its
// peers (they fail when they read it) and fails every pending tensor with kTimeout.
//
// MG-WFBP plan: every completed tensor records its local submission time per generation (its
// n-th submission). Once every cached tensor completed mgwfbp_warmup_steps + mgwfbp_profile_steps
// generations, rank 0 averages, over the profiled generations, each tensor's ready time relative
// to the first tensor of the generation, fits alpha and beta by least squares on the
// (bytes, seconds) of the single-tensor reductions it made (or takes options.reduction_cost),
// runs PlanMerges, and sends the plan in its next message; all ranks adopt it in that cycle.
//
// Accounting: comm_seconds adds the reducer calls; exposed_seconds is their overlap with the
// intervals in which at least one thread waited in EngineWork::Wait on a tensor.
#include "frugal/engine.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "engine/merge_plan.h"
#include "engine/negotiation.h"
#include "frugal/collectives.h"
#include "frugal/engine_phases.h"
#include "frugal/random.h"
#include "frugal/timer.h"

namespace frugal {

using engine_internal::CycleMessage;
using engine_internal::CycleOutcome;
using engine_internal::TensorCache;
using engine_internal::TensorDescriptor;

namespace {

constexpr int kNegotiationTag = kEngineTags[0];
constexpr int kAbortTag = kEngineTags[1];
constexpr auto kStallCheckPeriod = std::chrono::milliseconds(100);
// A failed engine's notice to its peers: sent to all at once, waited for at most this long.
constexpr Duration kAbortSendBound = std::chrono::milliseconds(200);

struct Interval {
  Clock::time_point begin;
  Clock::time_point end;
};

// Sum of the lengths of the intersections of two sorted lists of disjoint intervals.
double OverlapSeconds(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  double total = 0;
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const auto begin = std::max(a[i].begin, b[j].begin);
    const auto end = std::min(a[i].end, b[j].end);
    if (end > begin) total += std::chrono::duration<double>(end - begin).count();
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

// State shared by the engine and the Work handles it made (which may outlive it).
struct WaitBook {
  std::mutex mutex;
  int waiting = 0;  // threads in Wait on a tensor that is not done
  Clock::time_point since;
  std::vector<Interval> intervals;  // merged, sorted

  void Begin() {
    std::lock_guard<std::mutex> lock(mutex);
    if (waiting++ == 0) since = Clock::now();
  }
  void End() {
    std::lock_guard<std::mutex> lock(mutex);
    if (--waiting == 0) intervals.push_back({since, Clock::now()});
  }
  std::vector<Interval> Snapshot() {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<Interval> copy = intervals;
    if (waiting > 0) copy.push_back({since, Clock::now()});
    return copy;
  }
};

struct WorkState {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  Status status;
  std::atomic<int> waiters{0};

  void Complete(Status s) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (done) return;
      done = true;
      status = std::move(s);
    }
    cv.notify_all();
  }
  bool IsDone() {
    std::lock_guard<std::mutex> lock(mutex);
    return done;
  }
};

class EngineWork final : public Work {
 public:
  EngineWork(std::shared_ptr<WorkState> state, std::shared_ptr<WaitBook> book, std::string what,
             size_t bytes)
      : state_(std::move(state)), book_(std::move(book)), what_(std::move(what)), bytes_(bytes) {}

  Status Wait(Duration timeout) override {
    std::unique_lock<std::mutex> lock(state_->mutex);
    if (state_->done) return state_->status;
    state_->waiters.fetch_add(1);
    if (book_) book_->Begin();
    const bool done = state_->cv.wait_for(lock, timeout, [&] { return state_->done; });
    state_->waiters.fetch_sub(1);
    if (book_) book_->End();
    if (!done) {
      return TimeoutError(
          fmt::format("engine: {} not completed within {} ms", what_, timeout.count()));
    }
    return state_->status;
  }
  bool IsCompleted() override { return state_->IsDone(); }
  int peer() const override { return -1; }
  size_t bytes() const override { return bytes_; }

 private:
  std::shared_ptr<WorkState> state_;
  std::shared_ptr<WaitBook> book_;
  std::string what_;
  size_t bytes_;
};

uint64_t OptionsFingerprint(const EngineOptions& o) {
  const std::string text = fmt::format(
      "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", static_cast<int>(o.fusion), o.fusion_threshold_bytes,
      static_cast<int>(o.schedule), o.partition_bytes, o.cycle_time.count(), o.mgwfbp_warmup_steps,
      o.mgwfbp_profile_steps, o.reduction_cost ? o.reduction_cost->alpha : -1.0,
      o.reduction_cost ? o.reduction_cost->beta : -1.0, o.detect_unmatched);
  return TensorId(text);
}

}  // namespace

std::string_view OverlapModeName(OverlapMode mode) {
  switch (mode) {
    case OverlapMode::kNone:
      return "none";
    case OverlapMode::kWfbp:
      return "wfbp";
    case OverlapMode::kFusion:
      return "fusion";
    case OverlapMode::kPriority:
      return "priority";
  }
  return "?";
}

StatusOr<OverlapMode> ParseOverlapMode(std::string_view name) {
  for (OverlapMode mode :
       {OverlapMode::kNone, OverlapMode::kWfbp, OverlapMode::kFusion, OverlapMode::kPriority}) {
    if (name == OverlapModeName(mode)) return mode;
  }
  return InvalidArgumentError(
      fmt::format("unknown overlap mode '{}' (known: none, wfbp, fusion, priority)", name));
}

std::string_view FusionPolicyName(FusionPolicy policy) {
  switch (policy) {
    case FusionPolicy::kOff:
      return "off";
    case FusionPolicy::kCycle:
      return "cycle";
    case FusionPolicy::kMgWfbp:
      return "mgwfbp";
  }
  return "?";
}

StatusOr<FusionPolicy> ParseFusionPolicy(std::string_view name) {
  for (FusionPolicy policy : {FusionPolicy::kOff, FusionPolicy::kCycle, FusionPolicy::kMgWfbp}) {
    if (name == FusionPolicyName(policy)) return policy;
  }
  return InvalidArgumentError(
      fmt::format("unknown fusion policy '{}' (known: off, cycle, mgwfbp)", name));
}

void ApplyOverlapMode(OverlapMode mode, EngineOptions& options, FusionPolicy fusion) {
  switch (mode) {
    case OverlapMode::kNone:
    case OverlapMode::kWfbp:
      options.fusion = FusionPolicy::kOff;
      options.schedule = SchedulePolicy::kFifo;
      break;
    case OverlapMode::kFusion:
      options.fusion = fusion;
      options.schedule = SchedulePolicy::kFifo;
      break;
    case OverlapMode::kPriority:
      options.fusion = FusionPolicy::kOff;
      options.schedule = SchedulePolicy::kPriority;
      break;
  }
}

std::string StallReport::ToString() const {
  return fmt::format("tensor '{}' submitted by {} {} but not by {} {} for {:.1f} s", tensor,
                     submitted.size() == 1 ? "rank" : "ranks",
                     engine_internal::JoinRanks(submitted), missing.size() == 1 ? "rank" : "ranks",
                     engine_internal::JoinRanks(missing), seconds);
}

double EngineStats::hidden_fraction() const {
  if (comm_seconds <= 0) return 0;
  return std::clamp(1.0 - exposed_seconds / comm_seconds, 0.0, 1.0);
}

class Engine::Impl {
 public:
  Impl(Transport& t, GradientReducer& reducer, EngineOptions options)
      : t_(t),
        reducer_(reducer),
        options_(std::move(options)),
        rank_(t.rank()),
        size_(t.size()),
        book_(std::make_shared<WaitBook>()),
        reported_(static_cast<size_t>(t.size())) {}

  ~Impl() { (void)Shutdown(); }

  void StartThread() {
    thread_ = std::thread([this] { Loop(); });
  }

  std::unique_ptr<Work> Submit(TensorRequest request, std::span<float> data) {
    FRUGAL_CHECK(!request.name.empty(), "a tensor needs a name");
    if (request.shape.empty()) request.shape = {static_cast<int64_t>(data.size())};
    size_t product = 1;
    for (int64_t d : request.shape) {
      FRUGAL_CHECK_GE(d, int64_t{0}, "shape of tensor '", request.name, "'");
      product *= static_cast<size_t>(d);
    }
    FRUGAL_CHECK_EQ(product, data.size(), "elements of tensor '", request.name,
                    "': product of its shape vs. the buffer's length");
    auto entry = std::make_unique<Entry>();
    entry->descriptor = TensorDescriptor{request.name, request.shape, request.dtype,
                                         static_cast<int32_t>(request.priority)};
    entry->data = data;
    entry->step = request.step;
    entry->work = std::make_shared<WorkState>();
    auto work = std::make_unique<EngineWork>(entry->work, book_, "tensor '" + request.name + "'",
                                             data.size_bytes());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closed_) {
        entry->work->Complete(closed_status_);
        return work;
      }
      entry->submitted = Clock::now();
      entry->seq = next_seq_++;
      Item item;
      item.tensor = std::move(entry);
      incoming_.push_back(std::move(item));
    }
    cv_.notify_all();
    return work;
  }

  std::unique_ptr<Work> Call(std::string name, std::function<Status(Transport&)> fn) {
    auto state = std::make_shared<WorkState>();
    auto work = std::make_unique<EngineWork>(state, nullptr, "call '" + name + "'", 0);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closed_) {
        state->Complete(closed_status_);
        return work;
      }
      Item item;
      item.call_name = std::move(name);
      item.call = std::move(fn);
      item.call_work = state;
      item.submitted = Clock::now();
      incoming_.push_back(std::move(item));
    }
    cv_.notify_all();
    return work;
  }

  Status Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    CloseAndFailAll(CancelledError("the engine was shut down before this completed"));
    if (!logged_stats_ && options_.logger.Enabled(LogLevel::kInfo)) {
      logged_stats_ = true;
      const EngineStats s = stats();
      options_.logger.Info(fmt::format(
          "engine: {} cycles ({:.3f} s, {} bytes), {} reductions of {} tensors ({} bytes) in "
          "{:.3f} s, {:.3f} s of it waited for",
          s.cycles, s.negotiate_seconds, s.negotiation_bytes, s.reductions, s.tensors,
          s.bytes_reduced, s.comm_seconds, s.exposed_seconds));
      if (s.reduction_cost) {
        std::vector<std::string> groups;
        for (const auto& g : s.merge_plan) groups.push_back(fmt::format("[{}]", fmt::join(g, " ")));
        options_.logger.Info(fmt::format("engine: MG-WFBP alpha {:.3g} s, beta {:.3g} s/B, plan {}",
                                         s.reduction_cost->alpha, s.reduction_cost->beta,
                                         fmt::join(groups, " ")));
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }

  EngineStats stats() const {
    EngineStats s;
    std::vector<Interval> comm;
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      s = stats_;
      comm = comm_intervals_;
    }
    s.exposed_seconds = OverlapSeconds(comm, book_->Snapshot());
    return s;
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  const EngineOptions& options() const { return options_; }

 private:
  struct Entry {
    TensorDescriptor descriptor;
    std::span<float> data;
    uint64_t step = 0;
    std::shared_ptr<WorkState> work;
    Clock::time_point submitted;
    Clock::time_point offered;  // first included in a cycle message
    Clock::time_point agreed;
    bool is_offered = false;
    bool stall_warned = false;
    uint64_t seq = 0;  // submission order on this rank
    uint32_t id = 0;
    size_t units_left = 0;
  };

  struct Item {
    std::unique_ptr<Entry> tensor;  // or a call:
    std::string call_name;
    std::function<Status(Transport&)> call;
    std::shared_ptr<WorkState> call_work;
    Clock::time_point submitted;
  };

  struct Unit {
    Entry* entry = nullptr;
    size_t offset = 0;
    size_t count = 0;
    int part = 0;
    int parts = 1;
    uint64_t order = 0;  // agreement order, the same on every rank
    bool held = false;   // waiting for the rest of its MG-WFBP group

    std::string Name() const {
      return parts == 1 ? entry->descriptor.name
                        : fmt::format("{}#{}/{}", entry->descriptor.name, part, parts);
    }
  };

  // ---- the engine thread ----

  // The thread's body: no exception leaves it. One that escapes the loop (a compressor's failed
  // check, bad_alloc, a throwing stall callback) fails the engine like an error Status: a failed
  // FRUGAL_CHECK is kInvalidArgument (bad input reached a layer below), anything else kInternal.
  void Loop() {
    pthread_setname_np(pthread_self(), "frugal-engine");
    if (options_.thread_nice != 0 &&
        setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), options_.thread_nice) != 0) {
      options_.logger.Warning(fmt::format("engine: cannot set the thread's nice value to {}: {}",
                                          options_.thread_nice, std::strerror(errno)));
    }
    Status failure;
    try {
      Run();
      return;
    } catch (const CheckError& e) {
      failure = InvalidArgumentError(fmt::format("engine thread: {}", e.what()));
    } catch (const std::exception& e) {
      failure = InternalError(fmt::format("engine thread: {}", e.what()));
    } catch (...) {
      failure = InternalError("engine thread: an exception of unknown type");
    }
    Fail(std::move(failure));
  }

  void Run() {
    while (true) {
      Item call;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (stop_) break;
        TakeIncomingLocked();
        if (!in_session_ && pending_.empty() && queue_.empty()) {
          if (!incoming_.empty()) {  // a Call is at the head
            call = std::move(incoming_.front());
            incoming_.pop_front();
          } else {
            cv_.wait(lock, [&] { return stop_ || !incoming_.empty(); });
            continue;
          }
        }
      }
      if (call.call) {
        RunCall(std::move(call));
        continue;
      }
      if (!in_session_) {
        // As Horovod's loop: gather for one cycle time before the first negotiation, so that
        // gradients produced together are agreed (and fused) together.
        in_session_ = true;
        last_cycle_ = Clock::now();
      }
      if (!HasExecutable()) {
        if (!SleepUntil(last_cycle_ + options_.cycle_time)) break;
      }
      Status status = RunCycle();
      if (status.ok()) status = Execute();
      if (!status.ok()) {
        Fail(std::move(status));
        break;
      }
      in_session_ = global_pending_ || !queue_.empty();
    }
  }

  // Moves tensor items up to the first Call from incoming_ into pending_. Caller holds mutex_.
  void TakeIncomingLocked() {
    while (!incoming_.empty() && incoming_.front().tensor) {
      std::unique_ptr<Entry> entry = std::move(incoming_.front().tensor);
      incoming_.pop_front();
      pending_[entry->descriptor.name].push_back(std::move(entry));
    }
  }

  // Sleeps until `when` or a stop; false on stop.
  bool SleepUntil(Clock::time_point when) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_until(lock, when, [&] { return stop_; });
    return !stop_;
  }

  bool StopRequested() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stop_;
  }

  void RunCall(Item item) {
    const auto begin = Clock::now();
    Status status;
    try {
      status = item.call(t_);
    } catch (const std::exception& e) {
      status = InternalError(fmt::format("call '{}' threw: {}", item.call_name, e.what()));
    }
    if (options_.timeline) {
      options_.timeline->Span("engine", item.call_name, begin, Clock::now());
    }
    item.call_work->Complete(status);
  }

  bool AnyWaiterLocked() const {
    for (const auto& [name, entries] : pending_) {
      for (const auto& entry : entries) {
        if (entry->work->waiters.load() > 0) return true;
      }
    }
    for (const auto& [serial, entry] : active_) {
      if (entry->work->waiters.load() > 0) return true;
    }
    return false;
  }

  Status RunCycle() {
    const auto begin = Clock::now();
    last_cycle_ = begin;
    CycleMessage mine;
    mine.cycle = cycle_;
    mine.cache_size = cache_.size();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      TakeIncomingLocked();
      // Heads in submission order, so that new tensors enter the cache (and FIFO order) in the
      // order this rank produced them.
      std::vector<Entry*> heads;
      for (auto& [name, entries] : pending_) heads.push_back(entries.front().get());
      std::sort(heads.begin(), heads.end(),
                [](const Entry* a, const Entry* b) { return a->seq < b->seq; });
      for (Entry* entry : heads) {
        Entry& head = *entry;
        const std::string& name = head.descriptor.name;
        if (!head.is_offered) {
          head.is_offered = true;
          head.offered = begin;
        }
        const std::optional<uint32_t> id = cache_.Find(name);
        if (id && cache_.at(*id) == head.descriptor) {
          mine.SetBit(*id);
        } else {
          mine.descriptors.push_back(head.descriptor);
        }
      }
      mine.waiting = AnyWaiterLocked();
    }
    if (plan_to_send_) {
      mine.plan = std::move(plan_to_send_);
      plan_to_send_.reset();
    }
    std::vector<CycleMessage> all;
    FRUGAL_RETURN_IF_ERROR(Exchange(mine, all));
    ++cycle_;
    FRUGAL_ASSIGN_OR_RETURN(CycleOutcome outcome, engine_internal::EvaluateCycle(cache_, all));
    const auto evaluated = Clock::now();
    if (outcome.plan && plan_.empty()) AdoptPlan(*outcome.plan);

    for (const auto& [id, message] : outcome.mismatched) {
      std::unique_ptr<Entry> entry = PopHead(cache_.at(id).name);
      if (entry) entry->work->Complete(InvalidArgumentError(message));
    }
    for (uint32_t id : outcome.agreed) {
      std::unique_ptr<Entry> entry = PopHead(cache_.at(id).name);
      if (!entry) {
        return InternalError(fmt::format("negotiation agreed on '{}', which is not pending here",
                                         cache_.at(id).name));
      }
      entry->id = id;
      entry->agreed = evaluated;
      if (options_.timeline) {
        const std::string row = "tensor " + entry->descriptor.name;
        options_.timeline->Span(row, "queue", entry->submitted, entry->offered);
        options_.timeline->Span(row, "negotiate", entry->offered, evaluated);
      }
      Enqueue(std::move(entry));
    }
    global_pending_ = !outcome.partial.empty();
    stuck_ = options_.detect_unmatched && outcome.all_waiting && outcome.agreed.empty() &&
             outcome.mismatched.empty() && !HasExecutable();
    if (stuck_ && !HasHeld() && !outcome.partial.empty()) {
      const std::string message = engine_internal::UnmatchedMessage(cache_, outcome.partial, size_);
      for (const auto& [id, ranks] : outcome.partial) {
        if (std::find(ranks.begin(), ranks.end(), rank_) == ranks.end()) continue;
        std::unique_ptr<Entry> entry = PopHead(cache_.at(id).name);
        if (entry) entry->work->Complete(InvalidArgumentError(message));
      }
      global_pending_ = false;
    }
    const auto end = Clock::now();
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      ++stats_.cycles;
      stats_.negotiate_seconds += std::chrono::duration<double>(end - begin).count();
    }
    if (options_.timeline && (!outcome.agreed.empty() || end - begin > options_.cycle_time)) {
      options_.timeline->Span(
          "engine", "negotiate", begin, end,
          fmt::format(R"({{"cycle":{},"agreed":{}}})", cycle_ - 1, outcome.agreed.size()));
    }
    if (rank_ == 0) MaybePlan();
    return Status::Ok();
  }

  std::unique_ptr<Entry> PopHead(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(name);
    if (it == pending_.end() || it->second.empty()) return nullptr;
    std::unique_ptr<Entry> entry = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) pending_.erase(it);
    return entry;
  }

  // All-to-all exchange of this cycle's messages, with stall inspection while waiting.
  Status Exchange(const CycleMessage& mine, std::vector<CycleMessage>& all) {
    all.assign(static_cast<size_t>(size_), CycleMessage());
    all[static_cast<size_t>(rank_)] = mine;
    reported_[static_cast<size_t>(rank_)] = ReportedNames(mine);
    if (size_ == 1) return Status::Ok();
    out_message_ = engine_internal::EncodeCycleMessage(mine);
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      stats_.negotiation_bytes += out_message_.size() * static_cast<uint64_t>(size_ - 1);
    }
    std::vector<std::unique_ptr<Work>> sends;
    for (int p = 0; p < size_; ++p) {
      if (p != rank_) sends.push_back(t_.ISend(p, kNegotiationTag, out_message_));
    }
    std::vector<bool> got(static_cast<size_t>(size_), false);
    got[static_cast<size_t>(rank_)] = true;
    int missing = size_ - 1;
    const auto start = Clock::now();
    auto last_inspection = start;
    std::vector<std::byte> buffer;
    while (missing > 0) {
      FRUGAL_RETURN_IF_ERROR(PollAbort());
      bool progress = false;
      for (int p = 0; p < size_; ++p) {
        if (got[static_cast<size_t>(p)]) continue;
        StatusOr<std::optional<ProbeResult>> found = t_.IProbe(p, kNegotiationTag);
        if (!found.ok()) return found.status().Annotate("negotiation");
        const std::optional<ProbeResult>& probe = *found;
        if (!probe) continue;
        buffer.resize(probe->bytes);
        std::unique_ptr<Work> recv = t_.IRecv(p, kNegotiationTag, buffer);
        FRUGAL_RETURN_IF_ERROR(recv->Wait(options_.timeout).Annotate("negotiation"));
        StatusOr<CycleMessage> message =
            engine_internal::DecodeCycleMessage(std::span(buffer.data(), recv->bytes()));
        if (!message.ok()) return message.status().Annotate(fmt::format("from rank {}", p));
        if (message->cycle != mine.cycle) {
          return MalformedError(fmt::format(
              "negotiation: rank {} sent a message of cycle {}, this rank is in cycle {}", p,
              message->cycle, mine.cycle));
        }
        reported_[static_cast<size_t>(p)] = ReportedNames(*message);
        all[static_cast<size_t>(p)] = std::move(*message);
        got[static_cast<size_t>(p)] = true;
        --missing;
        progress = true;
      }
      if (missing == 0) break;
      if (progress) continue;
      const auto now = Clock::now();
      if (StopRequested()) return CancelledError("the engine was shut down");
      if (now - last_inspection >= kStallCheckPeriod) {
        last_inspection = now;
        FRUGAL_RETURN_IF_ERROR(InspectStalls(now));
      }
      if (now - start >= options_.timeout) {
        std::vector<int> silent;
        for (int p = 0; p < size_; ++p) {
          if (!got[static_cast<size_t>(p)]) silent.push_back(p);
        }
        return TimeoutError(fmt::format(
            "negotiation: no answer from {} {} within {} ms while {} tensor(s) wait here ({})",
            silent.size() == 1 ? "rank" : "ranks", engine_internal::JoinRanks(silent),
            options_.timeout.count(), pending_.size(), PendingNames(4)));
      }
      BackOff(now - start);
    }
    for (auto& send : sends) {
      FRUGAL_RETURN_IF_ERROR(send->Wait(options_.timeout).Annotate("negotiation"));
    }
    return Status::Ok();
  }

  static void BackOff(Clock::duration waited) {
    if (waited < std::chrono::microseconds(50)) return;
    if (waited < std::chrono::milliseconds(1)) {
      sched_yield();
      return;
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(waited / 16, std::chrono::microseconds(500)));
  }

  std::set<std::string> ReportedNames(const CycleMessage& m) const {
    std::set<std::string> names;
    for (uint32_t id = 0; id < std::min(m.cache_size, cache_.size()); ++id) {
      if (m.Bit(id)) names.insert(cache_.at(id).name);
    }
    for (const TensorDescriptor& d : m.descriptors) names.insert(d.name);
    return names;
  }

  std::string PendingNames(size_t limit) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> names;
    for (const auto& [name, entries] : pending_) {
      if (names.size() == limit) {
        names.push_back("...");
        break;
      }
      names.push_back("'" + name + "'");
    }
    return fmt::format("{}", fmt::join(names, ", "));
  }

  Status InspectStalls(Clock::time_point now) {
    if (*options_.stall_warning <= Duration::zero() &&
        options_.stall_shutdown <= Duration::zero()) {
      return Status::Ok();
    }
    std::vector<StallReport> reports;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [name, entries] : pending_) {
        Entry& head = *entries.front();
        const auto age = now - head.submitted;
        const bool warn = *options_.stall_warning > Duration::zero() &&
                          age >= *options_.stall_warning && !head.stall_warned;
        const bool shut =
            options_.stall_shutdown > Duration::zero() && age >= options_.stall_shutdown;
        if (!warn && !shut) continue;
        StallReport report;
        report.tensor = name;
        report.seconds = std::chrono::duration<double>(age).count();
        for (int r = 0; r < size_; ++r) {
          if (r == rank_ || reported_[static_cast<size_t>(r)].count(name) > 0) {
            report.submitted.push_back(r);
          } else {
            report.missing.push_back(r);
          }
        }
        if (report.missing.empty()) continue;
        report.shutdown = shut;
        if (!shut) head.stall_warned = true;
        if (shut || report.submitted.front() == rank_) reports.push_back(std::move(report));
        if (shut) break;
      }
    }
    for (const StallReport& report : reports) {
      Report(report);
      if (report.shutdown) {
        return TimeoutError("stall inspector: " + report.ToString() + "; shutting down");
      }
    }
    return Status::Ok();
  }

  void Report(const StallReport& report) {
    if (options_.on_stall) {
      options_.on_stall(report);
    } else {
      options_.logger.Warning("stall inspector: " + report.ToString() +
                              (report.shutdown ? "; shutting down" : ""));
    }
  }

  // Best effort: tells every peer that this engine failed and why (kAbortTag). The sends start
  // together and are waited for at most kAbortSendBound in all; a peer that has gone does not
  // delay the others.
  void SendAbort(const Status& status) {
    if (size_ == 1) return;
    const auto deadline = Clock::now() + kAbortSendBound;
    abort_message_ =
        engine_internal::EncodeAbortMessage({status.code(), std::string(status.message())});
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      stats_.negotiation_bytes += abort_message_.size() * static_cast<uint64_t>(size_ - 1);
    }
    std::vector<std::unique_ptr<Work>> sends;
    for (int p = 0; p < size_; ++p) {
      if (p != rank_) sends.push_back(t_.ISend(p, kAbortTag, abort_message_));
    }
    for (auto& send : sends) {
      const auto left = std::max(Clock::duration::zero(), deadline - Clock::now());
      (void)send->Wait(std::chrono::duration_cast<Duration>(left));
    }
  }

  // A peer's abort notice, if one has arrived: its failure as this rank's (same code, the message
  // naming the peer). Malformed notices are errors of their own.
  Status PollAbort() {
    if (size_ == 1) return Status::Ok();
    StatusOr<std::optional<ProbeResult>> found = t_.IProbe(kAnySource, kAbortTag);
    if (!found.ok()) return found.status().Annotate("abort notice");
    const std::optional<ProbeResult>& probe = *found;
    if (!probe) return Status::Ok();
    std::vector<std::byte> buffer(probe->bytes);
    std::unique_ptr<Work> recv = t_.IRecv(probe->source, kAbortTag, buffer);
    FRUGAL_RETURN_IF_ERROR(recv->Wait(options_.timeout).Annotate("abort notice"));
    peer_failed_ = true;
    StatusOr<engine_internal::AbortMessage> message =
        engine_internal::DecodeAbortMessage(std::span(buffer.data(), recv->bytes()));
    if (!message.ok()) return message.status().Annotate(fmt::format("from rank {}", probe->source));
    return Status(message->code, fmt::format("rank {} failed: {}", probe->source, message->reason));
  }

  // ---- queue and execution ----

  void Enqueue(std::unique_ptr<Entry> entry) {
    Entry* e = entry.get();
    const size_t count = e->data.size();
    size_t parts = 1;
    if (options_.schedule == SchedulePolicy::kPriority && options_.partition_bytes > 0) {
      const size_t per = std::max<size_t>(1, options_.partition_bytes / sizeof(float));
      parts = std::max<size_t>(1, (count + per - 1) / per);
    }
    const size_t per = parts == 1 ? count : (count + parts - 1) / parts;
    e->units_left = parts;
    const uint64_t order = next_order_++;
    for (size_t p = 0; p < parts; ++p) {
      Unit u;
      u.entry = e;
      u.offset = p * per;
      u.count = std::min(per, count - u.offset);
      u.part = static_cast<int>(p);
      u.parts = static_cast<int>(parts);
      u.order = order;
      u.held = plan_group_.count(e->id) > 0;
      queue_.push_back(u);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      active_.emplace(reinterpret_cast<uintptr_t>(e), std::move(entry));
    }
    if (options_.schedule == SchedulePolicy::kPriority) {
      std::stable_sort(queue_.begin(), queue_.end(), [](const Unit& a, const Unit& b) {
        if (a.entry->descriptor.priority != b.entry->descriptor.priority) {
          return a.entry->descriptor.priority < b.entry->descriptor.priority;
        }
        if (a.order != b.order) return a.order < b.order;
        return a.part < b.part;
      });
    }
  }

  bool HasHeld() const {
    return std::any_of(queue_.begin(), queue_.end(), [](const Unit& u) { return u.held; });
  }

  bool HasExecutable() const {
    if (std::any_of(queue_.begin(), queue_.end(), [](const Unit& u) { return !u.held; })) {
      return true;
    }
    return ReadyGroup().has_value();
  }

  // The first plan group whose members are all queued (index into plan_).
  std::optional<size_t> ReadyGroup() const {
    if (plan_.empty()) return std::nullopt;
    std::set<uint32_t> queued;
    for (const Unit& u : queue_) {
      if (u.held) queued.insert(u.entry->id);
    }
    for (size_t g = 0; g < plan_.size(); ++g) {
      bool all = true;
      for (uint32_t id : plan_[g]) all = all && queued.count(id) > 0;
      if (all) return g;
    }
    return std::nullopt;
  }

  Status Execute() {
    if (stuck_ && HasHeld()) {
      // Some member of an MG-WFBP group will not come: reduce the held units on their own.
      for (Unit& u : queue_) u.held = false;
    }
    if (options_.schedule == SchedulePolicy::kPriority) {
      if (queue_.empty()) return Status::Ok();
      size_t take = 1;
      size_t bytes = queue_[0].count * sizeof(float);
      while (options_.partition_bytes > 0 && take < queue_.size() &&
             queue_[take].entry->step == queue_[0].entry->step &&
             bytes + queue_[take].count * sizeof(float) <= options_.partition_bytes) {
        bytes += queue_[take].count * sizeof(float);
        ++take;
      }
      std::vector<Unit> bucket(queue_.begin(), queue_.begin() + static_cast<long>(take));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<long>(take));
      return ReduceBucket(bucket);
    }
    // FIFO policies.
    while (true) {
      std::optional<size_t> group = ReadyGroup();
      if (group) {
        std::vector<Unit> members;
        for (uint32_t id : plan_[*group]) {
          auto it = std::find_if(queue_.begin(), queue_.end(),
                                 [&](const Unit& u) { return u.held && u.entry->id == id; });
          members.push_back(*it);
          queue_.erase(it);
        }
        // One bucket per step among the members, in the order of the first member of each.
        while (!members.empty()) {
          const uint64_t step = members.front().entry->step;
          std::vector<Unit> bucket;
          for (auto it = members.begin(); it != members.end();) {
            if (it->entry->step != step) {
              ++it;
              continue;
            }
            bucket.push_back(*it);
            it = members.erase(it);
          }
          FRUGAL_RETURN_IF_ERROR(ReduceBucket(bucket));
        }
        continue;
      }
      auto first =
          std::find_if(queue_.begin(), queue_.end(), [](const Unit& u) { return !u.held; });
      if (first == queue_.end()) return Status::Ok();
      std::vector<Unit> bucket{*first};
      queue_.erase(first);
      if (options_.fusion == FusionPolicy::kCycle) {
        size_t bytes = bucket[0].count * sizeof(float);
        for (auto it = queue_.begin(); it != queue_.end();) {
          if (it->held || it->entry->step != bucket[0].entry->step) {
            ++it;
            continue;
          }
          if (bytes + it->count * sizeof(float) > options_.fusion_threshold_bytes) break;
          bytes += it->count * sizeof(float);
          bucket.push_back(*it);
          it = queue_.erase(it);
        }
      }
      FRUGAL_RETURN_IF_ERROR(ReduceBucket(bucket));
    }
  }

  Status ReduceBucket(std::vector<Unit>& units) {
    BucketInfo info;
    info.id = static_cast<int>(buckets_++);
    info.step = units.front().entry->step;
    size_t total = 0;
    for (const Unit& u : units) {
      info.entries.push_back(
          BucketEntry{u.Name(), total, u.count,
                      u.parts == 1 ? u.entry->descriptor.shape : std::vector<int64_t>{}});
      total += u.count;
    }
    info.count = total;
    info.name = units.size() == 1 ? info.entries[0].name
                                  : fmt::format("fused({}..{})", info.entries.front().name,
                                                info.entries.back().name);
    std::span<float> data;
    if (units.size() == 1) {
      data = units[0].entry->data.subspan(units[0].offset, units[0].count);
    } else {
      fusion_buffer_.resize(total);
      for (size_t i = 0; i < units.size(); ++i) {
        const Unit& u = units[i];
        std::memcpy(fusion_buffer_.data() + info.entries[i].offset, u.entry->data.data() + u.offset,
                    u.count * sizeof(float));
      }
      data = std::span<float>(fusion_buffer_.data(), total);
    }
    if (options_.phases) (void)options_.phases->Drain();
    const auto begin = Clock::now();
    Status status = reducer_.Reduce(info, data);
    const auto end = Clock::now();
    if (units.size() > 1 && status.ok()) {
      for (size_t i = 0; i < units.size(); ++i) {
        const Unit& u = units[i];
        std::memcpy(u.entry->data.data() + u.offset, fusion_buffer_.data() + info.entries[i].offset,
                    u.count * sizeof(float));
      }
    }
    const double seconds = std::chrono::duration<double>(end - begin).count();
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      ++stats_.reductions;
      stats_.bytes_reduced += total * sizeof(float);
      stats_.comm_seconds += seconds;
      comm_intervals_.push_back({begin, end});
    }
    if (options_.fusion == FusionPolicy::kMgWfbp && rank_ == 0 && !plan_sent_ &&
        units.size() == 1) {
      cost_samples_bytes_.push_back(static_cast<double>(total * sizeof(float)));
      cost_samples_seconds_.push_back(seconds);
    }
    if (options_.timeline) DrawReduction(info, units, begin, end);
    if (!status.ok()) {
      // A peer that failed first (and left this reduction waiting for it) has the cause.
      FRUGAL_RETURN_IF_ERROR(PollAbort());
      return status.Annotate("engine");
    }
    for (const Unit& u : units) {
      Entry* e = u.entry;
      if (--e->units_left > 0) continue;
      RecordGeneration(*e);
      e->work->Complete(Status::Ok());
      {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        ++stats_.tensors;
      }
      std::lock_guard<std::mutex> lock(mutex_);
      active_.erase(reinterpret_cast<uintptr_t>(e));
    }
    return Status::Ok();
  }

  // The reduction's phases in the timeline: the compress and decompress phases the reducer's
  // compressors reported (on the engine row and on the row of the tensor each belongs to), and
  // "communicate" for the parts of [begin, end) outside them.
  void DrawReduction(const BucketInfo& info, const std::vector<Unit>& units,
                     Clock::time_point begin, Clock::time_point end) {
    Timeline& timeline = *options_.timeline;
    const std::string args =
        fmt::format(R"({{"bucket":{},"bytes":{},"tensors":{}}})", JsonQuote(info.name),
                    info.count * sizeof(float), units.size());
    std::vector<Phase> phases;
    if (options_.phases) phases = options_.phases->Drain();
    std::sort(phases.begin(), phases.end(),
              [](const Phase& a, const Phase& b) { return a.begin < b.begin; });
    auto row_of = [&](const std::string& tensor) -> std::string {
      for (const Unit& u : units) {
        const std::string name = u.Name();
        if (tensor.compare(0, name.size(), name) == 0) return "tensor " + u.entry->descriptor.name;
      }
      return {};
    };
    auto communicate = [&](Clock::time_point from, Clock::time_point to) {
      if (to <= from) return;
      timeline.Span("engine", "communicate", from, to, args);
      for (const Unit& u : units) {
        timeline.Span("tensor " + u.entry->descriptor.name, "communicate", from, to, args);
      }
    };
    Clock::time_point cursor = begin;
    for (const Phase& phase : phases) {
      communicate(cursor, phase.begin);
      timeline.Span("engine", phase.name, phase.begin, phase.end, args);
      const std::string row = row_of(phase.tensor);
      if (!row.empty()) timeline.Span(row, phase.name, phase.begin, phase.end, args);
      cursor = std::max(cursor, phase.end);
    }
    communicate(cursor, end);
  }

  // ---- MG-WFBP ----

  void RecordGeneration(const Entry& e) {
    if (options_.fusion != FusionPolicy::kMgWfbp || plan_sent_ || rank_ != 0) return;
    const size_t generation = generations_[e.id]++;
    auto& slot = ready_times_[generation];
    slot[e.id] = e.submitted;
  }

  void MaybePlan() {
    if (options_.fusion != FusionPolicy::kMgWfbp || !plan_.empty() || plan_sent_) return;
    const int needed = options_.mgwfbp_warmup_steps + options_.mgwfbp_profile_steps;
    if (cache_.size() == 0) return;
    for (uint32_t id = 0; id < cache_.size(); ++id) {
      if (generations_[id] < static_cast<size_t>(needed)) return;
    }
    std::map<uint32_t, double> offset_sum;
    for (int g = options_.mgwfbp_warmup_steps; g < needed; ++g) {
      const auto& slot = ready_times_[static_cast<size_t>(g)];
      Clock::time_point first = Clock::time_point::max();
      for (const auto& [id, when] : slot) first = std::min(first, when);
      for (const auto& [id, when] : slot) {
        offset_sum[id] += std::chrono::duration<double>(when - first).count();
      }
    }
    std::vector<engine_internal::PlanTensor> tensors;
    for (const auto& [id, sum] : offset_sum) {
      size_t elements = 1;
      for (int64_t d : cache_.at(id).shape) elements *= static_cast<size_t>(d);
      tensors.push_back({id, static_cast<double>(elements * sizeof(float)),
                         sum / std::max(1, options_.mgwfbp_profile_steps)});
    }
    std::stable_sort(tensors.begin(), tensors.end(),
                     [](const auto& a, const auto& b) { return a.ready < b.ready; });
    CostParams cost;
    if (options_.reduction_cost) {
      cost = *options_.reduction_cost;
    } else {
      StatusOr<LinearFit> fit = FitAlphaBeta(cost_samples_bytes_, cost_samples_seconds_);
      if (fit.ok()) {
        cost.alpha = std::max(0.0, fit->alpha);
        cost.beta = std::max(0.0, fit->beta);
      } else {
        double mean = 0;
        for (double s : cost_samples_seconds_) mean += s;
        cost.alpha = cost_samples_seconds_.empty() ? 0 : mean / cost_samples_seconds_.size();
      }
    }
    std::vector<engine_internal::MergeGroup> groups = engine_internal::PlanMerges(
        tensors, cost, static_cast<double>(options_.fusion_threshold_bytes));
    std::vector<std::vector<uint32_t>> plan;
    for (const auto& g : groups) plan.push_back(g.ids);
    plan_to_send_ = std::move(plan);
    plan_sent_ = true;
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.reduction_cost = cost;
  }

  void AdoptPlan(const std::vector<std::vector<uint32_t>>& plan) {
    plan_.clear();
    plan_group_.clear();
    std::vector<std::vector<std::string>> names;
    for (const auto& group : plan) {
      if (group.size() < 2) continue;  // a group of one is reduced on its own anyway
      for (uint32_t id : group) plan_group_[id] = plan_.size();
      plan_.push_back(group);
    }
    for (const auto& group : plan) {
      std::vector<std::string> g;
      for (uint32_t id : group) g.push_back(cache_.at(id).name);
      names.push_back(std::move(g));
    }
    // Units already queued keep their state; only later ones are held.
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.merge_plan = std::move(names);
  }

  // ---- failure ----

  // Fails every pending and later Work with `status`, after telling the peers (unless the engine
  // is being shut down, or the failure is a peer's notice, which the others have received too).
  void Fail(Status status) {
    bool stopping = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping = stop_ && status.code() == StatusCode::kCancelled;
      if (failure_.ok() && !stopping) failure_ = status;
    }
    if (!stopping) {
      options_.logger.Error("engine: " + status.ToString());
      if (!peer_failed_) SendAbort(status);
    }
    CloseAndFailAll(status);
  }

  void CloseAndFailAll(const Status& status) {
    std::vector<std::shared_ptr<WorkState>> to_fail;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!closed_) {
        closed_ = true;
        closed_status_ = failure_.ok() ? status : failure_;
      }
      for (auto& item : incoming_) {
        to_fail.push_back(item.tensor ? item.tensor->work : item.call_work);
      }
      incoming_.clear();
      for (auto& [name, entries] : pending_) {
        for (auto& e : entries) to_fail.push_back(e->work);
      }
      pending_.clear();
      for (auto& [key, e] : active_) to_fail.push_back(e->work);
      active_.clear();
      queue_.clear();
    }
    for (auto& w : to_fail) w->Complete(closed_status_);
  }

  Transport& t_;
  GradientReducer& reducer_;
  const EngineOptions options_;
  const int rank_;
  const int size_;
  std::shared_ptr<WaitBook> book_;
  std::thread thread_;

  // Shared with submitting threads.
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> incoming_;
  std::map<std::string, std::deque<std::unique_ptr<Entry>>> pending_;
  std::unordered_map<uintptr_t, std::unique_ptr<Entry>> active_;
  uint64_t next_seq_ = 0;
  bool stop_ = false;
  bool closed_ = false;
  Status closed_status_;
  Status failure_;

  bool logged_stats_ = false;

  // Engine thread only.
  bool in_session_ = false;
  bool global_pending_ = false;
  bool stuck_ = false;
  uint64_t cycle_ = 0;
  Clock::time_point last_cycle_;
  TensorCache cache_;
  std::vector<std::set<std::string>> reported_;
  std::vector<std::byte> out_message_;
  std::vector<std::byte> abort_message_;
  bool peer_failed_ = false;  // the failure came from a peer's abort notice
  std::vector<Unit> queue_;
  uint64_t next_order_ = 0;
  uint64_t buckets_ = 0;
  std::vector<float> fusion_buffer_;
  std::vector<std::vector<uint32_t>> plan_;
  std::map<uint32_t, size_t> plan_group_;
  std::optional<std::vector<std::vector<uint32_t>>> plan_to_send_;
  bool plan_sent_ = false;
  std::map<uint32_t, size_t> generations_;
  std::map<size_t, std::map<uint32_t, Clock::time_point>> ready_times_;
  std::vector<double> cost_samples_bytes_;
  std::vector<double> cost_samples_seconds_;

  mutable std::mutex stats_mutex_;
  EngineStats stats_;
  std::vector<Interval> comm_intervals_;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::Start(Transport& t, GradientReducer& reducer,
                                                EngineOptions options) {
  FRUGAL_CHECK_GE(options.cycle_time.count(), 0, "cycle time");
  FRUGAL_CHECK_GT(options.timeout.count(), 0, "timeout");
  FRUGAL_CHECK_GT(options.fusion_threshold_bytes, size_t{0}, "fusion threshold");
  FRUGAL_CHECK_GE(options.mgwfbp_warmup_steps, 0);
  FRUGAL_CHECK_GE(options.mgwfbp_profile_steps, 1);
  // A stall that lasts reaches the timeout of the negotiation, which ends the job: a warning or
  // shutdown not shorter than it would never be seen.
  if (!options.stall_warning) options.stall_warning = options.timeout / 2;
  for (const auto& [name, value] :
       {std::pair<const char*, Duration>{"warning", *options.stall_warning},
        {"shutdown", options.stall_shutdown}}) {
    if (value > Duration::zero() && value >= options.timeout) {
      return InvalidArgumentError(fmt::format(
          "engine start: the stall {} ({} ms) must be shorter than the timeout ({} ms), which ends "
          "the job first",
          name, value.count(), options.timeout.count()));
    }
  }
  // Every rank must schedule alike, or they would reduce different buckets.
  const uint64_t mine = OptionsFingerprint(options);
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  CollectiveOptions collective;
  collective.timeout = options.timeout;
  FRUGAL_RETURN_IF_ERROR(
      Allgatherv(t, std::as_bytes(std::span<const uint64_t>(&mine, 1)), all, sizes, collective)
          .Annotate("engine start"));
  if (all.size() != sizeof(uint64_t) * static_cast<size_t>(t.size())) {
    return MalformedError("engine start: unexpected size of the gathered options");
  }
  std::vector<uint64_t> prints(static_cast<size_t>(t.size()));
  std::memcpy(prints.data(), all.data(), all.size());
  std::vector<int> differing;
  for (int r = 1; r < t.size(); ++r) {
    if (prints[static_cast<size_t>(r)] != prints[0]) differing.push_back(r);
  }
  if (!differing.empty()) {
    return InvalidArgumentError(fmt::format(
        "engine start: the scheduling options (fusion, threshold, schedule, partition, cycle "
        "time) of {} {} differ from rank 0's; every rank must use the same",
        differing.size() == 1 ? "rank" : "ranks", engine_internal::JoinRanks(differing)));
  }
  FRUGAL_RETURN_IF_ERROR(Barrier(t, collective).Annotate("engine start"));
  if (options.timeline) options.timeline->set_origin(Clock::now());
  auto impl = std::make_unique<Impl>(t, reducer, std::move(options));
  impl->StartThread();
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

std::unique_ptr<Work> Engine::Submit(TensorRequest request, std::span<float> data) {
  return impl_->Submit(std::move(request), data);
}

std::unique_ptr<Work> Engine::Call(std::string name, std::function<Status(Transport&)> fn) {
  return impl_->Call(std::move(name), std::move(fn));
}

Status Engine::Shutdown() { return impl_->Shutdown(); }
EngineStats Engine::stats() const { return impl_->stats(); }
int Engine::rank() const { return impl_->rank(); }
int Engine::size() const { return impl_->size(); }
const EngineOptions& Engine::options() const { return impl_->options(); }

}  // namespace frugal
