// Barrier: the dissemination algorithm (Hensgen, Finkel and Manber 1988).
//
// In round k (k = 0, 1, ... while 2^k < n) rank r sends an empty message to (r + 2^k) mod n and
// waits for one from (r - 2^k) mod n. After round k every rank has heard, directly or through
// others, from the 2^(k+1) - 1 ranks before it, so after ceil(log2 n) rounds from all of them:
// no rank leaves before every rank has entered. The sources of the rounds are distinct, so one
// tag serves all rounds and consecutive barriers.
#include "collectives/internal.h"

namespace frugal {

Status Barrier(Transport& t, const CollectiveOptions& options) {
  const int n = t.size();
  const int r = t.rank();
  for (int distance = 1; distance < n; distance <<= 1) {
    const int to = coll::Mod(r + distance, n);
    const int from = coll::Mod(r - distance, n);
    std::unique_ptr<Work> recv = t.IRecv(from, coll::kTagBarrier, {});
    std::unique_ptr<Work> send = t.ISend(to, coll::kTagBarrier, {});
    Status status = coll::WaitRecv(*recv, 0, options.timeout);
    if (status.ok()) status = send->Wait(options.timeout);
    if (!status.ok()) return status.Annotate("barrier");
  }
  return Status::Ok();
}

}  // namespace frugal
