// libFuzzer target for one compressor's decoder (kFuzzSpec, a registry spec, fixed at build time:
// this harness is compiled once and every target links it with a one-line file that defines the
// spec, fuzz/CMakeLists.txt). The first input byte picks how the rest becomes a payload:
//   mode 0: the bytes are the payload as they are (exercises the header checks);
//   mode 1: a valid header is written for numel taken from the next two bytes and a body cut or
//           zero-padded to the size the compressor expects (exercises the body checks);
//   mode 2: as 1 without fitting the size (exercises the length checks behind a valid header).
// One more byte picks the matrix view (rows) for compressors that use the shape. The decoder must
// return OK or kMalformed and, on kMalformed, leave the output untouched; DecodeOverwrite must
// return the same and write what Decode adds into zeros; anything else aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "frugal/compress_wire.h"
#include "frugal/compressor.h"

// The compressor's spec, defined by the target's own file.
extern const char kFuzzSpec[];

namespace {

const frugal::Compressor& Target() {
  static const std::unique_ptr<frugal::Compressor> compressor = [] {
    auto made = frugal::DefaultCompressorRegistry().Create(kFuzzSpec);
    if (!made.ok()) {
      std::fprintf(stderr, "fuzz target: %s\n", made.status().ToString().c_str());
      std::abort();
    }
    return std::move(made).value();
  }();
  return *compressor;
}

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz target %s: %s\n", kFuzzSpec, what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const frugal::Compressor& c = Target();
  if (size < 4) return 0;
  const int mode = data[0] % 3;
  const int rows_hint = 1 + data[1] % 8;
  const size_t numel_hint = (size_t{data[2]} | size_t{data[3]} << 8) % 4096;
  const auto* rest = reinterpret_cast<const std::byte*>(data + 4);
  const size_t rest_size = size - 4;

  std::vector<std::byte> payload;
  size_t numel = numel_hint;
  if (mode == 0) {
    payload.assign(rest, rest + rest_size);
    auto header = frugal::ReadWireHeader(payload);
    numel = header.ok() && header->numel <= (1u << 20) ? header->numel : numel_hint;
  }
  std::vector<int64_t> shape;
  if (numel % rows_hint == 0 && rows_hint > 1) {
    shape = {rows_hint, static_cast<int64_t>(numel / rows_hint)};
  }
  frugal::TensorInfo tensor("fuzz", numel, shape);
  if (mode != 0) {
    size_t body = rest_size;
    if (mode == 1) {
      std::optional<uint64_t> bits = c.BodyBits(tensor);
      if (bits) body = *bits / 8;
    }
    std::span<std::byte> out = frugal::BeginPayload(c, tensor, body, payload);
    std::memset(out.data(), 0, out.size());
    std::memcpy(out.data(), rest, std::min(body, rest_size));
  }
  frugal::CompressContext ctx(1, 0, 1);
  std::vector<float> output(numel, 0.25f);
  frugal::Status status = c.Decode(payload, tensor, ctx, output);
  if (!status.ok()) {
    Check(status.code() == frugal::StatusCode::kMalformed, "an error other than kMalformed");
    for (float v : output) Check(v == 0.25f, "output written by a failed decode");
  }
  // DecodeOverwrite agrees with Decode on the payload and writes what Decode adds into zeros.
  std::vector<float> written(numel, 0.25f);
  frugal::Status overwritten = c.DecodeOverwrite(payload, tensor, ctx, written);
  Check(overwritten.code() == status.code(), "DecodeOverwrite and Decode disagree on the payload");
  if (status.ok()) {
    std::vector<float> added(numel, 0.0f);
    Check(c.Decode(payload, tensor, ctx, added).ok(), "a second Decode of the payload failed");
    Check(std::memcmp(added.data(), written.data(), numel * sizeof(float)) == 0,
          "DecodeOverwrite wrote other values than Decode into zeros");
  } else {
    for (float v : written) Check(v == 0.25f || v == 0.0f, "a failed DecodeOverwrite wrote values");
  }
  (void)c.EntropyCodedBits(payload);
  return 0;
}
