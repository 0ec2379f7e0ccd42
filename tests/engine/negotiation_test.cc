// The negotiation's messages and evaluation on their own: reports, decisions and abort notices
// round-trip and refuse every truncation and every flipped bit; the coordinator's evaluation and a
// rank's application of its decision give every rank the same cache and outcome.
#include "engine/negotiation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/abort_message.h"
#include "engine/decision.h"

namespace frugal::engine_internal {
namespace {

using ::testing::HasSubstr;

// Every proper prefix and every flip of a bit is kMalformed (the CRC-32 trailer catches what the
// field checks cannot: a flipped bit of a bit vector still parses).
template <typename Decode>
void ExpectTruncationsAndBitFlipsRejected(const std::vector<std::byte>& bytes, Decode decode) {
  ASSERT_TRUE(decode(std::span<const std::byte>(bytes)).ok());
  for (size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_EQ(decode(std::span(bytes.data(), size)).status().code(), StatusCode::kMalformed)
        << size;
  }
  for (size_t at = 0; at < bytes.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<std::byte> bad = bytes;
      bad[at] ^= static_cast<std::byte>(1 << bit);
      EXPECT_EQ(decode(std::span<const std::byte>(bad)).status().code(), StatusCode::kMalformed)
          << "byte " << at << " bit " << bit;
    }
  }
}

TEST(Negotiation, ReportsRoundTrip) {
  CycleMessage m;
  m.cycle = 42;
  m.waiting = true;
  m.cache_size = 13;
  m.SetBit(0);
  m.SetBit(12);
  m.descriptors.push_back({"fc.weight", {128, 64}, "float32", 3});
  m.descriptors.push_back({"x", {}, "bf16", -1});
  const std::vector<std::byte> bytes = EncodeCycleMessage(m);
  StatusOr<CycleMessage> back = DecodeCycleMessage(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->cycle, 42u);
  EXPECT_TRUE(back->waiting);
  EXPECT_TRUE(back->Bit(0));
  EXPECT_TRUE(back->Bit(12));
  EXPECT_FALSE(back->Bit(5));
  ASSERT_EQ(back->descriptors.size(), 2u);
  EXPECT_TRUE(back->descriptors[0] == m.descriptors[0]);
  EXPECT_TRUE(back->descriptors[1] == m.descriptors[1]);
  ExpectTruncationsAndBitFlipsRejected(bytes, DecodeCycleMessage);
}

TEST(Negotiation, AbortNoticesRoundTripAndRefuseAnOkCode) {
  const std::vector<std::byte> bytes =
      EncodeAbortMessage({StatusCode::kTimeout, "stall inspector: 'a'"});
  StatusOr<AbortMessage> back = DecodeAbortMessage(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->code, StatusCode::kTimeout);
  EXPECT_EQ(back->reason, "stall inspector: 'a'");
  ExpectTruncationsAndBitFlipsRejected(bytes, DecodeAbortMessage);
  StatusOr<AbortMessage> ok_code = DecodeAbortMessage(EncodeAbortMessage({StatusCode::kOk, "x"}));
  EXPECT_EQ(ok_code.status().code(), StatusCode::kMalformed);
  EXPECT_THAT(ok_code.status().message(), HasSubstr("bad status code"));
}

// Three ranks: 'a' everywhere alike, 'b' with another shape on rank 2, 'c' on ranks 0 and 2 only.
std::vector<CycleMessage> ThreeReports() {
  std::vector<CycleMessage> reports(3);
  for (int r = 0; r < 3; ++r) {
    reports[r].waiting = r != 1;
    reports[r].descriptors.push_back({"a", {4}, "float32", 0});
    reports[r].descriptors.push_back({"b", {r == 2 ? 3 : 2, 2}, "float32", 1});
    if (r != 1) reports[r].descriptors.push_back({"c", {1}, "float32", 2});
  }
  return reports;
}

TEST(Negotiation, TheCoordinatorAgreesMismatchesAndFindsPartialTensors) {
  TensorCache cache;
  StatusOr<CycleOutcome> outcome = EvaluateCycle(cache, ThreeReports());
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.at(0).name, "a");
  EXPECT_EQ(outcome->agreed, std::vector<uint32_t>{0});
  ASSERT_EQ(outcome->mismatched.size(), 1u);
  EXPECT_EQ(outcome->mismatched[0].first, 1u);
  EXPECT_THAT(outcome->mismatched[0].second,
              HasSubstr("[2, 2] float32, priority 1 on ranks 0, 1 but [3, 2] float32, priority 1 "
                        "on rank 2"));
  ASSERT_EQ(outcome->partial.size(), 1u);
  EXPECT_EQ(outcome->partial[0], (std::pair<uint32_t, std::vector<int>>{2, {0, 2}}));
  EXPECT_FALSE(outcome->all_waiting);

