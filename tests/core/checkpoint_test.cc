// The checkpoint format and directory: round trips, every truncation and bit flip refused with a
// message naming the file and the field, the commit protocol (a writer killed between files
// leaves the previous checkpoint loadable), --keep, refused identities and failed writes.
#include "frugal/checkpoint.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "frugal/checkpoint_file.h"
#include "frugal/crc.h"

namespace frugal {
namespace {
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "frugal-ckpt-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

StateRecords RankState(int rank, uint64_t step) {
  StateSaver saver;
  std::vector<float> weights = {1.0f * rank, 2.0f, static_cast<float>(step)};
  saver.Floats("model/fc1.weight", weights);
  uint64_t s = step;
  saver.U64("loop/step", s);
  double loss = 0.5 + rank;
  saver.F64("loop/loss_sum", loss);
  return saver.records();
}

const CheckpointIdentity kIdentity = {{"model", "cnn"}, {"sync", "bsp"}, {"batch_size", "64"}};

// Every rank writes its file, then rank 0 commits: the protocol of a training job.
void SaveCheckpoint(const std::string& dir, uint64_t step, int world, int keep = 2) {
  CheckpointManifest manifest;
  manifest.step = step;
  manifest.world_size = world;
  manifest.identity = kIdentity;
  for (int r = 0; r < world; ++r) {
    auto file = WriteRankState(dir, step, r, world, RankState(r, step));
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    manifest.files.push_back(*file);
  }
  Status committed = CommitCheckpoint(dir, manifest, keep);
  ASSERT_TRUE(committed.ok()) << committed.ToString();
}

TEST(CheckpointFile, RoundTripsAndIsCanonical) {
  const StateRecords records = RankState(3, 17);
  const std::vector<std::byte> bytes =
      EncodeCheckpointFile(CheckpointFileKind::kRankState, records);
  auto decoded = DecodeCheckpointFile(bytes, CheckpointFileKind::kRankState);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, records);
  EXPECT_EQ(EncodeCheckpointFile(CheckpointFileKind::kRankState, *decoded), bytes);
  auto empty = DecodeCheckpointFile(EncodeCheckpointFile(CheckpointFileKind::kManifest, {}),
                                    CheckpointFileKind::kManifest);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(CheckpointFile, EveryTruncationIsRefused) {
  const std::vector<std::byte> bytes =
      EncodeCheckpointFile(CheckpointFileKind::kRankState, RankState(0, 1));
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto decoded = DecodeCheckpointFile(std::span(bytes).first(n), CheckpointFileKind::kRankState);
    ASSERT_FALSE(decoded.ok()) << "a prefix of " << n << " bytes was accepted";
    EXPECT_EQ(decoded.status().code(), StatusCode::kMalformed);
  }
}

TEST(CheckpointFile, EveryBitFlipIsRefused) {
  const std::vector<std::byte> bytes =
      EncodeCheckpointFile(CheckpointFileKind::kRankState, RankState(0, 1));
  for (size_t bit = 0; bit < 8 * bytes.size(); ++bit) {
    std::vector<std::byte> flipped = bytes;
    flipped[bit / 8] ^= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
    auto decoded = DecodeCheckpointFile(flipped, CheckpointFileKind::kRankState);
    ASSERT_FALSE(decoded.ok()) << "bit " << bit << " flipped was accepted";
    EXPECT_EQ(decoded.status().code(), StatusCode::kMalformed);
  }
}

// A file with a valid CRC whose content is wrong: the checks after the CRC.
std::vector<std::byte> WithCrc(std::vector<std::byte> bytes) {
  const size_t body = bytes.size() - 4;
  const uint32_t crc = Crc32(std::span(bytes).first(body));
  std::memcpy(bytes.data() + body, &crc, 4);
  return bytes;
}

TEST(CheckpointFile, ForeignAndMismatchedFilesAreNamed) {
  std::vector<std::byte> bytes =
      EncodeCheckpointFile(CheckpointFileKind::kRankState, RankState(0, 1));
  auto message = [](std::span<const std::byte> b, CheckpointFileKind kind) {
    return DecodeCheckpointFile(b, kind).status().message();
  };
  std::vector<std::byte> foreign = bytes;
  foreign[0] = std::byte{'X'};
  EXPECT_EQ(message(foreign, CheckpointFileKind::kRankState),
            "not a frugal checkpoint file (bad magic)");
  EXPECT_EQ(message(bytes, CheckpointFileKind::kManifest),
            "a rank state file, expected a manifest file");
  std::vector<std::byte> version = bytes;
  version[8] = std::byte{2};
  EXPECT_EQ(message(WithCrc(version), CheckpointFileKind::kRankState),
            "format version 2, this build reads version 1");
  // The type byte of the first record ("loop/loss_sum": 4 + 13 bytes after the 24-byte header).
  std::vector<std::byte> type = bytes;
  type[24 + 4 + 13] = std::byte{99};
  EXPECT_EQ(message(WithCrc(type), CheckpointFileKind::kRankState),
            "field 'loop/loss_sum': unknown type 99");
  std::vector<std::byte> garbage = bytes;
  garbage.insert(garbage.end() - 4, std::byte{0});
  EXPECT_EQ(message(WithCrc(garbage), CheckpointFileKind::kRankState),
            "1 bytes follow the last record");
}

TEST(CheckpointFile, RecordsOutOfOrderAreRefused) {
  // Two records written in descending order by hand.
  StateRecords one;
  one["b"] = StateRecord{StateType::kBytes, {std::byte{1}}};
  StateRecords two;
  two["a"] = StateRecord{StateType::kBytes, {std::byte{2}}};
  std::vector<std::byte> first = EncodeCheckpointFile(CheckpointFileKind::kManifest, one);
  std::vector<std::byte> second = EncodeCheckpointFile(CheckpointFileKind::kManifest, two);
  std::vector<std::byte> both(first.begin(), first.end() - 4);
  both.insert(both.end(), second.begin() + 24, second.end() - 4);
  both[16] = std::byte{2};  // record count
  both.resize(both.size() + 4);
  auto decoded = DecodeCheckpointFile(WithCrc(both), CheckpointFileKind::kManifest);
  EXPECT_EQ(decoded.status().message(),
            "record 'a' is out of order (after 'b'): names must ascend");
}

TEST(CheckpointManifestFormat, RoundTripsAndRefusesAnIncompleteFileList) {
  CheckpointManifest m;
  m.step = 120;
  m.world_size = 2;
  m.identity = kIdentity;
  m.files = {{0, "rank-00000.state", 100, 0xabcdef01u}, {1, "rank-00001.state", 101, 7}};
  auto decoded = DecodeManifest(EncodeManifest(m));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->step, 120u);
  EXPECT_EQ(decoded->world_size, 2);
  EXPECT_EQ(decoded->files[1].crc, 7u);
  EXPECT_EQ(decoded->files[0].crc, 0xabcdef01u);
  // Identity keys come back in key order.
  EXPECT_EQ(decoded->identity,
            (CheckpointIdentity{{"batch_size", "64"}, {"model", "cnn"}, {"sync", "bsp"}}));
  m.world_size = 3;
  EXPECT_EQ(DecodeManifest(EncodeManifest(m)).status().message(),
            "field 'file/00002/name' is missing from the checkpoint (this run has it)");
}

