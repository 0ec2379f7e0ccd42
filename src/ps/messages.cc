// The parameter server's wire messages (see messages.h).
#include "ps/messages.h"

#include <fmt/format.h>

#include <cstring>

#include "engine/wire.h"
#include "frugal/crc.h"

namespace frugal::ps_internal {
namespace {

using engine_internal::WireReader;
using engine_internal::WireWriter;

constexpr char kMagic[4] = {'F', 'P', 'S', '1'};
constexpr std::string_view kHelloMagic = "FPSH";
constexpr uint16_t kHelloVersion = 1;
constexpr uint32_t kMaxTensors = 1u << 20;
constexpr uint32_t kMaxNameBytes = 4096;
constexpr uint32_t kMaxConfigBytes = 1u << 16;

template <typename T>
void Put(std::byte* at, T value) {
  std::memcpy(at, &value, sizeof(T));
}
template <typename T>
T Get(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

void PutHeader(const MessageHeader& h, size_t payload_bytes, std::byte* out) {
  FRUGAL_CHECK_LE(payload_bytes, size_t{UINT32_MAX}, "parameter-server payload");
  std::memcpy(out, kMagic, 4);
  Put<uint8_t>(out + 4, static_cast<uint8_t>(h.type));
  Put<uint8_t>(out + 5, h.flags);
  Put<uint8_t>(out + 6, static_cast<uint8_t>(h.encoding));
  Put<uint8_t>(out + 7, 0);
  Put<uint32_t>(out + 8, h.key);
  Put<uint32_t>(out + 12, static_cast<uint32_t>(payload_bytes));
  Put<uint64_t>(out + 16, h.step);
  Put<uint64_t>(out + 24, h.version);
  Put<uint64_t>(out + 32, h.progress);
  Put<uint64_t>(out + 40, h.aux);
  Put<uint32_t>(out + 48, Crc32(std::span<const std::byte>(out, 48)));
}

// The encodings each type may carry.
bool EncodingAllowed(MessageType type, Encoding e, uint8_t flags) {
  switch (type) {
    case MessageType::kHello:
    case MessageType::kStats:
    case MessageType::kAbort:
      return e == Encoding::kBytes;
    case MessageType::kInit:
      return e == Encoding::kFloats;
    case MessageType::kPush:
      if ((flags & kFlagSkip) != 0) return e == Encoding::kNone;
      return e == Encoding::kFloats || e == Encoding::kCompressed;
    case MessageType::kParams:
      return e == Encoding::kFloats || e == Encoding::kCompressed;
    case MessageType::kWelcome:
    case MessageType::kPull:
    case MessageType::kHeartbeat:
    case MessageType::kDone:
    case MessageType::kStatsRequest:
    case MessageType::kRest:
    case MessageType::kCheckpoint:
      return e == Encoding::kNone;
  }
  return false;
}

uint8_t FlagsAllowed(MessageType type) {
  switch (type) {
    case MessageType::kPush:
      return kFlagPullAfter | kFlagSkip;
    case MessageType::kParams:
      return kFlagDelta;
    default:
      return 0;
  }
}

}  // namespace

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kHello:
      return "hello";
    case MessageType::kInit:
      return "init";
    case MessageType::kWelcome:
      return "welcome";
    case MessageType::kPush:
      return "push";
    case MessageType::kParams:
      return "params";
    case MessageType::kPull:
      return "pull";
    case MessageType::kHeartbeat:
      return "heartbeat";
    case MessageType::kDone:
      return "done";
    case MessageType::kStatsRequest:
      return "stats request";
    case MessageType::kStats:
      return "stats";
    case MessageType::kAbort:
      return "abort";
    case MessageType::kRest:
      return "rest";
    case MessageType::kCheckpoint:
      return "checkpoint";
  }
  return "?";
}

void EncodeMessage(const MessageHeader& header, std::span<const std::byte> payload,
                   std::vector<std::byte>& out) {
  out.resize(kHeaderBytes + payload.size());
  PutHeader(header, payload.size(), out.data());
  if (!payload.empty()) std::memcpy(out.data() + kHeaderBytes, payload.data(), payload.size());
}

void EncodeMessage(const MessageHeader& header, std::span<const float> values,
                   std::vector<std::byte>& out) {
  EncodeMessage(header, std::as_bytes(values), out);
}

