// The scheduling policies and the MG-WFBP profiler on their own: queues of agreed tensors in,
// buckets out, without threads or a transport.
#include "engine/schedule.h"

#include <gtest/gtest.h>

#include <chrono>

#include "engine/mgwfbp_profiler.h"

namespace frugal::engine_internal {
namespace {

ScheduleOptions Fifo(FusionPolicy fusion, size_t threshold_floats = 1000) {
  ScheduleOptions o;
  o.fusion = fusion;
  o.schedule = SchedulePolicy::kFifo;
  o.fusion_threshold_bytes = threshold_floats * sizeof(float);
  return o;
}

ScheduleOptions Priority(size_t partition_floats) {
  ScheduleOptions o;
  o.schedule = SchedulePolicy::kPriority;
  o.partition_bytes = partition_floats * sizeof(float);
  return o;
}

// Queues tensors (id, count, priority, step) in agreement order.
std::vector<Unit> Queue(const std::vector<AgreedTensor>& tensors, const ScheduleOptions& options,
                        const MergePlan& plan = {}) {
  std::vector<Unit> queue;
  uint64_t order = 0;
  for (AgreedTensor t : tensors) {
    t.order = order++;
    Enqueue(queue, SplitIntoUnits(t, options, plan), options);
  }
  return queue;
}

AgreedTensor T(uint32_t id, size_t count, int priority = 0, uint64_t step = 0) {
  return AgreedTensor{id, 0, count, priority, step};
}

// Buckets as lists of "id" or "id#part/parts".
std::vector<std::vector<std::string>> Names(const std::vector<std::vector<Unit>>& buckets) {
  std::vector<std::vector<std::string>> out;
  for (const auto& bucket : buckets) {
    std::vector<std::string> names;
    for (const Unit& u : bucket) names.push_back(UnitName(std::to_string(u.id), u));
    out.push_back(names);
  }
  return out;
}

using Buckets = std::vector<std::vector<std::string>>;

TEST(Schedule, PartitionsOnlyUnderPriorityAndCoverTheTensorExactly) {
  EXPECT_EQ(SplitIntoUnits(T(0, 1000), Fifo(FusionPolicy::kOff), {}).size(), 1u);
  EXPECT_EQ(SplitIntoUnits(T(0, 1000), Priority(0), {}).size(), 1u);
  const std::vector<Unit> units = SplitIntoUnits(T(0, 1001), Priority(250), {});
  ASSERT_EQ(units.size(), 5u);  // ceil(1001 / 250)
  size_t next = 0;
  for (size_t p = 0; p < units.size(); ++p) {
    EXPECT_EQ(units[p].offset, next);
    EXPECT_LE(units[p].count, 250u);
    EXPECT_EQ(units[p].part, static_cast<int>(p));
    EXPECT_EQ(units[p].parts, 5);
    next += units[p].count;
  }
  EXPECT_EQ(next, 1001u);
}

TEST(Schedule, FifoWithoutFusionReducesEachUnitAloneInAgreementOrder) {
  std::vector<Unit> queue = Queue({T(3, 10), T(1, 20), T(2, 30)}, Fifo(FusionPolicy::kOff));
  EXPECT_EQ(Names(TakeBuckets(queue, {}, Fifo(FusionPolicy::kOff))),
            (Buckets{{"3"}, {"1"}, {"2"}}));
  EXPECT_TRUE(queue.empty());
}

TEST(Schedule, CycleFusionPacksUpToTheThresholdAndStopsAtTheFirstThatDoesNotFit) {
  const ScheduleOptions o = Fifo(FusionPolicy::kCycle, 100);
  std::vector<Unit> queue = Queue({T(0, 30), T(1, 30), T(2, 30), T(3, 30), T(4, 150), T(5, 10)}, o);
  EXPECT_EQ(Names(TakeBuckets(queue, {}, o)), (Buckets{{"0", "1", "2"}, {"3"}, {"4"}, {"5"}}));
}

TEST(Schedule, ABucketNeverMixesSteps) {
  const ScheduleOptions cycle = Fifo(FusionPolicy::kCycle);
  std::vector<Unit> queue =
      Queue({T(0, 10, 0, 3), T(1, 10, 0, 4), T(2, 10, 0, 4), T(3, 10, 0, 3)}, cycle);
  EXPECT_EQ(Names(TakeBuckets(queue, {}, cycle)), (Buckets{{"0", "3"}, {"1", "2"}}));

  // Priority packing stops at the first unit of another step.
  const ScheduleOptions priority = Priority(1000);
  queue = Queue({T(0, 10, 0, 3), T(1, 10, 1, 4), T(2, 10, 2, 3)}, priority);
  EXPECT_EQ(Names(TakeBuckets(queue, {}, priority)), (Buckets{{"0"}}));
  EXPECT_EQ(Names(TakeBuckets(queue, {}, priority)), (Buckets{{"1"}}));
  EXPECT_EQ(Names(TakeBuckets(queue, {}, priority)), (Buckets{{"2"}}));

  // A merge group whose members belong to two steps: one bucket per step.
  const ScheduleOptions mg = Fifo(FusionPolicy::kMgWfbp);
  const MergePlan plan({{0, 1, 2}});
  queue = Queue({T(0, 10, 0, 5), T(1, 10, 0, 6), T(2, 10, 0, 5)}, mg, plan);
  EXPECT_EQ(Names(TakeBuckets(queue, plan, mg)), (Buckets{{"0", "2"}, {"1"}}));
}

TEST(Schedule, PriorityOrdersByPriorityThenAgreementThenPartAndTakesOneBucket) {
  const ScheduleOptions o = Priority(64);
  // Agreed in reverse priority (as backward produces them), 128 floats each: two parts.
  std::vector<Unit> queue = Queue({T(3, 128, 3), T(2, 128, 2), T(1, 128, 1), T(0, 128, 0)}, o);
  Buckets order;
  while (!queue.empty()) {
    const auto buckets = TakeBuckets(queue, {}, o);
    ASSERT_EQ(buckets.size(), 1u) << "one bucket per call, then negotiate again";
    for (const auto& b : Names(buckets)) order.push_back(b);
  }
  EXPECT_EQ(
      order,
      (Buckets{
          {"0#0/2"}, {"0#1/2"}, {"1#0/2"}, {"1#1/2"}, {"2#0/2"}, {"2#1/2"}, {"3#0/2"}, {"3#1/2"}}));

  // Small tensors are packed up to the partition size; a later, more urgent one goes first.
  queue = Queue({T(5, 20, 5), T(6, 20, 6), T(7, 30, 7)}, o);
  EXPECT_EQ(Names(TakeBuckets(queue, {}, o)), (Buckets{{"5", "6"}}));
  uint64_t order_id = 10;
  Enqueue(queue, SplitIntoUnits(AgreedTensor{1, order_id, 10, 1, 0}, o, {}), o);
  EXPECT_EQ(Names(TakeBuckets(queue, {}, o)), (Buckets{{"1", "7"}}));
}

TEST(Schedule, MergeGroupsWaitForEveryMemberAndOthersGoAlone) {
  const ScheduleOptions o = Fifo(FusionPolicy::kMgWfbp);
  const MergePlan plan({{2, 1}, {0}});  // the group of one is dropped
  EXPECT_TRUE(plan.Contains(1));
  EXPECT_FALSE(plan.Contains(0));
  std::vector<Unit> queue = Queue({T(2, 10), T(0, 10)}, o, plan);
  EXPECT_TRUE(HasHeld(queue));
  EXPECT_TRUE(HasExecutable(queue, plan));
  EXPECT_EQ(Names(TakeBuckets(queue, plan, o)), (Buckets{{"0"}}));
  EXPECT_FALSE(HasExecutable(queue, plan)) << "2 waits for 1";
  EXPECT_TRUE(TakeBuckets(queue, plan, o).empty());
  Enqueue(queue, SplitIntoUnits(AgreedTensor{1, 5, 10, 0, 0}, o, plan), o);
  EXPECT_TRUE(HasExecutable(queue, plan));
  EXPECT_EQ(Names(TakeBuckets(queue, plan, o)), (Buckets{{"2", "1"}}));
  EXPECT_TRUE(queue.empty());

  // Released (a member will not come): each goes alone.
  queue = Queue({T(2, 10)}, o, plan);
  ReleaseHeld(queue);
  EXPECT_FALSE(HasHeld(queue));
  EXPECT_EQ(Names(TakeBuckets(queue, plan, o)), (Buckets{{"2"}}));
}

TEST(MgWfbpProfiler, PlansOnceEveryTensorHasItsGenerationsFromTheProfiledOnes) {
  using std::chrono::milliseconds;
  MgWfbpProfiler profiler(1, 2, CostParams{0.010, 1e-9, 0}, 1e9);
  const std::vector<double> bytes = {400, 400, 400};
  const Clock::time_point t0 = Clock::now();
  // Backward produces 2, 1, 0. Warm-up generation: all at once (ignored). Profiled: 1 follows 2
  // within 2 ms, 0 comes 50 ms later.
  for (uint32_t id : {2u, 1u, 0u}) profiler.RecordCompletion(id, t0);
  for (int g = 1; g <= 2; ++g) {
    const Clock::time_point base = t0 + milliseconds(100 * g);
    profiler.RecordCompletion(2, base);
    profiler.RecordCompletion(1, base + milliseconds(2));
    EXPECT_FALSE(profiler.MaybePlan(bytes)) << "tensor 0 lacks generation " << g;
    profiler.RecordCompletion(0, base + milliseconds(50));
  }
  std::optional<MgWfbpPlan> plan = profiler.MaybePlan(bytes);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->groups, (std::vector<std::vector<uint32_t>>{{2, 1}, {0}}));
  EXPECT_EQ(plan->cost.alpha, 0.010);
  EXPECT_TRUE(profiler.planned());
  EXPECT_FALSE(profiler.MaybePlan(bytes)) << "the plan is made once";
}

TEST(MgWfbpProfiler, FitsAlphaAndBetaOnTheRecordedReductions) {
  MgWfbpProfiler profiler(0, 1, std::nullopt, 1e9);
  // seconds = 0.002 + 1e-6 * bytes, exactly.
  for (double b : {1000.0, 2000.0, 4000.0, 8000.0}) profiler.RecordReduction(b, 0.002 + 1e-6 * b);
  profiler.RecordCompletion(0, Clock::now());
  std::optional<MgWfbpPlan> plan = profiler.MaybePlan(std::vector<double>{400});
  ASSERT_TRUE(plan);
  EXPECT_NEAR(plan->cost.alpha, 0.002, 1e-9);
  EXPECT_NEAR(plan->cost.beta, 1e-6, 1e-12);
  EXPECT_EQ(plan->groups, (std::vector<std::vector<uint32_t>>{{0}}));
}

}  // namespace
}  // namespace frugal::engine_internal
