// Timeline: what each rank did when, as a Chrome trace (the JSON Trace Event Format that
// chrome://tracing and Perfetto open). Each rank is a process row ("rank 0", "rank 1", ...);
// inside it each named row is a thread row: "compute" (forward, backward, step), "engine" (the
// engine thread's negotiation cycles and bucket reductions) and one row per tensor ("tensor
// fc.weight": queue, negotiate, compress, communicate, decompress; or, for a gradient the step
// keeps, as gossip's, a zero-length "ready" when backward produced it).
//
// Times are microseconds since the rank's origin; Engine::Start sets the origins of all ranks
// right after a barrier, so rows of different ranks line up to within the barrier's latency.
// Thread safe: any thread may add events. Memory: at most `max_events` events are kept (later
// ones are counted in dropped()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"
#include "frugal/timer.h"
#include "frugal/transport.h"

namespace frugal {

class Timeline {
 public:
  explicit Timeline(int rank, size_t max_events = size_t{1} << 21);

  int rank() const { return rank_; }
  void set_origin(Clock::time_point origin);
  Clock::time_point origin() const;

  // A complete event ("ph": "X") named `name` on `row`, from begin to end. `args_json`, if not
  // empty, is a JSON object shown with the event ({"bytes": 1024}).
  void Span(std::string_view row, std::string_view name, Clock::time_point begin,
            Clock::time_point end, std::string_view args_json = {});

  size_t events() const;
  size_t dropped() const;

  // This rank's events and the metadata naming its process and rows, as comma-separated JSON
  // objects (the elements of a traceEvents array).
  std::string EventsJson() const;

  // Collective over `t`: gathers every rank's EventsJson and returns the whole trace
  // ({"traceEvents": [...], "displayTimeUnit": "ms"}) on every rank.
  StatusOr<std::string> Gather(Transport& t, Duration timeout) const;

 private:
  struct Event {
    int row = 0;
    std::string name;
    int64_t begin_us = 0;
    int64_t duration_us = 0;
    std::string args;
  };

  const int rank_;
  const size_t max_events_;
  mutable std::mutex mutex_;
  Clock::time_point origin_;
  std::map<std::string, int, std::less<>> rows_;
  std::vector<std::string> row_names_;
  std::vector<Event> events_;
  size_t dropped_ = 0;
};

// Joins per-rank EventsJson strings into one trace document.
std::string ChromeTrace(std::span<const std::string> events_per_rank);

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(std::string_view text);

}  // namespace frugal
