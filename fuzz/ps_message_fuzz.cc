// libFuzzer target for the parameter server's messages (src/ps/messages.h). The input is decoded
// as it is, and again with its magic and header checksum repaired so that the checks behind them
// (type, flags, encoding, payload length) are reached; likewise as a hello payload, as it is and
// with its magic, version and checksum repaired, and likewise as a server's statistics payload
// (server_stats.h). Each must decode or be rejected with kMalformed; a decoded message must encode
// back to the same bytes, a decoded hello or statistics to one that decodes to the same fields -
// never a crash or a read out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "frugal/crc.h"
#include "ps/messages.h"
#include "ps/server_stats.h"

namespace {

using frugal::StatusCode;
using namespace frugal::ps_internal;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckMessage(std::span<const std::byte> bytes) {
  frugal::StatusOr<Message> m = DecodeMessage(bytes);
  if (!m.ok()) {
    Check(m.status().code() == StatusCode::kMalformed);
    return;
  }
  std::vector<std::byte> again;
  EncodeMessage(m->header, m->payload, again);
  Check(again.size() == bytes.size() && std::memcmp(again.data(), bytes.data(), bytes.size()) == 0);
  if (m->header.encoding == Encoding::kFloats) {
    std::vector<float> out(m->payload.size() / sizeof(float));
    Check(CopyFloats(*m, out.size(), out).ok());
  }
}

void CheckHello(std::span<const std::byte> bytes) {
  frugal::StatusOr<Hello> hello = DecodeHello(bytes);
  if (!hello.ok()) {
    Check(hello.status().code() == StatusCode::kMalformed);
    return;
  }
  frugal::StatusOr<Hello> again = DecodeHello(EncodeHello(*hello));
  Check(again.ok() && again->worker == hello->worker && again->config == hello->config &&
        again->tensors.size() == hello->tensors.size());
  for (size_t i = 0; i < hello->tensors.size(); ++i) {
    Check(again->tensors[i].name == hello->tensors[i].name &&
          again->tensors[i].count == hello->tensors[i].count);
  }
}

void CheckStats(std::span<const std::byte> bytes) {
  constexpr int kWorkers = 3;
  frugal::StatusOr<ServerStats> stats = DecodeServerStats(bytes, kWorkers);
  if (!stats.ok()) {
    Check(stats.status().code() == StatusCode::kMalformed);
    return;
  }
  frugal::StatusOr<ServerStats> again = DecodeServerStats(EncodeServerStats(*stats), kWorkers);
  Check(again.ok() && again->bytes_in == stats->bytes_in && again->bytes_out == stats->bytes_out &&
        again->pushes == stats->pushes && again->updates == stats->updates &&
        again->workers.size() == stats->workers.size());
  for (size_t w = 0; w < stats->workers.size(); ++w) {
    Check(again->workers[w].applied == stats->workers[w].applied &&
          again->workers[w].staleness == stats->workers[w].staleness);
  }
}

// `bytes` with a magic, a version and the trailing checksum written over the fuzzer's.
std::vector<std::byte> Sealed(std::span<const std::byte> input, const char* magic,
                              uint16_t version) {
  std::vector<std::byte> out(input.begin(), input.end());
  if (out.size() < 10) out.resize(10);
  std::memcpy(out.data(), magic, 4);
  std::memcpy(out.data() + 4, &version, sizeof(version));
  const uint32_t crc = frugal::Crc32(std::span<const std::byte>(out.data(), out.size() - 4));
  std::memcpy(out.data() + out.size() - 4, &crc, sizeof(crc));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  CheckMessage(input);
  CheckHello(input);
  // The header repaired: magic and checksum right, every other byte as the fuzzer chose.
  std::vector<std::byte> sealed(input.begin(), input.end());
  if (sealed.size() < kHeaderBytes) sealed.resize(kHeaderBytes);
  std::memcpy(sealed.data(), "FPS1", 4);
  const uint32_t crc = frugal::Crc32(std::span<const std::byte>(sealed.data(), 48));
  std::memcpy(sealed.data() + 48, &crc, sizeof(crc));
  CheckMessage(sealed);
  // A hello and statistics repaired: magic, version (1 and 2), the trailing checksum right.
  CheckHello(Sealed(input, "FPSH", 1));
  CheckStats(input);
  CheckStats(Sealed(input, "FPSS", 2));
  return 0;
}
