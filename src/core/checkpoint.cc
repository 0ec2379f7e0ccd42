// Checkpoint directories (see checkpoint.h).
//
// The manifest is a kManifest checkpoint file with the fields
//   step (u64), world_size (u64), identity/<key> (bytes: the value),
//   file/<rank>/name (bytes), file/<rank>/bytes (u64), file/<rank>/crc (u64),
// read back with a strict StateLoader, so a manifest with a missing, extra or mistyped field is
// refused naming the field. A rank's file carries meta/rank, meta/world_size and meta/step, which
// must agree with the manifest that lists it: a file copied from another rank or checkpoint is
// refused even when its CRC is intact.
#include "frugal/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "frugal/checkpoint_file.h"
#include "frugal/crc.h"

namespace frugal {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kCheckpointPrefix = "ckpt-";

std::string RankFileName(int rank) { return fmt::format("rank-{:05d}.state", rank); }

std::vector<std::byte> StringBytes(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

std::string BytesString(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// The step of a directory named ckpt-<digits>, or -1.
int64_t StepOfName(std::string_view name) {
  if (!name.starts_with(kCheckpointPrefix)) return -1;
  name.remove_prefix(kCheckpointPrefix.size());
  uint64_t step = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), step);
  if (ec != std::errc() || end != name.data() + name.size() || name.empty()) return -1;
  return static_cast<int64_t>(step);
}

// Every ckpt-<step> directory under `dir`, by step.
std::vector<std::pair<uint64_t, fs::path>> CheckpointDirs(const std::string& dir) {
  std::vector<std::pair<uint64_t, fs::path>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = StepOfName(entry.path().filename().string());
    if (step >= 0 && entry.is_directory(ec)) out.emplace_back(step, entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool IsCommitted(const fs::path& checkpoint) {
  std::error_code ec;
  return fs::is_regular_file(checkpoint / kManifestName, ec);
}

// Removes a checkpoint's directory, its manifest first.
Status RemoveCheckpoint(const fs::path& checkpoint) {
  std::error_code ec;
  fs::remove(checkpoint / kManifestName, ec);
  if (!ec) fs::remove_all(checkpoint, ec);
  if (ec) return IoError(fmt::format("cannot remove {}: {}", checkpoint.string(), ec.message()));
  return Status::Ok();
}

StateRecords ManifestRecords(const CheckpointManifest& m) {
  StateSaver saver;
  uint64_t step = m.step;
  uint64_t world = static_cast<uint64_t>(m.world_size);
  saver.U64("step", step);
  saver.U64("world_size", world);
  {
    StateVisitor::Scope identity(saver, "identity");
    for (const auto& [key, value] : m.identity) {
      std::vector<std::byte> bytes = StringBytes(value);
      saver.Bytes(EscapeStateName(key), bytes);
    }
  }
  StateVisitor::Scope files(saver, "file");
  for (const CheckpointFile& f : m.files) {
    StateVisitor::Scope rank(saver, fmt::format("{:05d}", f.rank));
    std::vector<std::byte> name = StringBytes(f.name);
    uint64_t bytes = f.bytes;
    uint64_t crc = f.crc;
    saver.Bytes("name", name);
    saver.U64("bytes", bytes);
    saver.U64("crc", crc);
  }
  return saver.records();
}

StatusOr<CheckpointManifest> ManifestOf(const StateRecords& records) {
  StateLoader loader(records);
  CheckpointManifest m;
  uint64_t world = 0;
  loader.U64("step", m.step);
  loader.U64("world_size", world);
  if (!loader.ok()) return MalformedError(loader.status().message());
  if (world == 0 || world > (1u << 24)) {
    return MalformedError(fmt::format("field 'world_size' is {}", world));
  }
  m.world_size = static_cast<int>(world);
  {
    StateVisitor::Scope identity(loader, "identity");
    for (const std::string& key : loader.Children()) {
      std::vector<std::byte> value;
      loader.Bytes(EscapeStateName(key), value);
      m.identity.emplace_back(key, BytesString(value));
    }
  }
  {
    StateVisitor::Scope files(loader, "file");
    for (int r = 0; r < m.world_size && loader.ok(); ++r) {
      StateVisitor::Scope rank(loader, fmt::format("{:05d}", r));
      CheckpointFile f;
      f.rank = r;
      std::vector<std::byte> name;
      uint64_t crc = 0;
      loader.Bytes("name", name);
      loader.U64("bytes", f.bytes);
      loader.U64("crc", crc);
      f.name = BytesString(name);
      if (loader.ok() && (crc > UINT32_MAX || f.name != RankFileName(r))) {
        return MalformedError(
            fmt::format("field 'file/{:05d}' names '{}' with CRC {:x}", r, f.name, crc));
      }
      f.crc = static_cast<uint32_t>(crc);
      m.files.push_back(std::move(f));
    }
  }
  Status status = loader.Finish();
  if (!status.ok()) return MalformedError(status.message());
  return m;
}

StatusOr<CheckpointManifest> ReadManifest(const fs::path& checkpoint) {
  const std::string path = (checkpoint / kManifestName).string();
  auto bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status().Annotate("checkpoint");
  auto manifest = DecodeManifest(*bytes);
  if (!manifest.ok()) return manifest.status().Annotate("checkpoint " + path);
  return manifest;
}

}  // namespace

std::vector<std::byte> EncodeManifest(const CheckpointManifest& manifest) {
  return EncodeCheckpointFile(CheckpointFileKind::kManifest, ManifestRecords(manifest));
}

StatusOr<CheckpointManifest> DecodeManifest(std::span<const std::byte> bytes) {
  FRUGAL_ASSIGN_OR_RETURN(StateRecords records,
                          DecodeCheckpointFile(bytes, CheckpointFileKind::kManifest));
  return ManifestOf(records);
}

std::string CheckpointPath(const std::string& dir, uint64_t step) {
  return (fs::path(dir) / fmt::format("{}{:012d}", kCheckpointPrefix, step)).string();
}

StatusOr<CheckpointFile> WriteRankState(const std::string& dir, uint64_t step, int rank,
                                        int world_size, const StateRecords& state) {
  const fs::path checkpoint = CheckpointPath(dir, step);
  std::error_code ec;
  fs::create_directories(checkpoint, ec);
  if (ec) {
    return IoError(
        fmt::format("checkpoint: cannot create {}: {}", checkpoint.string(), ec.message()));
  }
  StateRecords records = state;
  StateSaver meta;
  {
    StateVisitor::Scope scope(meta, "meta");
    uint64_t r = static_cast<uint64_t>(rank);
    uint64_t n = static_cast<uint64_t>(world_size);
    meta.U64("rank", r);
    meta.U64("world_size", n);
    meta.U64("step", step);
  }
  for (auto& [name, record] : meta.records()) {
    if (!records.emplace(name, record).second) {
      return InternalError(fmt::format("checkpoint: state field '{}' is reserved", name));
    }
  }
  const std::vector<std::byte> bytes =
      EncodeCheckpointFile(CheckpointFileKind::kRankState, records);
  CheckpointFile file;
  file.rank = rank;
  file.name = RankFileName(rank);
  file.bytes = bytes.size();
  file.crc = Crc32(bytes);
  FRUGAL_RETURN_IF_ERROR(
      WriteFileAtomically((checkpoint / file.name).string(), bytes).Annotate("checkpoint"));
  return file;
}

Status CommitCheckpoint(const std::string& dir, const CheckpointManifest& manifest, int keep) {
  const fs::path checkpoint = CheckpointPath(dir, manifest.step);
  const std::vector<std::byte> bytes = EncodeManifest(manifest);
  FRUGAL_RETURN_IF_ERROR(
      WriteFileAtomically((checkpoint / kManifestName).string(), bytes).Annotate("checkpoint"));
  // Keep the newest `keep` committed checkpoints; drop uncommitted leftovers of older steps.
  std::vector<std::pair<uint64_t, fs::path>> dirs = CheckpointDirs(dir);
  int committed_newer = 0;
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    const auto& [step, path] = *it;
    if (step > manifest.step) continue;
    const bool committed = IsCommitted(path);
    if (committed && committed_newer < std::max(keep, 1)) {
      ++committed_newer;
      continue;
    }
    if (!committed && step == manifest.step) continue;
    FRUGAL_RETURN_IF_ERROR(RemoveCheckpoint(path).Annotate("checkpoint"));
  }
  return Status::Ok();
}

std::vector<uint64_t> CommittedSteps(const std::string& dir) {
  std::vector<uint64_t> steps;
  for (const auto& [step, path] : CheckpointDirs(dir)) {
    if (IsCommitted(path)) steps.push_back(step);
  }
  return steps;
}

StatusOr<CheckpointRef> FindCheckpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFoundError(fmt::format("checkpoint directory {} does not exist", dir));
  }
  fs::path chosen;
  if (IsCommitted(dir)) {
    chosen = dir;
  } else {
    const std::vector<uint64_t> steps = CommittedSteps(dir);
    if (steps.empty()) {
      return NotFoundError(
          fmt::format("no committed checkpoint in {} (no ckpt-*/{})", dir, kManifestName));
    }
    chosen = CheckpointPath(dir, steps.back());
  }
  CheckpointRef ref;
  ref.path = chosen.string();
  FRUGAL_ASSIGN_OR_RETURN(ref.manifest, ReadManifest(chosen));
  const int64_t named_step = StepOfName(chosen.filename().string());
  if (named_step >= 0 && static_cast<uint64_t>(named_step) != ref.manifest.step) {
    return MalformedError(fmt::format("checkpoint {}/{}: field 'step' is {}, the directory says {}",
                                      ref.path, kManifestName, ref.manifest.step, named_step));
  }
  return ref;
}

