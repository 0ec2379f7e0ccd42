#include "bench_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>

namespace frugal::bench {

StatusOr<size_t> ParseByteSize(std::string_view text) {
  const std::string_view original = text;
  auto invalid = [&] {
    return InvalidArgumentError(fmt::format(
        "invalid size '{}' (expected a number of bytes with an optional K, M or G suffix, e.g. "
        "4K, 64M)",
        original));
  };
  size_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == begin) return invalid();
  std::string suffix(ptr, end);
  std::transform(suffix.begin(), suffix.end(), suffix.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  int shift = 0;
  if (suffix.empty() || suffix == "B") {
    shift = 0;
  } else if (suffix == "K" || suffix == "KB" || suffix == "KIB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "MB" || suffix == "MIB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "GB" || suffix == "GIB") {
    shift = 30;
  } else {
    return invalid();
  }
  if (shift > 0 && value > (SIZE_MAX >> shift)) return invalid();
  return value << shift;
}

StatusOr<std::vector<size_t>> ParseByteSizeList(std::string_view text) {
  FRUGAL_ASSIGN_OR_RETURN(std::vector<std::string> items, ParseNameList(text));
  std::vector<size_t> sizes;
  for (const auto& item : items) {
    FRUGAL_ASSIGN_OR_RETURN(size_t size, ParseByteSize(item));
    sizes.push_back(size);
  }
  return sizes;
}

StatusOr<std::vector<std::string>> ParseNameList(std::string_view text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) {
      item.remove_prefix(1);
    }
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) {
      item.remove_suffix(1);
    }
    if (item.empty()) {
      return InvalidArgumentError(fmt::format("empty element in the list '{}'", text));
    }
    items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

std::string FormatBytes(size_t bytes) {
  if (bytes >= (size_t{1} << 30) && bytes % (size_t{1} << 30) == 0) {
    return fmt::format("{}G", bytes >> 30);
  }
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) {
    return fmt::format("{}M", bytes >> 20);
  }
  if (bytes >= (size_t{1} << 10) && bytes % (size_t{1} << 10) == 0) {
    return fmt::format("{}K", bytes >> 10);
  }
  return fmt::format("{}", bytes);
}

double Median(std::vector<double> values) {
  FRUGAL_CHECK(!values.empty(), "median of no values");
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

double Quantile(std::vector<double> values, double q) {
  FRUGAL_CHECK(!values.empty(), "quantile of no values");
  FRUGAL_CHECK(q >= 0 && q <= 1, "quantile ", q, " outside [0, 1]");
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(position);
  if (below + 1 >= values.size()) return values.back();
  const double fraction = position - static_cast<double>(below);
  return values[below] + fraction * (values[below + 1] - values[below]);
}

Status MaxToRoot(Transport& t, std::vector<double>& values, Duration timeout) {
  if (t.rank() != 0) {
    return Send(t, 0, kBenchTag, AsBytes(std::span<const double>(values)), timeout);
  }
  std::vector<double> other(values.size());
  for (int r = 1; r < t.size(); ++r) {
    auto recv = t.IRecv(r, kBenchTag, AsWritableBytes(std::span<double>(other)));
    FRUGAL_RETURN_IF_ERROR(recv->Wait(timeout));
    if (recv->bytes() != other.size() * sizeof(double)) {
      return MalformedError(
          fmt::format("rank {} reported {} bytes of results where {} were expected", r,
                      recv->bytes(), other.size() * sizeof(double)));
    }
    for (size_t i = 0; i < values.size(); ++i) values[i] = std::max(values[i], other[i]);
  }
  return Status::Ok();
}

Table::Table(std::vector<std::string> header, std::vector<bool> left_aligned)
    : header_(std::move(header)), left_(std::move(left_aligned)) {
  left_.resize(header_.size(), false);
}

void Table::AddRow(std::vector<std::string> cells) {
  FRUGAL_CHECK_EQ(cells.size(), header_.size(), "table row width");
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> width(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) out += "  ";
      out += left_[c] ? fmt::format("{:<{}}", cells[c], width[c])
                      : fmt::format("{:>{}}", cells[c], width[c]);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header_);
  size_t total = 0;
  for (size_t w : width) total += w;
  out += std::string(total + 2 * (width.size() - 1), '-') + "\n";
  for (const auto& row : rows_) out += line(row);
  return out;
}

Status CheckWritable(const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return IoError(fmt::format("cannot write '{}'", path));
  return Status::Ok();
}

Status WriteJsonLines(const std::string& path, const std::vector<nlohmann::json>& records) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return IoError(fmt::format("cannot write '{}'", path));
  for (const auto& record : records) out << record.dump() << "\n";
  out.flush();
  if (!out) return IoError(fmt::format("writing '{}' failed", path));
  return Status::Ok();
}

std::string FormatMicros(double us) {
  return us < 10     ? fmt::format("{:.2f}", us)
         : us < 1000 ? fmt::format("{:.1f}", us)
                     : fmt::format("{:.0f}", us);
}

}  // namespace frugal::bench