  // Next cycle, cached: bits only. A report with another cache size is malformed.
  std::vector<CycleMessage> next(3);
  for (CycleMessage& m : next) {
    m.cache_size = cache.size();
    m.SetBit(2);
  }
  next[1].cache_size = 2;
  EXPECT_EQ(EvaluateCycle(cache, next).status().code(), StatusCode::kMalformed);
}

TEST(Negotiation, ADecisionGivesEveryRankTheCoordinatorsCacheAndOutcome) {
  TensorCache coordinator;
  StatusOr<CycleOutcome> outcome = EvaluateCycle(coordinator, ThreeReports());
  ASSERT_TRUE(outcome.ok());
  outcome->plan = std::vector<std::vector<uint32_t>>{{0, 2}, {1}};
  const std::vector<std::byte> bytes = EncodeDecision(MakeDecision(7, 3, coordinator, 0, *outcome));
  StatusOr<DecisionMessage> decision = DecodeDecision(bytes);
  ASSERT_TRUE(decision.ok()) << decision.status().ToString();
  TensorCache rank;
  StatusOr<CycleOutcome> applied = ApplyDecision(rank, *decision, 7, 3);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  ASSERT_EQ(rank.size(), coordinator.size());
  for (uint32_t id = 0; id < rank.size(); ++id) EXPECT_TRUE(rank.at(id) == coordinator.at(id));
  EXPECT_EQ(applied->agreed, outcome->agreed);
  EXPECT_EQ(applied->mismatched, outcome->mismatched);
  EXPECT_EQ(applied->partial, outcome->partial);
  EXPECT_EQ(applied->all_waiting, outcome->all_waiting);
  EXPECT_EQ(applied->plan, outcome->plan);
  ExpectTruncationsAndBitFlipsRejected(bytes, DecodeDecision);
}

TEST(Negotiation, ADecisionThatDoesNotFitTheRankIsMalformedAndChangesNothing) {
  TensorCache coordinator;
  StatusOr<CycleOutcome> outcome = EvaluateCycle(coordinator, ThreeReports());
  ASSERT_TRUE(outcome.ok());
  const DecisionMessage good = MakeDecision(7, 3, coordinator, 0, *outcome);
  auto expect_refused = [](const DecisionMessage& d, uint64_t cycle, int world,
                           const std::string& says) {
    TensorCache cache;
    StatusOr<CycleOutcome> applied = ApplyDecision(cache, d, cycle, world);
    EXPECT_EQ(applied.status().code(), StatusCode::kMalformed) << says;
    EXPECT_THAT(applied.status().message(), HasSubstr(says));
    EXPECT_EQ(cache.size(), 0u);
  };
  expect_refused(good, 8, 3, "decision of cycle 7, this rank is in cycle 8");
  expect_refused(good, 7, 4, "for 3 ranks");
  DecisionMessage unknown_id = good;
  unknown_id.outcome.agreed.push_back(3);
  expect_refused(unknown_id, 7, 3, "tensor id beyond the 3 known");
  DecisionMessage twice = good;
  twice.added.push_back(twice.added[0]);
  expect_refused(twice, 7, 3, "adds tensor 'a' again");
}

}  // namespace
}  // namespace frugal::engine_internal
