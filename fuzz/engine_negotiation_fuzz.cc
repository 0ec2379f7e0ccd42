// libFuzzer target for the engine's negotiation messages (src/engine/negotiation.h, decision.h,
// abort_message.h). The whole input is read as a coordinator's decision and as a failed engine's
// abort notice: each must decode or be rejected with kMalformed, and a decoded one must survive
// encode/decode unchanged; a decoded decision applied to a cache of the size it names must give
// OK or kMalformed, and leave the cache unchanged on kMalformed. The input is also split into up
// to four ranks' reports (a length byte before each), which must decode or be rejected the same
// way, and whose evaluation as one cycle over a small cache must return OK, kMalformed or
// kInternal (caches that diverged) - never crash or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "engine/abort_message.h"
#include "engine/decision.h"
#include "engine/negotiation.h"

namespace {

using frugal::StatusCode;
using namespace frugal::engine_internal;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckRejected(const frugal::Status& status) { Check(status.code() == StatusCode::kMalformed); }

TensorCache CacheOfSize(uint32_t size) {
  TensorCache cache;
  for (uint32_t i = 0; i < size; ++i) {
    cache.Add({"cached" + std::to_string(i), {static_cast<int64_t>(i)}, "float32", 0});
  }
  return cache;
}

bool SameOutcome(const CycleOutcome& a, const CycleOutcome& b) {
  return a.agreed == b.agreed && a.mismatched == b.mismatched && a.partial == b.partial &&
         a.all_waiting == b.all_waiting && a.plan == b.plan;
}

void FuzzAbort(std::span<const std::byte> bytes) {
  auto notice = DecodeAbortMessage(bytes);
  if (!notice.ok()) return CheckRejected(notice.status());
  auto round = DecodeAbortMessage(EncodeAbortMessage(*notice));
  Check(round.ok() && round->code == notice->code && round->reason == notice->reason);
}

void FuzzDecision(std::span<const std::byte> bytes) {
  auto decision = DecodeDecision(bytes);
  if (!decision.ok()) return CheckRejected(decision.status());
  auto round = DecodeDecision(EncodeDecision(*decision));
  Check(round.ok() && round->cycle == decision->cycle &&
        round->world_size == decision->world_size && round->cache_size == decision->cache_size &&
        round->added == decision->added && SameOutcome(round->outcome, decision->outcome));
  if (decision->cache_size > 64 || decision->world_size > 64) return;
  TensorCache cache = CacheOfSize(decision->cache_size);
  auto outcome =
      ApplyDecision(cache, *decision, decision->cycle, static_cast<int>(decision->world_size));
  if (!outcome.ok()) {
    CheckRejected(outcome.status());
    Check(cache.size() == decision->cache_size);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  FuzzAbort(input);
  FuzzDecision(input);

  std::vector<CycleMessage> messages;
  size_t at = 0;
  while (at < size && messages.size() < 4) {
    const size_t length = std::min<size_t>(data[at], size - at - 1);
    const std::span<const std::byte> report = input.subspan(at + 1, length);
    at += 1 + length;
    auto decoded = DecodeCycleMessage(report);
    if (!decoded.ok()) {
      CheckRejected(decoded.status());
      continue;
    }
    auto round = DecodeCycleMessage(EncodeCycleMessage(*decoded));
    Check(round.ok() && round->cycle == decoded->cycle && round->waiting == decoded->waiting &&
          round->cache_size == decoded->cache_size && round->bits == decoded->bits &&
          round->descriptors == decoded->descriptors);
    messages.push_back(std::move(*decoded));
  }
  if (!messages.empty()) {
    TensorCache cache = CacheOfSize(std::min<uint32_t>(messages[0].cache_size, 64));
    auto outcome = EvaluateCycle(cache, messages);
    Check(outcome.ok() || outcome.status().code() == StatusCode::kMalformed ||
          outcome.status().code() == StatusCode::kInternal);
  }
  return 0;
}