Status CheckIdentity(const CheckpointRef& checkpoint, int world_size,
                     const CheckpointIdentity& identity) {
  const std::string where = fmt::format("checkpoint {}/{}", checkpoint.path, kManifestName);
  const CheckpointManifest& m = checkpoint.manifest;
  if (m.world_size != world_size) {
    return InvalidArgumentError(fmt::format("{}: field 'world_size' is {}, this run has {}", where,
                                            m.world_size, world_size));
  }
  auto find = [](const CheckpointIdentity& in, const std::string& key) -> const std::string* {
    for (const auto& [k, v] : in) {
      if (k == key) return &v;
    }
    return nullptr;
  };
  for (const auto& [key, value] : identity) {
    const std::string* saved = find(m.identity, key);
    if (saved == nullptr) {
      return InvalidArgumentError(
          fmt::format("{}: field 'identity/{}' is missing (this run has '{}')", where, key, value));
    }
    if (*saved != value) {
      return InvalidArgumentError(fmt::format("{}: field 'identity/{}' is '{}', this run has '{}'",
                                              where, key, *saved, value));
    }
  }
  for (const auto& [key, value] : m.identity) {
    if (find(identity, key) == nullptr) {
      return InvalidArgumentError(
          fmt::format("{}: field 'identity/{}' ('{}') is not part of this run", where, key, value));
    }
  }
  return Status::Ok();
}

