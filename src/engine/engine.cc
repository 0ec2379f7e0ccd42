// The communication engine: a background thread per rank that negotiates, schedules and reduces
// the tensors other threads submit. The parts it drives each have their own file: negotiator.cc
// (the cycles over the transport, the stall inspector, abort notices), negotiation.cc (messages
// and the evaluation of a cycle), schedule.cc (the policies that form buckets),
// bucket_reduction.cc (a bucket through the reducer), mgwfbp_profiler.cc and merge_plan.cc
// (MG-WFBP), engine_work.cc (the Work handle and the wait accounting), engine_timeline.cc (what
// it draws), options.cc (validation, agreement across ranks and the names of the options).
//
// Submission: Submit() and Call() append an Item to `incoming_` (under `mutex_`) and wake the
// engine thread. The engine thread moves tensor items into `pending_` (a FIFO per name; the head
// of each is what this rank offers) until it meets a Call, which runs once nothing of this rank
// is pending, queued or in a session; items behind a Call wait for it.
//
// Sessions and cycles: while this rank has pending tensors (or agreed work is queued, or the last
// cycle showed tensors pending on some rank) the engine is "in session" and runs negotiation
// cycles, at most one per cycle_time while nothing is executable. Each cycle reports the heads of
// `pending_` to the coordinator (rank 0) and returns the same outcome on every rank: agreed
// tensors (moved to `active_` and queued as units, see schedule.h), tensors that ranks described
// differently (failed), tensors pending on some ranks only, whether every rank waits, rank 0's
// merge plan. A rank without pending tensors does not start a session and the coordinator waits
// for its report until it submits; the coordinator itself, when it has nothing pending, looks for
// its peers' reports every kCoordinatorIdlePoll and joins their session.
//
// Execution: after each cycle TakeBuckets gives the buckets to reduce now, the same on every
// rank; BucketReduction runs each through the reducer with the bucket's step. A tensor's Work
// completes when all its units are reduced.
//
// Unmatched names: when every rank waits (a thread blocked on a tensor the rank has reported),
// nothing was agreed, nothing is executable and tensors are pending on some ranks only, no rank
// can make progress: held MG-WFBP units are released to go alone if there are any, otherwise every
// pending tensor fails on every rank with UnmatchedMessage.
//
// MG-WFBP: rank 0 feeds the profiler with completions and single-tensor reductions until it
// makes the plan, sends it in its next cycle message, and every rank adopts it in that cycle.
//
// Failure: an error of a cycle or a reduction, or an exception that reaches the thread's loop,
// fails the engine: the peers get an abort notice (unless the failure was a peer's notice), every
// pending and later Work fails with the Status, and Shutdown returns it. Which failure a failed
// reduction reports (this rank's own wait or a peer's notice) is the negotiator's rule of blame.
//
// Accounting: comm_seconds adds the reducer calls; exposed_seconds is their overlap with the
// intervals in which at least one thread waited in EngineWork::Wait on a tensor.
#include "frugal/engine.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "engine/bucket_reduction.h"
#include "engine/engine_timeline.h"
#include "engine/engine_work.h"
#include "engine/mgwfbp_profiler.h"
#include "engine/negotiation.h"
#include "engine/negotiator.h"
#include "engine/options.h"
#include "engine/schedule.h"
#include "frugal/collectives.h"
#include "frugal/engine_phases.h"

namespace frugal {

using engine_internal::AgreedTensor;
using engine_internal::CycleOutcome;
using engine_internal::EngineWork;
using engine_internal::Interval;
using engine_internal::PendingHead;
using engine_internal::TensorDescriptor;
using engine_internal::Unit;
using engine_internal::WaitBook;
using engine_internal::WorkState;

namespace {

// How often the coordinator, while it has nothing pending, looks for its peers' reports.
constexpr auto kCoordinatorIdlePoll = std::chrono::milliseconds(5);

}  // namespace

class Engine::Impl {
 public:
  Impl(Transport& t, GradientReducer& reducer, EngineOptions options)
      : t_(t),
        reducer_(reducer),
        options_(std::move(options)),
        rank_(t.rank()),
        size_(t.size()),
        book_(std::make_shared<WaitBook>()),
        schedule_(engine_internal::ScheduleOptionsOf(options_)),
        negotiator_(t, engine_internal::NegotiatorOptions{options_.timeout, *options_.stall_warning,
                                                          options_.stall_shutdown,
                                                          options_.on_stall, options_.logger}),
        profiler_(options_.mgwfbp_warmup_steps, options_.mgwfbp_profile_steps,
                  options_.reduction_cost, static_cast<double>(options_.fusion_threshold_bytes)),
        bucket_reduction_(reducer, options_.timeline, options_.phases) {}

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
      LogStats();
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
    s.exposed_seconds = engine_internal::OverlapSeconds(comm, book_->Snapshot());
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
    Clock::time_point offered;  // first included in a cycle
    bool is_offered = false;
    uint64_t seq = 0;  // submission order on this rank
    uint32_t id = 0;   // cache id, once agreed
    size_t units_left = 0;
  };

