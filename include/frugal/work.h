// Work: the one asynchronous handle type of frugal (as c10d's Work).
//
// A Work stands for an operation that was started and may not have finished: a non-blocking send
// or receive, an engine request. Wait(timeout) blocks until it finishes or the timeout expires and
// returns the operation's Status: OK, the operation's own error, or kTimeout naming the peer(s)
// that did not answer. A Work whose Wait returned kTimeout is finished as far as the caller is
// concerned; the transport it came from should be considered broken.
//
// Thread safety: a Work is used by the thread that owns the transport that made it.
// Lifetime: the buffers given to the operation must stay valid until the Work has completed, its
// Wait has returned kTimeout, or it has been destroyed, whichever comes first; after that the
// operation never reads or writes them again. An operation given up that way (timed out, or
// destroyed unfinished) is cancelled where the transport can; otherwise the transport keeps it
// going on its own copy of the data (MPI) or waits for a copy already under way to end (in-process
// transport), without blocking for longer than that copy.
#pragma once

#include <chrono>
#include <cstddef>

#include "frugal/status.h"

namespace frugal {

using Duration = std::chrono::milliseconds;
inline constexpr Duration kDefaultTimeout = std::chrono::seconds(60);

class Work {
 public:
  virtual ~Work() = default;

  // Blocks until the operation has finished or `timeout` has passed.
  virtual Status Wait(Duration timeout) = 0;

  // Non-blocking; true once Wait would return without blocking.
  virtual bool IsCompleted() = 0;

  // For receives, after a successful Wait: the rank the message came from and its size in bytes.
  // For sends: the destination and the bytes sent.
  virtual int peer() const = 0;
  virtual size_t bytes() const = 0;
};

}  // namespace frugal
