// libFuzzer target for the engine's negotiation messages (src/engine/negotiation.h): the bytes
// are split into up to four messages (a length byte before each); every message must decode or be
// rejected with kMalformed, a decoded message must survive encode/decode unchanged, and the
// evaluation of the decoded messages as one cycle over a small cache must return OK, kMalformed
// or kInternal (caches that diverged) - never crash or read out of bounds. The whole input is also
// read as a failed engine's abort notice, which must decode or be rejected with kMalformed, and
// survive encode/decode unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "engine/negotiation.h"

namespace {

using frugal::StatusCode;
using frugal::engine_internal::CycleMessage;

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto abort_notice = frugal::engine_internal::DecodeAbortMessage(
      std::span(reinterpret_cast<const std::byte*>(data), size));
  if (abort_notice.ok()) {
    auto round = frugal::engine_internal::DecodeAbortMessage(
        frugal::engine_internal::EncodeAbortMessage(*abort_notice));
    Check(round.ok() && round->code == abort_notice->code && round->reason == abort_notice->reason);
  } else {
    Check(abort_notice.status().code() == StatusCode::kMalformed);
  }

  std::vector<CycleMessage> messages;
  size_t at = 0;
  while (at < size && messages.size() < 4) {
    const size_t length = std::min<size_t>(data[at], size - at - 1);
    const auto* begin = reinterpret_cast<const std::byte*>(data + at + 1);
    at += 1 + length;
    auto decoded = frugal::engine_internal::DecodeCycleMessage(std::span(begin, length));
    if (!decoded.ok()) {
      Check(decoded.status().code() == StatusCode::kMalformed);
      continue;
    }
    const std::vector<std::byte> again = frugal::engine_internal::EncodeCycleMessage(*decoded);
    auto round = frugal::engine_internal::DecodeCycleMessage(again);
    Check(round.ok() && round->cycle == decoded->cycle && round->bits == decoded->bits &&
          round->descriptors.size() == decoded->descriptors.size() &&
          round->plan == decoded->plan && round->waiting == decoded->waiting &&
          round->cache_size == decoded->cache_size);
    messages.push_back(std::move(*decoded));
  }
  if (!messages.empty()) {
    frugal::engine_internal::TensorCache cache;
    for (uint32_t i = 0; i < messages[0].cache_size && i < 64; ++i) {
      cache.Add({"cached" + std::to_string(i), {static_cast<int64_t>(i)}, "float32", 0});
    }
    auto outcome = frugal::engine_internal::EvaluateCycle(cache, messages);
    Check(outcome.ok() || outcome.status().code() == StatusCode::kMalformed ||
          outcome.status().code() == StatusCode::kInternal);
  }
  return 0;
}
