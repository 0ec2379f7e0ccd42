// The parameter server's messages: what is encoded decodes to the same, and every malformed
// header or hello is refused with kMalformed.
#include "ps/messages.h"

#include <gtest/gtest.h>

#include <cstring>

namespace frugal::ps_internal {
namespace {

std::vector<std::byte> Push(std::span<const float> values) {
  MessageHeader h;
  h.type = MessageType::kPush;
  h.flags = kFlagPullAfter;
  h.encoding = Encoding::kFloats;
  h.key = 7;
  h.step = 11;
  h.version = 12;
  h.progress = 13;
  h.target = 14;
  std::vector<std::byte> bytes;
  EncodeMessage(h, values, bytes);
  return bytes;
}

TEST(PsMessages, RoundTrip) {
  const std::vector<float> values = {1.5f, -2, 3};
  const std::vector<std::byte> bytes = Push(values);
  ASSERT_EQ(bytes.size(), kHeaderBytes + 12);
  StatusOr<Message> m = DecodeMessage(bytes);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->header.type, MessageType::kPush);
  EXPECT_EQ(m->header.flags, kFlagPullAfter);
  EXPECT_EQ(m->header.key, 7u);
  EXPECT_EQ(m->header.step, 11u);
  EXPECT_EQ(m->header.version, 12u);
  EXPECT_EQ(m->header.progress, 13u);
  EXPECT_EQ(m->header.target, 14u);
  std::vector<float> out(3);
  ASSERT_TRUE(CopyFloats(*m, 3, out).ok());
  EXPECT_EQ(out, values);
  std::vector<float> wrong(2);
  EXPECT_EQ(CopyFloats(*m, 2, wrong).code(), StatusCode::kMalformed);
}

TEST(PsMessages, RefusesMalformedHeaders) {
  const std::vector<float> values = {1, 2};
  const std::vector<std::byte> good = Push(values);
  auto expect_malformed = [](std::vector<std::byte> bytes, const char* what) {
    StatusOr<Message> m = DecodeMessage(bytes);
    EXPECT_EQ(m.status().code(), StatusCode::kMalformed) << what;
  };
  expect_malformed({}, "empty");
  expect_malformed(std::vector<std::byte>(good.begin(), good.begin() + 40), "short");
  std::vector<std::byte> bytes = good;
  bytes[0] = std::byte{'X'};
  expect_malformed(bytes, "magic");
  bytes = good;
  bytes[20] ^= std::byte{1};  // the step, under the checksum
  expect_malformed(bytes, "checksum");
  bytes = good;
  bytes.pop_back();
  expect_malformed(bytes, "payload shorter than the header says");
  bytes = good;
  bytes.push_back(std::byte{0});
  expect_malformed(bytes, "payload longer than the header says");
  // Fields that the checksum covers but the decoder refuses: re-encode with bad values.
  MessageHeader h;
  h.type = MessageType::kPush;
  h.encoding = Encoding::kNone;  // a push without payload must be a skip
  EncodeMessage(h, std::span<const std::byte>(), bytes);
  expect_malformed(bytes, "push without payload");
  h.type = MessageType::kHeartbeat;
  h.encoding = Encoding::kFloats;
  EncodeMessage(h, std::span<const float>(values), bytes);
  expect_malformed(bytes, "heartbeat with floats");
  h.encoding = Encoding::kNone;
  h.flags = kFlagPullAfter;
  EncodeMessage(h, std::span<const std::byte>(), bytes);
  expect_malformed(bytes, "flag not allowed");
  h = MessageHeader{};
  h.type = MessageType::kParams;
  h.encoding = Encoding::kFloats;
  const std::byte three[3] = {};
  EncodeMessage(h, std::span<const std::byte>(three), bytes);
  expect_malformed(bytes, "floats of 3 bytes");
  EncodeMessage(h, std::span<const std::byte>(), bytes);
  bytes[4] = std::byte{99};
  expect_malformed(bytes, "unknown type");
}

TEST(PsMessages, HelloRoundTripAndTruncation) {
  Hello hello;
  hello.worker = 3;
  hello.config = "4 workers, bsp";
  hello.tensors = {{"fc.weight", 100}, {"fc.bias", 10}, {"", 0}};
  const std::vector<std::byte> bytes = EncodeHello(hello);
  StatusOr<Hello> back = DecodeHello(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->worker, 3u);
  EXPECT_EQ(back->config, hello.config);
  ASSERT_EQ(back->tensors.size(), 3u);
  EXPECT_EQ(back->tensors[0].name, "fc.weight");
  EXPECT_EQ(back->tensors[1].count, 10u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    EXPECT_EQ(DecodeHello(cut).status().code(), StatusCode::kMalformed) << n << " bytes";
  }
  std::vector<std::byte> flipped = bytes;
  flipped[10] ^= std::byte{0x40};
  EXPECT_EQ(DecodeHello(flipped).status().code(), StatusCode::kMalformed);
}

}  // namespace
}  // namespace frugal::ps_internal
