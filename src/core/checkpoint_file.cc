// The checkpoint container (see checkpoint_file.h) and atomic file writes.
//
// Decoding never trusts a length before comparing it with the bytes that remain: the record count
// is bounded by what the remaining bytes could hold (a record takes at least 14 bytes), a name or
// data length larger than the rest is "truncated", and the CRC over the whole file is checked
// before any record is parsed, so that a flipped bit anywhere is reported as corruption rather
// than as whatever field it happens to hit.
#include "frugal/checkpoint_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "frugal/crc.h"

namespace frugal {
namespace {

constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'C', 'K'};
constexpr size_t kHeaderBytes = 24;
constexpr size_t kTrailerBytes = 4;
constexpr size_t kMinRecordBytes = 4 + 1 + 1 + 8;

void AppendBytes(std::vector<std::byte>& out, const void* data, size_t size) {
  const size_t at = out.size();
  out.resize(at + size);
  if (size > 0) std::memcpy(out.data() + at, data, size);
}

template <typename T>
void Append(std::vector<std::byte>& out, T value) {
  AppendBytes(out, &value, sizeof(T));
}

template <typename T>
T Load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

std::string_view KindName(CheckpointFileKind kind) {
  switch (kind) {
    case CheckpointFileKind::kManifest:
      return "manifest";
    case CheckpointFileKind::kRankState:
      return "rank state";
  }
  return "unknown";
}

std::string Errno(int error) { return std::strerror(error); }

}  // namespace

std::vector<std::byte> EncodeCheckpointFile(CheckpointFileKind kind, const StateRecords& records) {
  std::vector<std::byte> out;
  size_t total = kHeaderBytes + kTrailerBytes;
  for (const auto& [name, record] : records)
    total += kMinRecordBytes + name.size() + record.data.size();
  out.reserve(total);
  AppendBytes(out, kMagic, sizeof(kMagic));
  Append<uint32_t>(out, kCheckpointFileVersion);
  Append<uint32_t>(out, static_cast<uint32_t>(kind));
  Append<uint64_t>(out, records.size());
  for (const auto& [name, record] : records) {
    Append<uint32_t>(out, static_cast<uint32_t>(name.size()));
    AppendBytes(out, name.data(), name.size());
    Append<uint8_t>(out, static_cast<uint8_t>(record.type));
    Append<uint64_t>(out, record.data.size());
    AppendBytes(out, record.data.data(), record.data.size());
  }
  Append<uint32_t>(out, Crc32(out));
  return out;
}

