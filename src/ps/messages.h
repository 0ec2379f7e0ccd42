// The parameter server's wire messages (internal): one fixed header, sealed by the CRC-32 of its
// bytes, followed by a payload whose kind the header names.
//
// Header, 52 bytes, little-endian:
//   0  magic "FPS1"            4  type (MessageType)   5  flags (kFlag*)
//   6  encoding (Encoding)     7  zero
//   8  key u32                 12 payload bytes u32
//   16 step u64                24 version u64
//   32 progress u64            40 aux u64
//   48 CRC-32 of bytes 0..47
// What the fields mean for each type is in server.cc and client.cc; the payload is
//   kNone        nothing
//   kFloats      float32 values (a key's gradient, parameters or initial values)
//   kCompressed  a compressor's payload (compress_wire.h), validated by the compressor's Decode
//   kBytes       a structured payload: a hello (EncodeHello), statistics (server_stats.h) or the
//                text of an abort
// DecodeMessage validates the header completely (magic, CRC, type, flags, encoding allowed for
// the type, payload length) before anything reads the payload; the structured payloads have
// their own validating decoders. Malformed input is kMalformed naming what is wrong, never
// undefined behaviour (fuzz/ps_message_fuzz.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "frugal/reducer.h"
#include "frugal/status.h"

namespace frugal::ps_internal {

enum class MessageType : uint8_t {
  kHello = 1,      // worker -> server: layout and configuration (kBytes)
  kInit = 2,       // worker 0 -> server: a key's initial values (kFloats)
  kWelcome = 3,    // server -> worker: hello and initial values complete
  kPush = 4,       // worker -> server: a key's gradient (kFloats, kCompressed; kNone if skipped)
  kParams = 5,     // server -> worker: a key's parameters (kFloats, kCompressed)
  kPull = 6,       // worker -> server: send me a key's parameters
  kHeartbeat = 7,  // either way: still alive
  kDone = 8,       // worker -> server: this worker has finished
  kStatsRequest = 9,
  kStats = 10,  // server -> worker (kBytes)
  kAbort = 11,  // either way: the job fails; the payload is the reason (kBytes)
  kRest = 12,   // worker -> server: resting (evaluating) until its next push
  // worker -> server: every step up to `step` is pushed and pulled; save the checkpoint of `step`
  // once every worker asked for it.
  kCheckpoint = 13,
};
inline constexpr uint8_t kMaxMessageType = 13;

enum class Encoding : uint8_t { kNone = 0, kFloats = 1, kCompressed = 2, kBytes = 3 };

inline constexpr uint8_t kFlagPullAfter = 1;  // kPush: answer with the key's parameters
inline constexpr uint8_t kFlagSkip = 2;       // kPush: no upload this step (LAG)
inline constexpr uint8_t kFlagDelta = 4;      // kParams: the payload adds to the last values
inline constexpr uint8_t kKnownFlags = kFlagPullAfter | kFlagSkip | kFlagDelta;

inline constexpr size_t kHeaderBytes = 52;
inline constexpr size_t kMaxAbortBytes = 4096;

struct MessageHeader {
  MessageType type = MessageType::kHeartbeat;
  uint8_t flags = 0;
  Encoding encoding = Encoding::kNone;
  uint32_t key = 0;
  uint64_t step = 0;
  uint64_t version = 0;
  uint64_t progress = 0;
  // kParams: the bits of a double, the squared norm of the averaged gradient of the update that
  // made this version (LAG's threshold); kPush under weighted pushes: the bits of the push's
  // weight (a double); 0 otherwise.
  uint64_t aux = 0;
};

struct Message {
  MessageHeader header;
  std::span<const std::byte> payload;  // a view into the decoded bytes
};

const char* MessageTypeName(MessageType type);

// Header + payload into `out` (replaced). header.encoding must suit the payload.
void EncodeMessage(const MessageHeader& header, std::span<const std::byte> payload,
                   std::vector<std::byte>& out);
// Header + float payload.
void EncodeMessage(const MessageHeader& header, std::span<const float> values,
                   std::vector<std::byte>& out);

StatusOr<Message> DecodeMessage(std::span<const std::byte> bytes);

// The kFloats payload of `message` as floats, which must be exactly `count` of them.
Status CopyFloats(const Message& message, size_t count, std::span<float> out);

// A worker's hello: who it is, the tensors of its model (the sharding's input) and the text of
// its configuration (ParameterServerConfig::Describe), which must equal the server's.
struct Hello {
  uint32_t worker = 0;
  std::string config;
  std::vector<TensorSpec> tensors;
};
std::vector<std::byte> EncodeHello(const Hello& hello);
StatusOr<Hello> DecodeHello(std::span<const std::byte> payload);

}  // namespace frugal::ps_internal
