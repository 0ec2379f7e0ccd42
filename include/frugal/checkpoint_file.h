// The file format of checkpoints: named state records (state_visitor.h) in a versioned,
// checksummed container, and writing files so that a crash never leaves a half-written one under
// the final name.
//
// Layout (little-endian):
//   offset  size  field
//        0     8  magic "FRUGALCK"
//        8     4  version (kCheckpointFileVersion)
//       12     4  kind (CheckpointFileKind)
//       16     8  record count
//       24        records, in strictly ascending name order (so no name repeats):
//                   u32 name length (1 .. kMaxStateNameBytes), the name (no NUL byte),
//                   u8 type (StateType), u64 data length (a multiple of the type's size), data
//      end     4  CRC-32 (crc.h) of every byte before it
// DecodeCheckpointFile checks, in this order, the size, the magic, the CRC, the version, the
// kind, then each record against the bytes that remain, and that nothing follows the last one;
// any failure is kMalformed saying which field is wrong, and nothing is returned.
//
// Thread safety: stateless functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "frugal/state_visitor.h"
#include "frugal/status.h"

namespace frugal {

inline constexpr uint32_t kCheckpointFileVersion = 1;
inline constexpr size_t kMaxStateNameBytes = 4096;

enum class CheckpointFileKind : uint32_t {
  kManifest = 1,   // what a checkpoint holds (checkpoint.h)
  kRankState = 2,  // the state of one rank
};

std::vector<std::byte> EncodeCheckpointFile(CheckpointFileKind kind, const StateRecords& records);

// kMalformed (see above) for anything but a complete, intact file of `kind`.
StatusOr<StateRecords> DecodeCheckpointFile(std::span<const std::byte> bytes,
                                            CheckpointFileKind kind);

// Writes `bytes` to `path` so that `path` is either absent, its previous content, or the complete
// new content: into "<path>.tmp", fsync, rename over `path`, fsync of the directory. kIoError
// naming the path and the system's reason (no space, no permission, ...); the temporary file is
// removed on failure.
Status WriteFileAtomically(const std::string& path, std::span<const std::byte> bytes);

// The whole file. kNotFound when it does not exist, kIoError when it cannot be read.
StatusOr<std::vector<std::byte>> ReadWholeFile(const std::string& path);

}  // namespace frugal