StatusOr<StateRecords> ReadRankState(const CheckpointRef& checkpoint, int rank) {
  const CheckpointManifest& m = checkpoint.manifest;
  if (rank < 0 || rank >= m.world_size) {
    return InvalidArgumentError(fmt::format("checkpoint {}: rank {} of a checkpoint of {} ranks",
                                            checkpoint.path, rank, m.world_size));
  }
  const CheckpointFile& f = m.files[static_cast<size_t>(rank)];
  const std::string path = (fs::path(checkpoint.path) / f.name).string();
  const std::string where = "checkpoint " + path;
  auto bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status().Annotate("checkpoint");
  if (bytes->size() != f.bytes) {
    return MalformedError(fmt::format("{}: truncated or extended: {} bytes, the manifest says {}",
                                      where, bytes->size(), f.bytes));
  }
  const uint32_t crc = Crc32(*bytes);
  if (crc != f.crc) {
    return MalformedError(
        fmt::format("{}: corrupted: CRC {:08x}, the manifest says {:08x}", where, crc, f.crc));
  }
  auto records = DecodeCheckpointFile(*bytes, CheckpointFileKind::kRankState);
  if (!records.ok()) return records.status().Annotate(where);
  uint64_t file_rank = 0;
  uint64_t file_world = 0;
  uint64_t file_step = 0;
  {
    StateLoader loader(*records);
    StateVisitor::Scope scope(loader, "meta");
    loader.U64("rank", file_rank);
    loader.U64("world_size", file_world);
    loader.U64("step", file_step);
    if (!loader.ok()) return MalformedError(loader.status().message()).Annotate(where);
  }
  auto mismatch = [&](std::string_view field, uint64_t in_file, uint64_t expected) {
    return MalformedError(fmt::format("{}: field 'meta/{}' is {}, the manifest lists it as {}",
                                      where, field, in_file, expected));
  };
  if (file_rank != static_cast<uint64_t>(rank)) return mismatch("rank", file_rank, rank);
  if (file_world != static_cast<uint64_t>(m.world_size)) {
    return mismatch("world_size", file_world, m.world_size);
  }
  if (file_step != m.step) return mismatch("step", file_step, m.step);
  for (auto it = records->begin(); it != records->end();) {
    it = it->first.starts_with("meta/") ? records->erase(it) : std::next(it);
  }
  return records;
}

StatusOr<OpenedCheckpoint> OpenCheckpoint(const std::string& dir, int rank, int world_size,
                                          const CheckpointIdentity& identity) {
  OpenedCheckpoint opened;
  FRUGAL_ASSIGN_OR_RETURN(opened.checkpoint, FindCheckpoint(dir));
  FRUGAL_RETURN_IF_ERROR(CheckIdentity(opened.checkpoint, world_size, identity));
  FRUGAL_ASSIGN_OR_RETURN(opened.state, ReadRankState(opened.checkpoint, rank));
  return opened;
}

StatusOr<CheckpointRef> VerifyCheckpoint(const std::string& dir, int world_size,
                                         const CheckpointIdentity& identity) {
  FRUGAL_ASSIGN_OR_RETURN(CheckpointRef checkpoint, FindCheckpoint(dir));
  FRUGAL_RETURN_IF_ERROR(CheckIdentity(checkpoint, world_size, identity));
  for (int r = 0; r < world_size; ++r) {
    FRUGAL_RETURN_IF_ERROR(ReadRankState(checkpoint, r).status());
  }
  return checkpoint;
}

}  // namespace frugal
