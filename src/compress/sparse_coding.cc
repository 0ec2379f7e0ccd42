#include "compress/sparse_coding.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "frugal/bits.h"

// Index coding.
//
// PlanIndexCode measures every candidate code exactly in one pass over the gaps: the fixed code
// costs count * BitsFor(n); Elias-gamma costs the sum of 2 * floor(log2 g) + 1 over the gaps g;
// Rice with parameter b costs the sum of ((g - 1) >> b) + 1 + b, evaluated for the parameters
// around log2 of the mean gap (where the optimum of a geometric gap distribution lies). The
// shortest wins; ties go to the simpler code.
//
// BitSink packs codes into a 64-bit accumulator and stores 32 bits at a time; BitSource reads an
// unaligned 64-bit window at the current bit position (bytes past the end read as zero) and checks
// every read against the section length, so a malformed stream fails with kMalformed and never
// reads out of bounds. Unary runs (the zero bits before the one of a gamma or Rice code) are
// measured with a count of trailing zeros of the window.
namespace frugal::sparse {
namespace {

static_assert(std::endian::native == std::endian::little, "wire format assumes little endian");

class BitSink {
 public:
  explicit BitSink(std::byte* out) : out_(out) {}

  // Appends the low `width` bits of value (width <= 32, value < 2^width).
  void Put(uint64_t value, int width) {
    acc_ |= value << filled_;
    filled_ += width;
    if (filled_ >= 32) {
      uint32_t word = static_cast<uint32_t>(acc_);
      std::memcpy(out_, &word, 4);
      out_ += 4;
      acc_ >>= 32;
      filled_ -= 32;
    }
  }
  void PutZeros(uint64_t count) {
    while (count >= 32) {
      Put(0, 32);
      count -= 32;
    }
    Put(0, static_cast<int>(count));
  }
  // Writes the partial bytes; returns the end of the written data.
  std::byte* Finish() {
    while (filled_ > 0) {
      *out_++ = static_cast<std::byte>(acc_ & 0xff);
      acc_ >>= 8;
      filled_ -= 8;
    }
    filled_ = 0;
    return out_;
  }

 private:
  std::byte* out_;
  uint64_t acc_ = 0;
  int filled_ = 0;
};

class BitSource {
 public:
  BitSource(const std::byte* data, size_t bytes) : data_(data), bytes_(bytes), limit_(bytes * 8) {}

  // 57 valid bits starting at pos_ (bits past the end are zero).
  uint64_t Window() const {
    size_t byte = pos_ / 8;
    uint64_t word = 0;
    if (byte + 8 <= bytes_) {
      std::memcpy(&word, data_ + byte, 8);
    } else if (byte < bytes_) {
      std::memcpy(&word, data_ + byte, bytes_ - byte);
    }
    return word >> (pos_ % 8);
  }
  bool Get(int width, uint64_t* value) {
    if (width == 0) {
      *value = 0;
      return true;
    }
    if (pos_ + static_cast<size_t>(width) > limit_) return false;
    *value = Window() & ((uint64_t{1} << width) - 1);
    pos_ += static_cast<size_t>(width);
    return true;
  }
  // Reads zero bits up to and including the next one bit; fails past `max_zeros`.
  bool Unary(uint64_t max_zeros, uint64_t* zeros) {
    uint64_t count = 0;
    while (true) {
      if (pos_ >= limit_) return false;
      uint64_t window = Window() & ((uint64_t{1} << 56) - 1);
      if (window != 0) {
        int tz = std::countr_zero(window);
        count += static_cast<uint64_t>(tz);
        pos_ += static_cast<size_t>(tz) + 1;
        if (pos_ > limit_ || count > max_zeros) return false;
        *zeros = count;
        return true;
      }
      count += 56;
      pos_ += 56;
      if (count > max_zeros) return false;
    }
  }
  size_t bits_read() const { return pos_; }

