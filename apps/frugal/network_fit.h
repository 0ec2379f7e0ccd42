// The network of a `frugal bench allreduce --json` record: alpha (latency per message), beta
// (seconds per byte) and gamma (reduction, seconds per byte), as `frugal cost` and `frugal
// simulate` take them with --fit FILE.
#pragma once

#include <string>

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

}  // namespace frugal::apps