StatusOr<Message> DecodeMessage(std::span<const std::byte> bytes) {
  if (bytes.size() < kHeaderBytes) {
    return MalformedError(
        fmt::format("parameter-server message of {} bytes, shorter than its "
                    "{}-byte header",
                    bytes.size(), kHeaderBytes));
  }
  if (std::memcmp(bytes.data(), kMagic, 4) != 0) {
    return MalformedError("parameter-server message: bad magic");
  }
  if (Get<uint32_t>(bytes.data() + 48) != Crc32(bytes.first(48))) {
    return MalformedError("parameter-server message: bad header checksum");
  }
  const uint8_t type = Get<uint8_t>(bytes.data() + 4);
  const uint8_t flags = Get<uint8_t>(bytes.data() + 5);
  const uint8_t encoding = Get<uint8_t>(bytes.data() + 6);
  if (type == 0 || type > kMaxMessageType) {
    return MalformedError(fmt::format("parameter-server message: unknown type {}", type));
  }
  Message m;
  m.header.type = static_cast<MessageType>(type);
  const char* name = MessageTypeName(m.header.type);
  if (encoding > static_cast<uint8_t>(Encoding::kBytes) || Get<uint8_t>(bytes.data() + 7) != 0) {
    return MalformedError(fmt::format("parameter-server {}: unknown encoding {}", name, encoding));
  }
  if ((flags & ~FlagsAllowed(m.header.type)) != 0) {
    return MalformedError(fmt::format("parameter-server {}: flags {:#x} not allowed", name, flags));
  }
  m.header.flags = flags;
  m.header.encoding = static_cast<Encoding>(encoding);
  if (!EncodingAllowed(m.header.type, m.header.encoding, flags)) {
    return MalformedError(
        fmt::format("parameter-server {}: encoding {} not allowed", name, encoding));
  }
  m.header.key = Get<uint32_t>(bytes.data() + 8);
  const uint32_t payload_bytes = Get<uint32_t>(bytes.data() + 12);
  m.header.step = Get<uint64_t>(bytes.data() + 16);
  m.header.version = Get<uint64_t>(bytes.data() + 24);
  m.header.progress = Get<uint64_t>(bytes.data() + 32);
  m.header.aux = Get<uint64_t>(bytes.data() + 40);
  if (payload_bytes != bytes.size() - kHeaderBytes) {
    return MalformedError(fmt::format("parameter-server {}: header says {} payload bytes, {} came",
                                      name, payload_bytes, bytes.size() - kHeaderBytes));
  }
  if (m.header.encoding == Encoding::kNone && payload_bytes != 0) {
    return MalformedError(fmt::format("parameter-server {}: unexpected payload", name));
  }
  if (m.header.encoding == Encoding::kFloats && payload_bytes % sizeof(float) != 0) {
    return MalformedError(
        fmt::format("parameter-server {}: {} bytes are not whole floats", name, payload_bytes));
  }
  if (m.header.type == MessageType::kAbort && payload_bytes > kMaxAbortBytes) {
    return MalformedError("parameter-server abort: reason too long");
  }
  m.payload = bytes.subspan(kHeaderBytes);
  return m;
}

Status CopyFloats(const Message& message, size_t count, std::span<float> out) {
  FRUGAL_CHECK_EQ(out.size(), count, "float payload destination");
  if (message.header.encoding != Encoding::kFloats || message.payload.size() != count * 4) {
    return MalformedError(fmt::format(
        "parameter-server {} of key {}: {} payload bytes, expected {} floats",
        MessageTypeName(message.header.type), message.header.key, message.payload.size(), count));
  }
  if (count > 0) std::memcpy(out.data(), message.payload.data(), count * sizeof(float));
  return Status::Ok();
}

std::vector<std::byte> EncodeHello(const Hello& hello) {
  WireWriter w;
  engine_internal::PutHeader(w, kHelloMagic, kHelloVersion);
  w.Put<uint32_t>(hello.worker);
  w.Put<uint32_t>(static_cast<uint32_t>(hello.config.size()));
  w.Bytes(hello.config.data(), hello.config.size());
  w.Put<uint32_t>(static_cast<uint32_t>(hello.tensors.size()));
  for (const TensorSpec& t : hello.tensors) {
    w.Put<uint64_t>(t.count);
    w.Put<uint32_t>(static_cast<uint32_t>(t.name.size()));
    w.Bytes(t.name.data(), t.name.size());
  }
  return w.Take();
}

StatusOr<Hello> DecodeHello(std::span<const std::byte> payload) {
  WireReader r(payload);
  if (auto error = engine_internal::GetHeader(r, kHelloMagic, kHelloVersion)) {
    return MalformedError("parameter-server hello: " + *error);
  }
  Hello hello;
  uint32_t config_bytes = 0;
  uint32_t tensors = 0;
  auto truncated = [] { return MalformedError("parameter-server hello: truncated"); };
  if (!r.Get(hello.worker) || !r.Get(config_bytes)) return truncated();
  if (config_bytes > kMaxConfigBytes) {
    return MalformedError("parameter-server hello: configuration text too long");
  }
  if (!r.String(config_bytes, hello.config) || !r.Get(tensors)) return truncated();
  if (tensors > kMaxTensors || tensors > r.left() / 12) {
    return MalformedError(fmt::format("parameter-server hello: {} tensors", tensors));
  }
  hello.tensors.resize(tensors);
  for (TensorSpec& t : hello.tensors) {
    uint64_t count = 0;
    uint32_t name_bytes = 0;
    if (!r.Get(count) || !r.Get(name_bytes)) return truncated();
    if (name_bytes > kMaxNameBytes || count > (uint64_t{1} << 40)) {
      return MalformedError("parameter-server hello: bad tensor entry");
    }
    if (!r.String(name_bytes, t.name)) return truncated();
    t.count = static_cast<size_t>(count);
  }
  if (r.left() != 0) return MalformedError("parameter-server hello: trailing bytes");
  return hello;
}

}  // namespace frugal::ps_internal
