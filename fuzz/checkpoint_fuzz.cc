// libFuzzer target for the checkpoint loader: checkpoint files (checkpoint_file.h) and manifests
// (checkpoint.h). Any bytes decode to records or to kMalformed, never to undefined behaviour, and
// whatever is accepted is canonical: encoding it again gives the same bytes.
//
// Each input is used twice: as a file as it is, and as a recipe for a valid file (records whose
// names, types and data come from the input) that is then cut, extended or changed at a place the
// input chooses, with its CRC recomputed half of the time, so that the checks behind the CRC are
// reached by random inputs too.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "frugal/checkpoint.h"
#include "frugal/checkpoint_file.h"
#include "frugal/crc.h"

namespace {

using frugal::CheckpointFileKind;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "checkpoint fuzz: %s\n", what);
  std::abort();
}

void Check(std::span<const std::byte> bytes) {
  for (CheckpointFileKind kind : {CheckpointFileKind::kManifest, CheckpointFileKind::kRankState}) {
    auto records = frugal::DecodeCheckpointFile(bytes, kind);
    if (!records.ok()) {
      if (records.status().code() != frugal::StatusCode::kMalformed) Fail("not kMalformed");
      continue;
    }
    const std::vector<std::byte> again = frugal::EncodeCheckpointFile(kind, *records);
    if (again.size() != bytes.size() ||
        std::memcmp(again.data(), bytes.data(), again.size()) != 0) {
      Fail("an accepted file does not encode back to its bytes");
    }
  }
  auto manifest = frugal::DecodeManifest(bytes);
  if (manifest.ok()) {
    auto again = frugal::DecodeManifest(frugal::EncodeManifest(*manifest));
    if (!again.ok() || again->step != manifest->step || again->world_size != manifest->world_size ||
        again->files.size() != manifest->files.size() || again->identity != manifest->identity) {
      Fail("an accepted manifest does not round-trip");
    }
  } else if (manifest.status().code() != frugal::StatusCode::kMalformed) {
    Fail("manifest: not kMalformed");
  }
}

// A valid file made from the input's bytes.
std::vector<std::byte> Recipe(const uint8_t* data, size_t size, CheckpointFileKind kind) {
  frugal::StateRecords records;
  size_t at = 0;
  while (at + 3 <= size && records.size() < 16) {
    const size_t name_length = 1 + data[at] % 12;
    const auto type = static_cast<frugal::StateType>(1 + data[at + 1] % 5);
    const size_t values = data[at + 2] % 5;
    at += 3;
    std::string name;
    for (size_t i = 0; i < name_length && at < size; ++i, ++at) {
      name += static_cast<char>('a' + data[at] % 4 + (data[at] % 9 == 0 ? -50 : 0));  // some '/'
    }
    frugal::StateRecord record;
    record.type = type;
    const size_t bytes = values * frugal::StateTypeSize(type);
    for (size_t i = 0; i < bytes; ++i) {
      record.data.push_back(static_cast<std::byte>(at < size ? data[at++] : 0));
    }
    records[name] = std::move(record);
  }
  return frugal::EncodeCheckpointFile(kind, records);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Check(std::as_bytes(std::span<const uint8_t>(data, size)));
  if (size < 4) return 0;
  const auto kind =
      data[0] % 2 == 0 ? CheckpointFileKind::kManifest : CheckpointFileKind::kRankState;
  std::vector<std::byte> file = Recipe(data + 4, size - 4, kind);
  Check(file);
  const size_t where = (static_cast<size_t>(data[1]) << 8 | data[2]) % file.size();
  switch (data[3] % 4) {
    case 0:
      file.resize(where);
      break;
    case 1:
      file.insert(file.begin() + static_cast<std::ptrdiff_t>(where), std::byte{data[1]});
      break;
    default:
      file[where] ^= std::byte{static_cast<uint8_t>(1 + data[2] % 255)};
      break;
  }
  if (data[3] % 8 >= 4 && file.size() >= 4) {
    const uint32_t crc = frugal::Crc32(std::span(file).first(file.size() - 4));
    std::memcpy(file.data() + file.size() - 4, &crc, 4);
  }
  Check(file);
  return 0;
}
