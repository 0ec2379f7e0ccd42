// The network of a `frugal bench allreduce --json` record: alpha (latency per message), beta
// (seconds per byte) and gamma (reduction, seconds per byte), as `frugal cost` and `frugal
// simulate` take them with --fit FILE; and the rate of a gossip round's flows through a host's
// NIC from a `frugal bench round --json` record (`frugal simulate --fit-round FILE`); and the share
// of a NIC's rate each direction keeps while both are busy, from a `frugal bench exchange --json`
// record (`frugal simulate --fit-duplex FILE`); and how much slower the compute runs beside an
// all-reduce, from a `frugal bench contention --json` record (`frugal simulate --fit-contention
// FILE`).
#pragma once

#include <string>
#include <vector>

#include "frugal/simulate.h"
#include "frugal/status.h"

namespace frugal::apps {

struct NetworkFit {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
  double gamma_s_per_byte = 0;
};

// The first record of `path` with alpha_us and beta_s_per_byte. kNotFound when the file cannot
// be read; kInvalidArgument when no record has them or their values are not finite and >= 0
// (beta > 0).
StatusOr<NetworkFit> ReadNetworkFit(const std::string& path);

struct RoundFit {
  double round_bytes_per_s = 0;
  double copy_bytes_per_s = 0;  // 0: the record has no copy rate (copies are free)
};

// round_bytes_per_s and copy_bytes_per_s of the `frugal bench round` record of `path` for the
// graph named `topology` (as the record names it: "ring", "onepeer-exp", ...) over `ranks` ranks,
// its rounds back to back (not --lockstep, as training runs them); of several, the one of the
// largest message. kNotFound when the file cannot be read; kInvalidArgument when no record
// matches, its round rate is not finite and > 0, or its copy rate is not finite and >= 0.
StatusOr<RoundFit> ReadRoundFit(const std::string& path, const std::string& topology, int ranks);

// The duplex shares of the `frugal bench exchange` records of `path` with mode "both", one per
// message size, ascending (whatever their rank count: a share measured with a server's W workers
// stands for any W; of two records of one size, the later): the slower one-way time over the time
// of both directions at once (both_over_one_way inverted), at most 1. kNotFound when the file
// cannot be read; kInvalidArgument when no such record is there or a both_over_one_way is not
// finite and > 0.
StatusOr<std::vector<DuplexPoint>> ReadDuplexFit(const std::string& path);

// The slowdown of the `frugal bench contention` record of `path` with the largest all-reduce
// (whatever its rank count and model: the hosts' property), at least 1 (a compute measured
// faster beside the all-reduce is not sped up). With `topology` (a gossip graph's name, as
// TopologySpecName spells it) the record of gossip rounds on that graph with the largest message
// when the file has one (`frugal bench contention --topology`), the all-reduce's otherwise.
// kNotFound when the file cannot be read; kInvalidArgument when no such record is there or its
// slowdown is not finite and > 0.
StatusOr<double> ReadContentionFit(const std::string& path, const std::string& topology = "");

}  // namespace frugal::apps
