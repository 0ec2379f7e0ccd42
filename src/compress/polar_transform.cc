// The polar transform on packed bits: stage h (h = 1, 2, 4, ..., 2^(m-1)) replaces x_i by
// x_i XOR x_(i+h) for every i whose bit h is clear. Stages below 64 act inside a word with a shift
// and a mask, the others XOR whole words. The stages commute, and applying all of them twice is
// the identity.
//
// The information bits of a block are the bits of u at the positions of the information set in
// increasing order: per word, pext(u, mask) with BMI2 (kX86V3), a loop over the mask's set bits
// otherwise (the same bits).
#include "compress/polar_transform.h"

#include <bit>
#include <cstring>

namespace frugal::polar {
namespace {

using compress_internal::UseV3;

constexpr uint64_t kLowHalf[6] = {0x5555555555555555ull, 0x3333333333333333ull,
                                  0x0f0f0f0f0f0f0f0full, 0x00ff00ff00ff00ffull,
                                  0x0000ffff0000ffffull, 0x00000000ffffffffull};

// Appends fields of up to 64 bits LSB-first to a byte buffer of known size.
class WordWriter {
 public:
  explicit WordWriter(std::byte* out) : out_(out) {}
  void Put(uint64_t value, int width) {
    if (width == 0) return;
    acc_ |= value << fill_;
    if (fill_ + width >= 64) {
      std::memcpy(out_, &acc_, 8);
      out_ += 8;
      const int used = 64 - fill_;
      acc_ = used == 64 ? 0 : value >> used;
      fill_ = width - used;
    } else {
      fill_ += width;
    }
  }
  void Flush() {
    for (int b = 0; b < fill_; b += 8) *out_++ = static_cast<std::byte>(acc_ >> b);
  }

 private:
  std::byte* out_;
  uint64_t acc_ = 0;
  int fill_ = 0;
};

// Reads fields of up to 64 bits LSB-first from exactly `bytes` bytes.
class WordReader {
 public:
  WordReader(const std::byte* in, size_t bytes) : in_(in), left_(bytes) {}
  uint64_t Get(int width) {
    if (width == 0) return 0;
    uint64_t value = acc_;
    if (fill_ >= width) {
      acc_ = width == 64 ? 0 : acc_ >> width;
      fill_ -= width;
      return width == 64 ? value : value & ((uint64_t{1} << width) - 1);
    }
    const uint64_t next = Load();
    value |= next << fill_;
    const int taken = width - fill_;  // bits of `next` used, 1..64
    acc_ = taken == 64 ? 0 : next >> taken;
    fill_ = 64 - taken;
    return width == 64 ? value : value & ((uint64_t{1} << width) - 1);
  }

 private:
  uint64_t Load() {
    uint64_t v = 0;
    const size_t n = left_ < 8 ? left_ : 8;
    std::memcpy(&v, in_, n);
    in_ += n;
    left_ -= n;
    return v;
  }
  const std::byte* in_;
  size_t left_;
  uint64_t acc_ = 0;
  int fill_ = 0;
};

uint64_t PextGeneric(uint64_t v, uint64_t mask) {
  uint64_t out = 0;
  int j = 0;
  for (uint64_t m = mask; m != 0; m &= m - 1, ++j) {
    out |= ((v >> std::countr_zero(m)) & 1u) << j;
  }
  return out;
}

uint64_t PdepGeneric(uint64_t v, uint64_t mask) {
  uint64_t out = 0;
  int j = 0;
  for (uint64_t m = mask; m != 0; m &= m - 1, ++j) {
    out |= ((v >> j) & 1u) << std::countr_zero(m);
  }
  return out;
}

template <typename Pext>
FRUGAL_INLINE void GatherBody(std::span<const uint64_t> u, const InfoSet& set, std::byte* out,
                              Pext pext) {
  WordWriter writer(out);
  for (size_t w = 0; w < set.mask.size(); ++w) {
    const uint64_t mask = set.mask[w];
    writer.Put(pext(u[w], mask), std::popcount(mask));
  }
  writer.Flush();
}

template <typename Pdep>
FRUGAL_INLINE void ScatterBody(const std::byte* in, const InfoSet& set, std::span<uint64_t> u,
                               Pdep pdep) {
  WordReader reader(in, InfoBytes(set.k));
  for (size_t w = 0; w < set.mask.size(); ++w) {
    const uint64_t mask = set.mask[w];
    u[w] = pdep(reader.Get(std::popcount(mask)), mask);
  }
}

#if defined(FRUGAL_X86)
struct PextV3 {
  FRUGAL_TARGET_V3 uint64_t operator()(uint64_t v, uint64_t m) const { return _pext_u64(v, m); }
};
struct PdepV3 {
  FRUGAL_TARGET_V3 uint64_t operator()(uint64_t v, uint64_t m) const { return _pdep_u64(v, m); }
};
FRUGAL_TARGET_V3 void GatherV3(std::span<const uint64_t> u, const InfoSet& set, std::byte* out) {
  GatherBody(u, set, out, PextV3{});
}
FRUGAL_TARGET_V3 void ScatterV3(const std::byte* in, const InfoSet& set, std::span<uint64_t> u) {
  ScatterBody(in, set, u, PdepV3{});
}
#endif

}  // namespace

void Transform(std::span<uint64_t> words, int m) {
  const int in_word = m < 6 ? m : 6;
  for (uint64_t& w : words) {
    for (int s = 0; s < in_word; ++s) w ^= (w >> (1 << s)) & kLowHalf[s];
  }
  const size_t n = words.size();
  for (size_t h = 1; h < n; h *= 2) {
    for (size_t base = 0; base < n; base += 2 * h) {
      for (size_t i = base; i < base + h; ++i) words[i] ^= words[i + h];
    }
  }
}

bool GatherInfoBits(Kernels k, std::span<const uint64_t> u, const InfoSet& set, std::byte* out) {
  FRUGAL_CHECK_EQ(u.size(), set.mask.size(), "words of a polar block");
  uint64_t frozen = 0;
  for (size_t w = 0; w < u.size(); ++w) frozen |= u[w] & ~set.mask[w];
  if (frozen != 0) return false;
#if defined(FRUGAL_X86)
  if (UseV3(k)) {
    GatherV3(u, set, out);
    return true;
  }
#endif
  GatherBody(u, set, out, PextGeneric);
  return true;
}

void ScatterInfoBits(Kernels k, const std::byte* in, const InfoSet& set, std::span<uint64_t> u) {
  FRUGAL_CHECK_EQ(u.size(), set.mask.size(), "words of a polar block");
#if defined(FRUGAL_X86)
  if (UseV3(k)) {
    ScatterV3(in, set, u);
    return;
  }
#endif
  ScatterBody(in, set, u, PdepGeneric);
}

bool PaddingIsZero(const std::byte* in, uint32_t bits) {
  if (bits % 8 == 0) return true;
  return (std::to_integer<unsigned>(in[bits / 8]) >> (bits % 8)) == 0;
}

}  // namespace frugal::polar