 private:
  const std::byte* data_;
  size_t bytes_;
  size_t limit_;
  size_t pos_ = 0;
};

int FloorLog2(uint64_t v) { return std::bit_width(v) - 1; }

}  // namespace

IndexCodePlan PlanIndexCode(std::span<const uint32_t> indices, uint64_t n) {
  const size_t count = indices.size();
  IndexCodePlan plan;
  plan.coding = IndexCoding::kFixed;
  plan.bits = static_cast<uint64_t>(count) * static_cast<uint64_t>(BitsFor(n));
  if (count == 0) return plan;
  // The Rice parameter near log2 of the mean gap.
  uint64_t span = static_cast<uint64_t>(indices.back()) + 1;
  uint64_t mean_gap = std::max<uint64_t>(1, span / count);
  int center = FloorLog2(mean_gap);
  constexpr int kRiceCandidates = 4;
  int rice_lo = std::max(0, center - 2);
  uint64_t gamma_bits = 0;
  uint64_t rice_bits[kRiceCandidates] = {};
  int64_t prev = -1;
  for (uint32_t index : indices) {
    uint64_t gap = static_cast<uint64_t>(static_cast<int64_t>(index) - prev);
    prev = index;
    gamma_bits += static_cast<uint64_t>(2 * FloorLog2(gap) + 1);
    for (int c = 0; c < kRiceCandidates; ++c) rice_bits[c] += (gap - 1) >> (rice_lo + c);
  }
  if (gamma_bits < plan.bits) {
    plan.coding = IndexCoding::kGamma;
    plan.bits = gamma_bits;
  }
  for (int c = 0; c < kRiceCandidates; ++c) {
    int b = rice_lo + c;
    if (b > 31) break;
    uint64_t bits = rice_bits[c] + static_cast<uint64_t>(count) * static_cast<uint64_t>(1 + b);
    if (bits < plan.bits) {
      plan.coding = IndexCoding::kRice;
      plan.rice_bits = b;
      plan.bits = bits;
    }
  }
  return plan;
}

size_t MaxIndexSectionBytes(size_t count, uint64_t n) {
  return kIndexSectionHeaderBytes +
         static_cast<size_t>((static_cast<uint64_t>(count) * BitsFor(n) + 7) / 8);
}

size_t WriteIndexSection(std::span<const uint32_t> indices, uint64_t n, const IndexCodePlan& plan,
                         std::byte* out) {
  FRUGAL_CHECK(indices.size() <= UINT32_MAX, "too many indices: ", indices.size());
  out[0] = static_cast<std::byte>(plan.coding);
  out[1] = static_cast<std::byte>(plan.rice_bits);
  uint32_t count = static_cast<uint32_t>(indices.size());
  std::memcpy(out + 2, &count, 4);
  BitSink sink(out + kIndexSectionHeaderBytes);
  int64_t prev = -1;
  switch (plan.coding) {
    case IndexCoding::kFixed: {
      int width = BitsFor(n);
      for (uint32_t index : indices) sink.Put(index, width);
      break;
    }
    case IndexCoding::kGamma:
      for (uint32_t index : indices) {
        uint64_t gap = static_cast<uint64_t>(static_cast<int64_t>(index) - prev);
        prev = index;
        int m = FloorLog2(gap);
        sink.PutZeros(static_cast<uint64_t>(m));
        sink.Put(1, 1);
        sink.Put(gap - (uint64_t{1} << m), m);
      }
      break;
    case IndexCoding::kRice: {
      const int b = plan.rice_bits;
      const uint64_t mask = (uint64_t{1} << b) - 1;
      for (uint32_t index : indices) {
        uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(index) - prev) - 1;
        prev = index;
        sink.PutZeros(u >> b);
        sink.Put(1, 1);
        sink.Put(u & mask, b);
      }
      break;
    }
  }
  std::byte* end = sink.Finish();
  size_t written = static_cast<size_t>(end - out);
  FRUGAL_INTERNAL_ASSERT(written == IndexSectionBytes(plan), "index section of ", written,
                         " bytes, planned ", IndexSectionBytes(plan));
  return written;
}

void AppendIndexSection(std::span<const uint32_t> indices, uint64_t n,
                        std::vector<std::byte>* out) {
  IndexCodePlan plan = PlanIndexCode(indices, n);
  size_t start = out->size();
  out->resize(start + IndexSectionBytes(plan));
  WriteIndexSection(indices, n, plan, out->data() + start);
}