TEST(CheckpointDir, SavesFindsAndLoadsEveryRank) {
  TempDir dir;
  SaveCheckpoint(dir.path(), 40, 3);
  auto found = FindCheckpoint(dir.path());
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->manifest.step, 40u);
  EXPECT_EQ(found->path, CheckpointPath(dir.path(), 40));
  EXPECT_TRUE(CheckIdentity(*found, 3, kIdentity).ok());
  for (int r = 0; r < 3; ++r) {
    auto state = ReadRankState(*found, r);
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    EXPECT_EQ(*state, RankState(r, 40));
  }
  // A checkpoint's own directory names that checkpoint.
  auto direct = FindCheckpoint(CheckpointPath(dir.path(), 40));
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->manifest.step, 40u);
}

TEST(CheckpointDir, KeepsTheNewestK) {
  TempDir dir;
  for (uint64_t step : {10, 20, 30, 40, 50}) SaveCheckpoint(dir.path(), step, 2, /*keep=*/2);
  EXPECT_EQ(CommittedSteps(dir.path()), (std::vector<uint64_t>{40, 50}));
  EXPECT_FALSE(fs::exists(CheckpointPath(dir.path(), 30)));
  SaveCheckpoint(dir.path(), 60, 2, /*keep=*/1);
  EXPECT_EQ(CommittedSteps(dir.path()), (std::vector<uint64_t>{60}));
}

TEST(CheckpointDir, AWriterKilledBetweenFilesLeavesThePreviousCheckpoint) {
  TempDir dir;
  SaveCheckpoint(dir.path(), 10, 2);
  // A real process writes rank 0's file of step 20 and dies before rank 1's file and the manifest.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto file = WriteRankState(dir.path(), 20, 0, 2, RankState(0, 20));
    if (file.ok()) ::raise(SIGKILL);
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the writer did not get killed";
  EXPECT_TRUE(fs::exists(CheckpointPath(dir.path(), 20) + "/rank-00000.state"));

  auto found = FindCheckpoint(dir.path());
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->manifest.step, 10u);
  auto state = ReadRankState(*found, 1);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(*state, RankState(1, 10));
  // The next commit removes the leftover.
  SaveCheckpoint(dir.path(), 30, 2);
  EXPECT_FALSE(fs::exists(CheckpointPath(dir.path(), 20)));
  EXPECT_EQ(CommittedSteps(dir.path()), (std::vector<uint64_t>{10, 30}));
}

