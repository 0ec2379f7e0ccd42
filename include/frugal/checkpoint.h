// A checkpoint directory: each rank's state in its own file, committed together by a manifest.
//
// Layout of DIR (the --checkpoint-dir):
//   DIR/ckpt-<step, 12 digits>/rank-<rank, 5 digits>.state   one per rank (kRankState files)
//   DIR/ckpt-<step, 12 digits>/MANIFEST                      the commit (a kManifest file)
// `step` is the training position the checkpoint resumes at (steps done; rounds for FedAvg).
//
// Saving (collective in the caller's hands):
//   1. every rank writes its file with WriteRankState (temporary name, fsync, rename) and gets
//      its size and CRC;
//   2. the caller gathers every rank's CheckpointFile on rank 0 (a failed write on any rank stops
//      here: nothing is committed);
//   3. rank 0 calls CommitCheckpoint: it writes the manifest (temporary name, fsync, rename), which
//      names the step, the world size, the run's identity and every rank's file with its size and
//      CRC; only then does the checkpoint exist. It then removes the committed checkpoints older
//      than the newest `keep` and the uncommitted leftovers of older steps (manifest first, so a
//      removal cut short never leaves a half-removed checkpoint that looks committed).
// A crash at any point leaves the previous checkpoint usable: an uncommitted directory has no
// MANIFEST and is ignored.
//
// Loading: FindCheckpoint(DIR) takes the newest committed checkpoint below DIR (or DIR itself when
// it is one checkpoint's directory); CheckIdentity compares it with the run that wants to resume
// it; ReadRankState reads one rank's file, checks its size and CRC against the manifest, its
// format, and that it is that rank's file of that step. Every refusal is one line naming the file
// and the field: kInvalidArgument for a checkpoint of another configuration, kMalformed for a
// truncated, corrupted or foreign file, kNotFound for a missing one, kIoError when reading fails.
//
// DIR must be the same directory for every rank (one machine, or a shared file system).
// Thread safety: stateless functions; one writer per checkpoint directory at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "frugal/state_visitor.h"
#include "frugal/status.h"

namespace frugal {

inline constexpr char kManifestName[] = "MANIFEST";

struct CheckpointFile {
  int rank = 0;
  std::string name;  // relative to the checkpoint's directory
  uint64_t bytes = 0;
  uint32_t crc = 0;  // CRC-32 of the whole file
};

// What must be equal for a run to resume a checkpoint, as (key, value) pairs: the model, the
// strategy, the compressor, the batch size, the seed...
using CheckpointIdentity = std::vector<std::pair<std::string, std::string>>;

struct CheckpointManifest {
  uint64_t step = 0;
  int world_size = 0;
  CheckpointIdentity identity;
  std::vector<CheckpointFile> files;  // by rank, one per rank
};

// The manifest as a kManifest file, and back: kMalformed naming the field for anything that is
// not a complete manifest (a missing, extra or mistyped field, a file list that does not name
// rank-<r>.state for every rank r < world_size).
std::vector<std::byte> EncodeManifest(const CheckpointManifest& manifest);
StatusOr<CheckpointManifest> DecodeManifest(std::span<const std::byte> bytes);

// DIR/ckpt-<step>.
std::string CheckpointPath(const std::string& dir, uint64_t step);

// Writes `state` as rank `rank`'s file of checkpoint `step` under `dir` (creating the directories),
// with its rank, world size and step as fields "meta/...". kIoError naming the file when the write
// fails (nothing is left under the final name).
StatusOr<CheckpointFile> WriteRankState(const std::string& dir, uint64_t step, int rank,
                                        int world_size, const StateRecords& state);

// Rank 0, once every rank's WriteRankState succeeded: writes the manifest, then keeps the newest
// `keep` (>= 1) committed checkpoints. kIoError when the manifest cannot be written (the
// checkpoint then does not exist); a failed removal of an old checkpoint is kIoError too, after
// the commit.
Status CommitCheckpoint(const std::string& dir, const CheckpointManifest& manifest, int keep);

// The steps of the committed checkpoints under `dir` (those with a MANIFEST file), ascending.
std::vector<uint64_t> CommittedSteps(const std::string& dir);

struct CheckpointRef {
  std::string path;  // the checkpoint's directory
  CheckpointManifest manifest;
};

// The newest committed checkpoint under `dir`, or `dir` itself when it holds a MANIFEST. kNotFound
// when there is none; the manifest's own errors otherwise (naming its path).
StatusOr<CheckpointRef> FindCheckpoint(const std::string& dir);

// kInvalidArgument naming the manifest and the first field that differs: the world size, then
// the identity's keys (a key missing on either side counts as different).
Status CheckIdentity(const CheckpointRef& checkpoint, int world_size,
                     const CheckpointIdentity& identity);

// Rank `rank`'s state, without the "meta/" fields, after checking the file against the manifest
// and its own fields.
StatusOr<StateRecords> ReadRankState(const CheckpointRef& checkpoint, int rank);

// A checkpoint a run resumes: FindCheckpoint(dir), CheckIdentity, then rank `rank`'s state.
struct OpenedCheckpoint {
  CheckpointRef checkpoint;
  StateRecords state;
};
StatusOr<OpenedCheckpoint> OpenCheckpoint(const std::string& dir, int rank, int world_size,
                                          const CheckpointIdentity& identity);

// Before a run is launched: FindCheckpoint(dir), CheckIdentity, and every rank's file read and
// checked (ReadRankState). The first refusal.
StatusOr<CheckpointRef> VerifyCheckpoint(const std::string& dir, int world_size,
                                         const CheckpointIdentity& identity);

}  // namespace frugal
