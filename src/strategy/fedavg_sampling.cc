// FedAvg's client sampling and the assignment of clients to workers (see fedavg.h).
//
// SampleClients: a partial Fisher-Yates shuffle of the ids 0..K-1 with the stream (seed,
// kAnyRank, round, "fedavg/clients"): for i = 0..m-1, swap ids[i] with ids[i + Below(K - i)];
// the first m ids are a uniform sample without replacement, returned sorted. The stream leaves the
// rank out, so every rank draws the same clients without sending them.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "frugal/check.h"
#include "frugal/fedavg.h"
#include "frugal/random.h"

namespace frugal {

int64_t ClientsPerRound(int64_t clients, double fraction) {
  FRUGAL_CHECK_GT(clients, 0);
  const int64_t m = std::llround(fraction * static_cast<double>(clients));
  return std::clamp<int64_t>(m, 1, clients);
}

std::vector<int64_t> SampleClients(uint64_t seed, int64_t round, int64_t clients, double fraction) {
  const int64_t m = ClientsPerRound(clients, fraction);
  std::vector<int64_t> ids(static_cast<size_t>(clients));
  std::iota(ids.begin(), ids.end(), int64_t{0});
  RngStream rng(RngKey{seed, kAnyRank, static_cast<uint64_t>(round), TensorId("fedavg/clients")});
  for (int64_t i = 0; i < m; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(clients - i)));
    std::swap(ids[static_cast<size_t>(i)], ids[static_cast<size_t>(j)]);
  }
  ids.resize(static_cast<size_t>(m));
  std::sort(ids.begin(), ids.end());
  return ids;
}

int ClientRank(int64_t client, int workers) {
  FRUGAL_CHECK_GT(workers, 0);
  return static_cast<int>(client % workers);
}

}  // namespace frugal