TEST(CheckpointDir, AFailedWriteIsReportedAndLeavesThePreviousCheckpoint) {
  TempDir dir;
  SaveCheckpoint(dir.path(), 10, 1);
  // The temporary name of the next file is taken by a directory: creating it fails.
  const std::string blocked = CheckpointPath(dir.path(), 20) + "/rank-00000.state.tmp";
  fs::create_directories(blocked);
  auto file = WriteRankState(dir.path(), 20, 0, 1, RankState(0, 20));
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kIoError);
  EXPECT_NE(file.status().message().find("cannot create " + blocked), std::string::npos)
      << file.status().message();
  auto found = FindCheckpoint(dir.path());
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->manifest.step, 10u);
  EXPECT_TRUE(ReadRankState(*found, 0).ok());
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

TEST(CheckpointDir, CorruptedTruncatedAndSwappedRankFilesAreRefusedNamingTheFile) {
  TempDir dir;
  SaveCheckpoint(dir.path(), 40, 2);
  auto found = FindCheckpoint(dir.path());
  ASSERT_TRUE(found.ok());
  const std::string rank0 = found->path + "/rank-00000.state";
  const std::string rank1 = found->path + "/rank-00001.state";
  const std::string original = ReadText(rank1);

  std::string corrupted = original;
  corrupted[40] = static_cast<char>(corrupted[40] ^ 0x10);
  WriteText(rank1, corrupted);
  auto state = ReadRankState(*found, 1);
  EXPECT_EQ(state.status().code(), StatusCode::kMalformed);
  EXPECT_TRUE(state.status().message().starts_with("checkpoint " + rank1 + ": corrupted: CRC "))
      << state.status().message();

  WriteText(rank1, original.substr(0, original.size() - 7));
  state = ReadRankState(*found, 1);
  EXPECT_EQ(state.status().message(),
            fmt::format("checkpoint {}: truncated or extended: {} bytes, the manifest says {}",
                        rank1, original.size() - 7, original.size()));

  // Rank 0's intact file under rank 1's name, with a manifest that matches its bytes.
  WriteText(rank1, ReadText(rank0));
  CheckpointRef swapped = *found;
  swapped.manifest.files[1].bytes = swapped.manifest.files[0].bytes;
  swapped.manifest.files[1].crc = swapped.manifest.files[0].crc;
  state = ReadRankState(swapped, 1);
  EXPECT_EQ(state.status().message(),
            "checkpoint " + rank1 + ": field 'meta/rank' is 0, the manifest lists it as 1");

  fs::remove(rank1);
  state = ReadRankState(*found, 1);
  EXPECT_EQ(state.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(state.status().message(), "checkpoint: " + rank1 + " does not exist");
}

TEST(CheckpointDir, ACorruptedManifestIsRefusedNamingIt) {
  TempDir dir;
  SaveCheckpoint(dir.path(), 40, 2);
  const std::string manifest = CheckpointPath(dir.path(), 40) + "/MANIFEST";
  std::string text = ReadText(manifest);
  text[30] = static_cast<char>(text[30] ^ 1);
  WriteText(manifest, text);
  auto found = FindCheckpoint(dir.path());
  EXPECT_EQ(found.status().code(), StatusCode::kMalformed);
  EXPECT_TRUE(found.status().message().starts_with("checkpoint " + manifest + ": corrupted: CRC"))
      << found.status().message();
}

TEST(CheckpointDir, AnotherConfigurationIsRefusedNamingTheField) {
  TempDir dir;
  SaveCheckpoint(dir.path(), 40, 2);
  auto found = FindCheckpoint(dir.path());
  ASSERT_TRUE(found.ok());
  const std::string where = "checkpoint " + found->path + "/MANIFEST: ";
  EXPECT_EQ(CheckIdentity(*found, 4, kIdentity).message(),
            where + "field 'world_size' is 2, this run has 4");
  CheckpointIdentity other = kIdentity;
  other[0].second = "mlp";
  EXPECT_EQ(CheckIdentity(*found, 2, other).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckIdentity(*found, 2, other).message(),
            where + "field 'identity/model' is 'cnn', this run has 'mlp'");
  other = kIdentity;
  other.emplace_back("compress", "dgc");
  EXPECT_EQ(CheckIdentity(*found, 2, other).message(),
            where + "field 'identity/compress' is missing (this run has 'dgc')");
  other = kIdentity;
  other.pop_back();
  EXPECT_EQ(CheckIdentity(*found, 2, other).message(),
            where + "field 'identity/batch_size' ('64') is not part of this run");
}

TEST(CheckpointDir, NothingToResumeIsNotFound) {
  TempDir dir;
  EXPECT_EQ(FindCheckpoint(dir.path()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(FindCheckpoint(dir.path() + "/absent").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace frugal
