// CheckSameLength: a recursive-doubling all-reduce of the pair (min, max) of the ranks' counts.
//
// Let p be the largest power of two <= n and rem = n - p. Pre-step: among the first 2*rem ranks,
// each even rank r sends its pair to r + 1 and sits out; the odd ones fold it into theirs. The p
// remaining ranks get virtual ranks vr (r / 2 for the odd ranks below 2*rem, r - rem above) and
// for mask = 1, 2, ..., p/2 exchange their pair with virtual rank vr ^ mask, keeping the
// element-wise (min, max). Post-step: each odd rank below 2*rem sends the final pair back to
// r - 1. min and max are exact, so every rank holds the same (smallest, largest) and, if they
// differ, every rank returns the same kInvalidArgument.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "collectives/internal.h"

namespace frugal {
namespace {

using Pair = std::array<uint64_t, 2>;  // (min, max)

Status ExchangePair(Transport& t, int peer, bool send, bool recv, Pair& pair, Duration timeout) {
  Pair incoming{};
  std::unique_ptr<Work> r;
  if (recv) {
    r = t.IRecv(peer, coll::kTagCheckLength, std::as_writable_bytes(std::span<uint64_t>(incoming)));
  }
  if (send) {
    FRUGAL_RETURN_IF_ERROR(
        t.ISend(peer, coll::kTagCheckLength, std::as_bytes(std::span<const uint64_t>(pair)))
            ->Wait(timeout));
  }
  if (recv) {
    FRUGAL_RETURN_IF_ERROR(coll::WaitRecv(*r, sizeof(Pair), timeout));
    pair[0] = std::min(pair[0], incoming[0]);
    pair[1] = std::max(pair[1], incoming[1]);
  }
  return Status::Ok();
}

Status MinMax(Transport& t, Pair& pair, Duration timeout) {
  const int n = t.size();
  const int r = t.rank();
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  int vr = r >= 2 * rem ? r - rem : (r % 2 == 1 ? r / 2 : -1);
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      FRUGAL_RETURN_IF_ERROR(ExchangePair(t, r + 1, true, false, pair, timeout));
    } else {
      FRUGAL_RETURN_IF_ERROR(ExchangePair(t, r - 1, false, true, pair, timeout));
    }
  }
  if (vr >= 0) {
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner = vr ^ mask;
      const int peer = partner < rem ? 2 * partner + 1 : partner + rem;
      FRUGAL_RETURN_IF_ERROR(ExchangePair(t, peer, true, true, pair, timeout));
    }
  }
  if (r < 2 * rem) {
    if (r % 2 == 1) {
      FRUGAL_RETURN_IF_ERROR(ExchangePair(t, r - 1, true, false, pair, timeout));
    } else {
      // The final pair replaces this rank's own: receive into a fresh pair.
      Pair final_pair = {UINT64_MAX, 0};
      FRUGAL_RETURN_IF_ERROR(ExchangePair(t, r + 1, false, true, final_pair, timeout));
      pair = final_pair;
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckSameLength(Transport& t, uint64_t count, std::string_view what, Duration timeout) {
  if (t.size() == 1) return Status::Ok();
  Pair pair = {count, count};
  Status status = MinMax(t, pair, timeout);
  if (!status.ok()) return status.Annotate(fmt::format("{}: length check", what));
  if (pair[0] != pair[1]) {
    return InvalidArgumentError(
        fmt::format("{}: ranks disagree on the length: smallest {}, largest {} elements", what,
                    pair[0], pair[1]));
  }
  return Status::Ok();
}

}  // namespace frugal
