// In-process transport: ranks are threads of one process, messages are copied between their
// mailboxes. It has the semantics of transport.h (non-overtaking, posted-order matching, any
// source, probe, split) and is the reference implementation used by tier-1 tests.
//
// Ownership: an InProcWorld owns the shared mailboxes; transports made by Connect() (and their
// splits) keep it alive. Each transport is owned by one thread, as every Transport.
// Faults for tests: a rank that never calls into its transport makes its peers' waits time out,
// naming it.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal {

struct InProcOptions {
  // Ranks per emulated host for hostname(): rank r reports "inproc<r / ranks_per_host>".
  // 0 puts every rank on one host.
  int ranks_per_host = 0;
};

class InProcWorld {
 public:
  InProcWorld(int size, InProcOptions options = {});
  ~InProcWorld();
  InProcWorld(const InProcWorld&) = delete;
  InProcWorld& operator=(const InProcWorld&) = delete;

  int size() const;
  // The transport of `rank`; call once per rank.
  std::unique_ptr<Transport> Connect(int rank);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Runs `fn` on `size` threads, one per rank, each with its own transport of a fresh world, and
// returns the Status of every rank. An exception thrown by `fn` becomes a kInternal status.
std::vector<Status> RunRanks(int size, const std::function<Status(Transport&)>& fn,
                             InProcOptions options = {});

}  // namespace frugal
