// libFuzzer target: the decoders of the sparsification, gTop-k, PowerSGD and sketch compressors.
//
// Input: byte 0 picks the compressor spec, bytes 1-2 the tensor size (and whether it has a matrix
// shape), the rest is the payload body. The harness wraps the body in a valid wire header, so the
// fuzzer spends its time inside the compressor's own body parser rather than on the header CRC.
// A decode must either succeed or fail with kMalformed and leave the output untouched; anything
// else (a crash, a sanitizer report, another status code) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "frugal/compress_wire.h"
#include "frugal/compressor.h"

namespace {

constexpr const char* kSpecs[] = {
    "randomk:ratio=0.05",
    "randomk:k=3,scale=1",
    "topk:ratio=0.02",
    "topk:k=5,select=sampled",
    "threshold:tau=0.5,ef=0",
    "threshold:tau=0.5,quantize=0,ef=0",
    "adaptive:ratio=0.05,ef=0",
    "sbc:ratio=0.05,ef=0",
    "stc:k=7,ef=0",
    "dgc:ratio=0.01",
    "dgc:ratio=0.001,epoch_steps=10",
    "gtopk:k=9,ef=0",
    "powersgd:rank=2,start_iter=0,ef=0",
    "powersgd:rank=1,ef=0",
    "sketch:k=4,rows=3,cols=20,rounds=1,ef=0",
};
constexpr size_t kNumSpecs = sizeof(kSpecs) / sizeof(kSpecs[0]);

struct Fixture {
  std::vector<std::unique_ptr<frugal::Compressor>> compressors;
  Fixture() {
    frugal::CompressorRegistry registry = frugal::DefaultCompressorRegistry();
    for (const char* spec : kSpecs) {
      auto c = registry.Create(spec);
      if (!c.ok()) std::abort();
      compressors.push_back(std::move(c).value());
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Fixture fixture;
  if (size < 3) return 0;
  const frugal::Compressor& c = *fixture.compressors[data[0] % kNumSpecs];
  const size_t numel =
      1 + (static_cast<size_t>(data[1]) | (static_cast<size_t>(data[2] & 0x0f) << 8));
  const bool shaped = (data[2] & 0x10) != 0 && numel % 8 == 0;
  frugal::TensorInfo tensor =
      shaped ? frugal::TensorInfo("t", numel, {8, static_cast<int64_t>(numel / 8)})
             : frugal::TensorInfo("t", numel);
  const size_t body_size = size - 3;
  std::vector<std::byte> payload;
  std::span<std::byte> body = frugal::BeginPayload(c, tensor, body_size, payload);
  if (body_size > 0) std::memcpy(body.data(), data + 3, body_size);

  frugal::CompressContext ctx(1, 0, 2);
  ctx.set_step(data[2] >> 5);
  std::vector<float> out(numel, 0.0f);
  frugal::Status s = c.Decode(payload, tensor, ctx, out);
  if (!s.ok()) {
    if (s.code() != frugal::StatusCode::kMalformed) std::abort();
    for (float v : out) {
      if (v != 0.0f) std::abort();  // a failed decode wrote output
    }
  }
  // The raw bytes as a whole payload too: the header checks must hold.
  std::vector<float> raw(numel, 0.0f);
  frugal::Status r =
      c.Decode(std::span(reinterpret_cast<const std::byte*>(data), size), tensor, ctx, raw);
  if (!r.ok() && r.code() != frugal::StatusCode::kMalformed) std::abort();
  return 0;
}