StatusOr<size_t> ReadIndexSection(std::span<const std::byte> in, uint64_t n, size_t max_count,
                                  std::vector<uint32_t>* indices) {
  if (in.size() < kIndexSectionHeaderBytes) {
    return MalformedError(fmt::format("index section of {} bytes, need at least {}", in.size(),
                                      kIndexSectionHeaderBytes));
  }
  uint8_t coding = std::to_integer<uint8_t>(in[0]);
  int rice_bits = std::to_integer<int>(in[1]);
  uint32_t count;
  std::memcpy(&count, in.data() + 2, 4);
  if (coding > static_cast<uint8_t>(IndexCoding::kRice)) {
    return MalformedError(fmt::format("unknown index coding {}", coding));
  }
  if (rice_bits > 31 || (coding != static_cast<uint8_t>(IndexCoding::kRice) && rice_bits != 0)) {
    return MalformedError(fmt::format("bad Rice parameter {}", rice_bits));
  }
  if (count > max_count || count > n) {
    return MalformedError(fmt::format("index count {} exceeds the limit {} for {} elements", count,
                                      std::min<uint64_t>(max_count, n), n));
  }
  const std::byte* codes = in.data() + kIndexSectionHeaderBytes;
  const size_t code_bytes = in.size() - kIndexSectionHeaderBytes;
  // Every code is at least one bit long (n >= 2), so the count is bounded by the bits present.
  if (n >= 2 && count > code_bytes * 8) {
    return MalformedError(
        fmt::format("index count {} does not fit in {} bytes of codes", count, code_bytes));
  }
  indices->resize(count);
  BitSource source(codes, code_bytes);
  int64_t prev = -1;
  const int64_t limit = static_cast<int64_t>(n);
  for (uint32_t i = 0; i < count; ++i) {
    int64_t index = 0;
    switch (static_cast<IndexCoding>(coding)) {
      case IndexCoding::kFixed: {
        uint64_t v;
        if (!source.Get(BitsFor(n), &v)) return MalformedError("index codes truncated");
        index = static_cast<int64_t>(v);
        if (index <= prev) {
          return MalformedError(fmt::format("index {} after {}: not increasing", index, prev));
        }
        break;
      }
      case IndexCoding::kGamma: {
        uint64_t m, low;
        if (!source.Unary(32, &m)) return MalformedError("Elias-gamma code truncated or too long");
        if (!source.Get(static_cast<int>(m), &low)) return MalformedError("index codes truncated");
        index = prev + static_cast<int64_t>((uint64_t{1} << m) | low);
        break;
      }
      case IndexCoding::kRice: {
        uint64_t q, low;
        uint64_t max_q = static_cast<uint64_t>(n) >> rice_bits;
        if (!source.Unary(max_q, &q)) return MalformedError("Rice code truncated or too long");
        if (!source.Get(rice_bits, &low)) return MalformedError("index codes truncated");
        index = prev + static_cast<int64_t>((q << rice_bits) | low) + 1;
        break;
      }
    }
    if (index >= limit) {
      return MalformedError(fmt::format("index {} out of range for {} elements", index, n));
    }
    (*indices)[i] = static_cast<uint32_t>(index);
    prev = index;
  }
  size_t used = (source.bits_read() + 7) / 8;
  // Padding bits must be zero, so that every section has one encoding.
  if (source.bits_read() % 8 != 0) {
    uint8_t last = std::to_integer<uint8_t>(codes[used - 1]);
    if ((last >> (source.bits_read() % 8)) != 0) return MalformedError("nonzero index padding");
  }
  return kIndexSectionHeaderBytes + used;
}

void AppendFloats(std::span<const float> values, std::vector<std::byte>* out) {
  size_t start = out->size();
  out->resize(start + values.size_bytes());
  if (!values.empty()) std::memcpy(out->data() + start, values.data(), values.size_bytes());
}

StatusOr<size_t> ReadFloats(std::span<const std::byte> in, size_t count, std::vector<float>* out) {
  if (in.size() / sizeof(float) < count) {
    return MalformedError(
        fmt::format("value section truncated: {} bytes for {} floats", in.size(), count));
  }
  out->resize(count);
  if (count > 0) std::memcpy(out->data(), in.data(), count * sizeof(float));
  return count * sizeof(float);
}

void AppendSigns(std::span<const float> values, std::vector<std::byte>* out) {
  size_t start = out->size();
  out->resize(start + SignSectionBytes(values.size()));
  BitSink sink(out->data() + start);
  for (float v : values) sink.Put(std::signbit(v) ? 1 : 0, 1);
  sink.Finish();
}

StatusOr<size_t> ReadSigns(std::span<const std::byte> in, size_t count,
                           std::vector<uint8_t>* negative) {
  size_t bytes = SignSectionBytes(count);
  if (in.size() < bytes) {
    return MalformedError(
        fmt::format("sign section truncated: {} bytes for {} signs", in.size(), count));
  }
  negative->resize(count);
  for (size_t i = 0; i < count; ++i) {
    (*negative)[i] = (std::to_integer<uint8_t>(in[i / 8]) >> (i % 8)) & 1;
  }
  if (count % 8 != 0 && (std::to_integer<uint8_t>(in[bytes - 1]) >> (count % 8)) != 0) {
    return MalformedError("nonzero sign padding");
  }
  return bytes;
}

}  // namespace frugal::sparse