StatusOr<StateRecords> DecodeCheckpointFile(std::span<const std::byte> bytes,
                                            CheckpointFileKind kind) {
  if (bytes.size() < kHeaderBytes + kTrailerBytes) {
    return MalformedError(fmt::format("truncated: {} bytes, a checkpoint file has at least {}",
                                      bytes.size(), kHeaderBytes + kTrailerBytes));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return MalformedError("not a frugal checkpoint file (bad magic)");
  }
  const size_t body = bytes.size() - kTrailerBytes;
  const uint32_t stored_crc = Load<uint32_t>(bytes.data() + body);
  const uint32_t crc = Crc32(bytes.first(body));
  if (crc != stored_crc) {
    return MalformedError(fmt::format(
        "corrupted: CRC of the content is {:08x}, the file says {:08x}", crc, stored_crc));
  }
  const uint32_t version = Load<uint32_t>(bytes.data() + 8);
  if (version != kCheckpointFileVersion) {
    return MalformedError(fmt::format("format version {}, this build reads version {}", version,
                                      kCheckpointFileVersion));
  }
  const uint32_t file_kind = Load<uint32_t>(bytes.data() + 12);
  if (file_kind != static_cast<uint32_t>(kind)) {
    return MalformedError(fmt::format("a {} file, expected a {} file",
                                      KindName(static_cast<CheckpointFileKind>(file_kind)),
                                      KindName(kind)));
  }
  const uint64_t count = Load<uint64_t>(bytes.data() + 16);
  size_t at = kHeaderBytes;
  if (count > (body - at) / kMinRecordBytes) {
    return MalformedError(fmt::format("truncated: {} records announced, {} bytes hold at most {}",
                                      count, body - at, (body - at) / kMinRecordBytes));
  }
  StateRecords records;
  std::string previous;
  for (uint64_t i = 0; i < count; ++i) {
    if (body - at < 4) return MalformedError(fmt::format("truncated: record {} has no name", i));
    const uint32_t name_length = Load<uint32_t>(bytes.data() + at);
    at += 4;
    if (name_length == 0 || name_length > kMaxStateNameBytes) {
      return MalformedError(fmt::format("record {}: name length {} (accepted: 1 to {})", i,
                                        name_length, kMaxStateNameBytes));
    }
    if (body - at < name_length + 9) {
      return MalformedError(
          fmt::format("truncated: record {} needs {} bytes for its name and "
                      "type, {} remain",
                      i, name_length + 9, body - at));
    }
    std::string name(reinterpret_cast<const char*>(bytes.data() + at), name_length);
    at += name_length;
    if (name.find('\0') != std::string::npos) {
      return MalformedError(fmt::format("record {}: the name holds a NUL byte", i));
    }
    if (i > 0 && !(previous < name)) {
      return MalformedError(fmt::format(
          "record '{}' is out of order (after '{}'): names must ascend", name, previous));
    }
    const auto type = static_cast<StateType>(Load<uint8_t>(bytes.data() + at));
    at += 1;
    const size_t size = StateTypeSize(type);
    if (size == 0) {
      return MalformedError(fmt::format("field '{}': unknown type {}", name,
                                        static_cast<int>(static_cast<uint8_t>(type))));
    }
    const uint64_t length = Load<uint64_t>(bytes.data() + at);
    at += 8;
    if (length > body - at) {
      return MalformedError(
          fmt::format("truncated: field '{}' needs {} bytes, {} remain", name, length, body - at));
    }
    if (length % size != 0) {
      return MalformedError(fmt::format("field '{}': {} bytes is not a whole number of {} values",
                                        name, length, StateTypeName(type)));
    }
    StateRecord record;
    record.type = type;
    record.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                       bytes.begin() + static_cast<std::ptrdiff_t>(at + length));
    at += length;
    previous = name;
    records.emplace_hint(records.end(), std::move(name), std::move(record));
  }
  if (at != body) {
    return MalformedError(fmt::format("{} bytes follow the last record", body - at));
  }
  return records;
}

Status WriteFileAtomically(const std::string& path, std::span<const std::byte> bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(fmt::format("cannot create {}: {}", tmp, Errno(errno)));
  auto fail = [&](std::string what) {
    const int error = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return IoError(fmt::format("{} {}: {}", what, tmp, Errno(error)));
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("cannot sync");
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return IoError(fmt::format("cannot close {}: {}", tmp, Errno(error)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return IoError(fmt::format("cannot rename {} to {}: {}", tmp, path, Errno(error)));
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return IoError(fmt::format("cannot open directory {}: {}", dir, Errno(errno)));
  const int synced = ::fsync(dir_fd);
  const int error = errno;
  ::close(dir_fd);
  if (synced != 0) return IoError(fmt::format("cannot sync directory {}: {}", dir, Errno(error)));
  return Status::Ok();
}

StatusOr<std::vector<std::byte>> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) return NotFoundError(fmt::format("{} does not exist", path));
    return IoError(fmt::format("cannot open {}: {}", path, Errno(error)));
  }
  std::vector<std::byte> out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  std::byte chunk[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      return IoError(fmt::format("cannot read {}: {}", path, Errno(error)));
    }
    if (n == 0) break;
    out.insert(out.end(), chunk, chunk + n);
  }
  ::close(fd);
  return out;
}

}  // namespace frugal
