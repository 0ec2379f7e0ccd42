// CheckSameLength: a recursive-doubling all-reduce of the pair (min, max) of the ranks' counts.
//
// Let p be the largest power of two <= n and rem = n - p. Pre-step: among the first 2*rem ranks,
// each even rank r sends its pair to r + 1 and sits out; the odd ones fold it into theirs. The p
// remaining ranks get virtual ranks vr (r / 2 for the odd ranks below 2*rem, r - rem above) and
// for mask = 1, 2, ..., p/2 exchange their pair with virtual rank vr ^ mask, keeping the
// element-wise (min, max). Post-step: each odd rank below 2*rem sends the final pair back to
// r - 1. min and max are exact, so every rank holds the same (smallest, largest) and, if they
// differ, every rank returns the same kInvalidArgument.
//
// Failures travel the same schedule. A rank whose wait fails (typically: a peer that never
// joined) records the peer as `failed_rank` and the timeout it waited, stops receiving, and sends
// the notice (kFailedMarker, failed_rank | waited_ms << 32) instead of its pair at every later
// step of the schedule; a rank that receives a notice does the same with the notice's rank and
// time. A rank waiting on one that gave up thus usually learns which rank did not answer, and
// after how long (when the notice arrives before its own wait expires), instead of only naming
// the neighbour that gave up. A genuine pair never looks like a notice: its max is >= its min,
// and a notice has min = UINT64_MAX with max < UINT64_MAX (ranks are below 2^31).
//
// In an exchange, the receive is waited for before the send: when it fails or brings a notice,
// the partner has given up (or never came) and will not take this rank's message, so the send is
// abandoned instead of waited for (a transport whose sends complete only when received would
// otherwise hold this rank for a whole timeout while the notice sits in its receive).
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "collectives/internal.h"

namespace frugal {
namespace {

using Pair = std::array<uint64_t, 2>;  // (min, max)
constexpr uint64_t kFailedMarker = UINT64_MAX;

struct MinMaxState {
  Pair pair;
  Status error;            // first local failure, or a notice turned into a status
  int failed_rank = -1;    // the rank that did not answer
  uint64_t waited_ms = 0;  // how long the rank that noticed it waited
};

bool IsNotice(const Pair& p) { return p[0] == kFailedMarker && p[1] != kFailedMarker; }

Pair Notice(const MinMaxState& state) {
  const uint64_t ms = std::min<uint64_t>(state.waited_ms, UINT32_MAX);
  return {kFailedMarker, static_cast<uint32_t>(state.failed_rank) | ms << 32};
}

void Fail(MinMaxState& state, Status error, int peer, Duration timeout) {
  state.error = std::move(error);
  state.failed_rank = peer;
  state.waited_ms = static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0));
}

void Exchange(Transport& t, int peer, bool send, bool recv, MinMaxState& state, Duration timeout) {
  const bool failed = !state.error.ok();
  Pair incoming{};
  std::unique_ptr<Work> r;
  if (recv && !failed) {
    r = t.IRecv(peer, coll::kTagCheckLength, std::as_writable_bytes(std::span<uint64_t>(incoming)));
  }
  const Pair out = failed ? Notice(state) : state.pair;
  std::unique_ptr<Work> s;
  if (send) s = t.ISend(peer, coll::kTagCheckLength, std::as_bytes(std::span<const uint64_t>(out)));
  if (r) {
    Status received = coll::WaitRecv(*r, sizeof(Pair), timeout);
    if (!received.ok()) {
      Fail(state, std::move(received), peer, timeout);
    } else if (IsNotice(incoming)) {
      state.failed_rank = static_cast<int>(incoming[1] & UINT32_MAX);
      state.waited_ms = incoming[1] >> 32;
      state.error =
          TimeoutError(fmt::format("rank {} did not answer within {} ms (reported by rank {})",
                                   state.failed_rank, state.waited_ms, peer));
    } else {
      state.pair[0] = std::min(state.pair[0], incoming[0]);
      state.pair[1] = std::max(state.pair[1], incoming[1]);
    }
  }
  if (!s) return;
  if (!failed && !state.error.ok()) return;  // the partner will not take it: abandon the send
  Status sent = s->Wait(timeout);
  if (!sent.ok() && state.error.ok()) Fail(state, std::move(sent), peer, timeout);
}

void MinMax(Transport& t, MinMaxState& state, Duration timeout) {
  const int n = t.size();
  const int r = t.rank();
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  int vr = r >= 2 * rem ? r - rem : (r % 2 == 1 ? r / 2 : -1);
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      Exchange(t, r + 1, /*send=*/true, /*recv=*/false, state, timeout);
    } else {
      Exchange(t, r - 1, /*send=*/false, /*recv=*/true, state, timeout);
    }
  }
  if (vr >= 0) {
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner = vr ^ mask;
      const int peer = partner < rem ? 2 * partner + 1 : partner + rem;
      Exchange(t, peer, /*send=*/true, /*recv=*/true, state, timeout);
    }
  }
  if (r < 2 * rem) {
    if (r % 2 == 1) {
      Exchange(t, r - 1, /*send=*/true, /*recv=*/false, state, timeout);
    } else {
      // The final pair replaces this rank's own: receive into a neutral one.
      state.pair = {kFailedMarker, 0};
      Exchange(t, r + 1, /*send=*/false, /*recv=*/true, state, timeout);
    }
  }
}

}  // namespace

Status CheckSameLength(Transport& t, uint64_t count, std::string_view what, Duration timeout) {
  if (t.size() == 1) return Status::Ok();
  MinMaxState state;
  state.pair = {count, count};
  MinMax(t, state, timeout);
  if (!state.error.ok()) return state.error.Annotate(fmt::format("{}: length check", what));
  if (state.pair[0] != state.pair[1]) {
    return InvalidArgumentError(
        fmt::format("{}: ranks disagree on the length: smallest {}, largest {} elements", what,
                    state.pair[0], state.pair[1]));
  }
  return Status::Ok();
}

}  // namespace frugal