  struct Item {
    std::unique_ptr<Entry> tensor;  // or a call:
    std::string call_name;
    std::function<Status(Transport&)> call;
    std::shared_ptr<WorkState> call_work;
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
      failure = Run();
    } catch (const CheckError& e) {
      failure = InvalidArgumentError(fmt::format("engine thread: {}", e.what()));
    } catch (const std::exception& e) {
      failure = InternalError(fmt::format("engine thread: {}", e.what()));
    } catch (...) {
      failure = InternalError("engine thread: an exception of unknown type");
    }
    if (failure.ok()) return;
    try {
      Fail(failure);
    } catch (...) {  // telling the peers failed: the Work handles still get the failure
      CloseAndFailAll(failure);
    }
  }

  // Until a stop (OK) or a failure (its Status).
  Status Run() {
    while (true) {
      Item call;
      bool idle = false;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (stop_) return Status::Ok();
        TakeIncomingLocked();
        if (!in_session_ && pending_.empty() && queue_.empty()) {
          auto woken = [&] { return stop_ || !incoming_.empty(); };
          if (!incoming_.empty()) {  // a Call is at the head
            call = std::move(incoming_.front());
            incoming_.pop_front();
          } else if (!negotiator_.coordinator()) {
            cv_.wait(lock, woken);
            continue;
          } else if (cv_.wait_for(lock, kCoordinatorIdlePoll, woken)) {
            continue;
          } else {
            idle = true;
          }
        }
      }
      if (call.call) {
        RunCall(std::move(call));
        continue;
      }
      // The coordinator with nothing of its own joins the session of peers that report.
      if (idle) {
        FRUGAL_ASSIGN_OR_RETURN(const bool joined, negotiator_.PeerReportWaiting());
        if (!joined) continue;
      }
      if (!in_session_) {
        // As Horovod's loop: gather for one cycle time before the first negotiation, so that
        // gradients produced together are agreed (and fused) together.
        in_session_ = true;
        last_cycle_ = Clock::now();
      }
      if (!engine_internal::HasExecutable(queue_, plan_) &&
          !SleepUntil(last_cycle_ + options_.cycle_time)) {
        return Status::Ok();
      }
      FRUGAL_RETURN_IF_ERROR(RunCycle());
      FRUGAL_RETURN_IF_ERROR(Execute());
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
    } catch (...) {
      status = InternalError(
          fmt::format("call '{}' threw an exception of unknown type", item.call_name));
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
    for (const auto& [order, entry] : active_) {
      if (entry->work->waiters.load() > 0) return true;
    }
    return false;
  }

  // One negotiation cycle and what follows from its outcome.
  Status RunCycle() {
    const auto begin = Clock::now();
    last_cycle_ = begin;
    std::vector<PendingHead> heads;
    bool waiting = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      TakeIncomingLocked();
      // Heads in submission order, so that new tensors enter the cache (and FIFO order) in the
      // order this rank produced them.
      std::vector<Entry*> entries;
      for (auto& [name, queue] : pending_) entries.push_back(queue.front().get());
      std::sort(entries.begin(), entries.end(),
                [](const Entry* a, const Entry* b) { return a->seq < b->seq; });
      for (Entry* head : entries) {
        if (!head->is_offered) {
          head->is_offered = true;
          head->offered = begin;
        }
        heads.push_back({head->descriptor, head->submitted});
      }
      waiting = AnyWaiterLocked();
    }
    const uint64_t bytes_before = negotiator_.bytes_sent();
    FRUGAL_ASSIGN_OR_RETURN(
        CycleOutcome outcome,
        negotiator_.RunCycle(heads, waiting, std::exchange(plan_to_send_, std::nullopt),
                             [this] { return StopRequested(); }));
    const auto evaluated = Clock::now();
    if (outcome.plan && plan_.empty()) AdoptPlan(*outcome.plan);
    const engine_internal::TensorCache& cache = negotiator_.cache();
    for (const auto& [id, message] : outcome.mismatched) {
      std::unique_ptr<Entry> entry = PopHead(cache.at(id).name);
      if (entry) entry->work->Complete(InvalidArgumentError(message));
    }
    for (uint32_t id : outcome.agreed) {
      std::unique_ptr<Entry> entry = PopHead(cache.at(id).name);
      if (!entry) {
        return MalformedError(
            fmt::format("negotiation: the coordinator agreed on '{}', which is not pending here",
                        cache.at(id).name));
      }
      entry->id = id;
      if (options_.timeline) {
        engine_internal::DrawAgreement(*options_.timeline, entry->descriptor.name, entry->submitted,
                                       entry->offered, evaluated);
      }
      Enqueue(std::move(entry));
    }
    global_pending_ = !outcome.partial.empty();
    stuck_ = options_.detect_unmatched && outcome.all_waiting && outcome.agreed.empty() &&
             outcome.mismatched.empty() && !engine_internal::HasExecutable(queue_, plan_);
    if (stuck_ && !engine_internal::HasHeld(queue_) && !outcome.partial.empty()) {
      const std::string message = engine_internal::UnmatchedMessage(cache, outcome.partial, size_);
      for (const auto& [id, ranks] : outcome.partial) {
        if (std::find(ranks.begin(), ranks.end(), rank_) == ranks.end()) continue;
        std::unique_ptr<Entry> entry = PopHead(cache.at(id).name);
        if (entry) entry->work->Complete(InvalidArgumentError(message));
      }
      global_pending_ = false;
    }
    const auto end = Clock::now();
    uint64_t cycle = 0;
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      cycle = stats_.cycles++;
      stats_.negotiate_seconds += std::chrono::duration<double>(end - begin).count();
      stats_.negotiation_bytes += negotiator_.bytes_sent() - bytes_before;
    }
    if (options_.timeline && (!outcome.agreed.empty() || end - begin > options_.cycle_time)) {
      options_.timeline->Span(
          "engine", "negotiate", begin, end,
          fmt::format(R"({{"cycle":{},"agreed":{}}})", cycle, outcome.agreed.size()));
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

  // ---- queue and execution ----

  void Enqueue(std::unique_ptr<Entry> entry) {
    const AgreedTensor agreed{entry->id, next_order_++, entry->data.size(),
                              entry->descriptor.priority, entry->step};
    const std::vector<Unit> units = engine_internal::SplitIntoUnits(agreed, schedule_, plan_);
    entry->units_left = units.size();
    engine_internal::Enqueue(queue_, units, schedule_);
    std::lock_guard<std::mutex> lock(mutex_);
    active_.emplace(agreed.order, std::move(entry));
  }

  Status Execute() {
    if (stuck_ && engine_internal::HasHeld(queue_)) {
      // Some member of an MG-WFBP group will not come: reduce the held units on their own.
      engine_internal::ReleaseHeld(queue_);
    }
    for (const std::vector<Unit>& bucket : engine_internal::TakeBuckets(queue_, plan_, schedule_)) {
      FRUGAL_RETURN_IF_ERROR(ReduceBucket(bucket));
    }
    return Status::Ok();
  }

  Entry& EntryOf(const Unit& u) {
    std::lock_guard<std::mutex> lock(mutex_);
    return *active_.at(u.order);
  }

  Status ReduceBucket(const std::vector<Unit>& units) {
    std::vector<Entry*> entries;
    std::vector<engine_internal::BucketPart> parts;
    for (const Unit& u : units) {
      Entry& e = EntryOf(u);
      entries.push_back(&e);
      const bool whole = u.parts == 1;
      parts.push_back({engine_internal::UnitName(e.descriptor.name, u), e.descriptor.name,
                       e.data.subspan(u.offset, u.count),
                       whole ? e.descriptor.shape : std::vector<int64_t>{}, whole ? 0 : u.offset,
                       whole ? 0 : e.data.size()});
    }
    const engine_internal::ReductionResult result =
        bucket_reduction_.Reduce(parts, static_cast<int>(buckets_++), units.front().step);
    const Status& status = result.status;
    const double seconds = std::chrono::duration<double>(result.end - result.begin).count();
    {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      ++stats_.reductions;
      stats_.bytes_reduced += result.count * sizeof(float);
      stats_.comm_seconds += seconds;
      comm_intervals_.push_back({result.begin, result.end});
    }
    if (Profiling() && units.size() == 1) {
      profiler_.RecordReduction(static_cast<double>(result.count * sizeof(float)), seconds);
    }
    if (!status.ok()) return negotiator_.ResolveReductionFailure(status.Annotate("engine"));
    for (size_t i = 0; i < units.size(); ++i) {
      Entry* e = entries[i];
      if (--e->units_left > 0) continue;
      if (Profiling()) profiler_.RecordCompletion(e->id, e->submitted);
      e->work->Complete(Status::Ok());
      {
        std::lock_guard<std::mutex> lock(stats_mutex_);
        ++stats_.tensors;
      }
      std::lock_guard<std::mutex> lock(mutex_);
      active_.erase(units[i].order);
    }
    return Status::Ok();
  }

  // ---- MG-WFBP ----

  bool Profiling() const {
    return options_.fusion == FusionPolicy::kMgWfbp && rank_ == 0 && !profiler_.planned();
  }

  void MaybePlan() {
    if (!Profiling()) return;
    const engine_internal::TensorCache& cache = negotiator_.cache();
    std::vector<double> bytes(cache.size());
    for (uint32_t id = 0; id < cache.size(); ++id) {
      size_t elements = 1;
      for (int64_t d : cache.at(id).shape) elements *= static_cast<size_t>(d);
      bytes[id] = static_cast<double>(elements * sizeof(float));
    }
    std::optional<engine_internal::MgWfbpPlan> plan = profiler_.MaybePlan(bytes);
    if (!plan) return;
    plan_to_send_ = std::move(plan->groups);
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.reduction_cost = plan->cost;
  }

  // Units already queued keep their state; only later ones are held.
  void AdoptPlan(const std::vector<std::vector<uint32_t>>& groups) {
    plan_ = engine_internal::MergePlan(groups);
    std::vector<std::vector<std::string>> names;
    for (const auto& group : groups) {
      std::vector<std::string> g;
      for (uint32_t id : group) g.push_back(negotiator_.cache().at(id).name);
      names.push_back(std::move(g));
    }
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
      if (!negotiator_.peer_failed()) {
        const uint64_t bytes_before = negotiator_.bytes_sent();
        negotiator_.SendAbort(status);
        std::lock_guard<std::mutex> lock(stats_mutex_);
        stats_.negotiation_bytes += negotiator_.bytes_sent() - bytes_before;
      }
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
      for (auto& [order, e] : active_) to_fail.push_back(e->work);
      active_.clear();
      queue_.clear();
    }
    for (auto& w : to_fail) w->Complete(closed_status_);
  }

  void LogStats() const {
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
  std::map<uint64_t, std::unique_ptr<Entry>> active_;  // agreed, by agreement order
  uint64_t next_seq_ = 0;
  bool stop_ = false;
  bool closed_ = false;
  Status closed_status_;
  Status failure_;

  bool logged_stats_ = false;

  // Engine thread only.
  const engine_internal::ScheduleOptions schedule_;
  engine_internal::Negotiator negotiator_;
  engine_internal::MgWfbpProfiler profiler_;
  bool in_session_ = false;
  bool global_pending_ = false;
  bool stuck_ = false;
  Clock::time_point last_cycle_;
  std::vector<Unit> queue_;
  uint64_t next_order_ = 0;
  uint64_t buckets_ = 0;
  engine_internal::BucketReduction bucket_reduction_;
  engine_internal::MergePlan plan_;
  std::optional<std::vector<std::vector<uint32_t>>> plan_to_send_;

  mutable std::mutex stats_mutex_;
  EngineStats stats_;
  std::vector<Interval> comm_intervals_;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::Start(Transport& t, GradientReducer& reducer,
                                                EngineOptions options) {
  FRUGAL_RETURN_IF_ERROR(engine_internal::ResolveOptions(options));
  FRUGAL_RETURN_IF_ERROR(engine_internal::CheckSameSchedulingOptions(t, options));
  CollectiveOptions collective;
  collective.timeout = options.timeout;
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
