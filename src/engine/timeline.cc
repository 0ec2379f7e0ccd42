// Chrome trace of a rank's activity.
//
// Span() stores an event with its row index (rows are numbered in order of first use) and its
// times in microseconds since the origin. EventsJson() writes, for pid = rank, a "process_name"
// metadata event ("rank r"), a "thread_name" and a "thread_sort_index" per row (tid = row index,
// so rows keep the order in which they appeared: "compute" and "engine" first when they are used
// first), then one "ph":"X" event per span. Gather() all-gathers these strings with Allgatherv
// and ChromeTrace() joins them into {"traceEvents":[...],"displayTimeUnit":"ms"}.
#include "frugal/timeline.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "frugal/collectives.h"

namespace frugal {

std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

Timeline::Timeline(int rank, size_t max_events)
    : rank_(rank), max_events_(max_events), origin_(Clock::now()) {}

void Timeline::set_origin(Clock::time_point origin) {
  std::lock_guard<std::mutex> lock(mutex_);
  origin_ = origin;
}

Clock::time_point Timeline::origin() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return origin_;
}

void Timeline::Span(std::string_view row, std::string_view name, Clock::time_point begin,
                    Clock::time_point end, std::string_view args_json) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  auto it = rows_.find(row);
  if (it == rows_.end()) {
    it = rows_.emplace(std::string(row), static_cast<int>(row_names_.size())).first;
    row_names_.emplace_back(row);
  }
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  Event event;
  event.row = it->second;
  event.name = std::string(name);
  event.begin_us = duration_cast<microseconds>(begin - origin_).count();
  event.duration_us = std::max<int64_t>(0, duration_cast<microseconds>(end - begin).count());
  event.args = std::string(args_json);
  events_.push_back(std::move(event));
}

size_t Timeline::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

size_t Timeline::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

std::string Timeline::EventsJson() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out = fmt::format(
      R"({{"name":"process_name","ph":"M","pid":{0},"tid":0,"args":{{"name":"rank {0}"}}}},)"
      R"({{"name":"process_sort_index","ph":"M","pid":{0},"tid":0,"args":{{"sort_index":{0}}}}})",
      rank_);
  for (size_t i = 0; i < row_names_.size(); ++i) {
    out += fmt::format(
        R"(,{{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":{}}}}})"
        R"(,{{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
        rank_, i, JsonQuote(row_names_[i]), rank_, i, i);
  }
  for (const Event& e : events_) {
    out += fmt::format(R"(,{{"name":{},"ph":"X","pid":{},"tid":{},"ts":{},"dur":{})",
                       JsonQuote(e.name), rank_, e.row, e.begin_us, e.duration_us);
    if (!e.args.empty()) out += fmt::format(R"(,"args":{})", e.args);
    out += "}";
  }
  return out;
}

std::string ChromeTrace(std::span<const std::string> events_per_rank) {
  std::string out = "{\"traceEvents\":[";
  bool first = true;
  for (const std::string& events : events_per_rank) {
    if (events.empty()) continue;
    if (!first) out += ",\n";
    out += events;
    first = false;
  }
  out += "],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

StatusOr<std::string> Timeline::Gather(Transport& t, Duration timeout) const {
  const std::string mine = EventsJson();
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  CollectiveOptions options;
  options.timeout = timeout;
  FRUGAL_RETURN_IF_ERROR(Allgatherv(t,
                                    std::as_bytes(std::span<const char>(mine.data(), mine.size())),
                                    all, sizes, options)
                             .Annotate("timeline gather"));
  std::vector<std::string> parts;
  size_t offset = 0;
  for (size_t size : sizes) {
    if (offset + size > all.size()) return MalformedError("timeline gather: sizes exceed data");
    parts.emplace_back(reinterpret_cast<const char*>(all.data()) + offset, size);
    offset += size;
  }
  return ChromeTrace(parts);
}

}  // namespace frugal
