// onebit: 1-bit SGD (Seide et al., 2014). Each element keeps only its sign; the decoder replaces
// it by the mean of the elements of the same sign in its column.
//
// The tensor is viewed as a rows x cols matrix (TensorInfo::rows/cols: rows = shape[0], a flat
// tensor is one column). For column j the encoder computes pos[j] = mean of the elements >= 0 and
// neg[j] = mean of the elements < 0 (0 for an empty group) and one sign bit per element
// (sign(0) = +, as everywhere in frugal). The reconstruction preserves each column's sum exactly
// up to rounding, but the quantization error is large: 1-bit SGD is meant to run with error
// feedback (traits().needs_error_feedback; "onebit:ef=1" or --ef).
//
// Body: cols pairs (pos, neg) of float32, then the sign plane (numel bits, element order,
// LSB-first, zero padded). The decoder checks every pos is finite and >= 0, every neg finite and
// <= 0 and the padding is zero before it writes anything.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compress/quant_util.h"

namespace frugal::compress_internal {
namespace {

// Column sums in row-major order: float partial sums per column over blocks of kRowBlock rows
// (vectorised across columns, short enough for float sums to stay accurate), added into the
// double totals after each block, in a fixed order. `scratch` holds 4 * cols floats.
constexpr size_t kRowBlock = 128;

FRUGAL_INLINE void ColumnSumsBody(const float* __restrict x, size_t rows, size_t cols,
                                  double* __restrict pos_sum, double* __restrict neg_sum,
                                  uint32_t* __restrict pos_count, float* __restrict chk,
                                  float* __restrict scratch) {
  float* __restrict fp = scratch;
  float* __restrict fn = scratch + cols;
  float* __restrict fc = scratch + 2 * cols;
  float* __restrict fk = scratch + 3 * cols;
  for (size_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const size_t r1 = std::min(rows, r0 + kRowBlock);
    std::fill(scratch, scratch + 4 * cols, 0.0f);
    for (size_t r = r0; r < r1; ++r) {
      const float* __restrict row = x + r * cols;
      for (size_t j = 0; j < cols; ++j) {
        // Branch-free, so that the loop vectorises: m is 1 for a negative element, else 0, and
        // v - v * m, v * m are exactly v or 0 for finite v (non-finite input is rejected).
        const float v = row[j];
        const float m = v < 0.0f ? 1.0f : 0.0f;
        fp[j] += v - v * m;
        fn[j] += v * m;
        fc[j] += 1.0f - m;
        fk[j] += v * 0.0f;
      }
    }
    for (size_t j = 0; j < cols; ++j) {
      pos_sum[j] += fp[j];
      neg_sum[j] += fn[j];
      pos_count[j] += static_cast<uint32_t>(fc[j]);
      chk[j] += fk[j];
    }
  }
}

// Adds, row by row, neg[j] or pos[j] by the sign bit of each element: the row's bits are
// unpacked into `mask` (cols bytes of 0 or 1; whole bytes of the plane through a table), then a
// select-and-add loop the compiler vectorises.
struct SignByteTable {
  uint64_t lanes[256];  // byte b -> eight bytes, byte k = bit k of b
  constexpr SignByteTable() : lanes() {
    for (unsigned b = 0; b < 256; ++b) {
      uint64_t v = 0;
      for (unsigned k = 0; k < 8; ++k) v |= static_cast<uint64_t>((b >> k) & 1u) << (8 * k);
      lanes[b] = v;
    }
  }
};
constexpr SignByteTable kSignBytes;

FRUGAL_INLINE void UnpackSignBits(const std::byte* bits, size_t begin, size_t count,
                                  uint8_t* mask) {
  size_t k = 0;
  for (; k < count && (begin + k) % 8 != 0; ++k) {
    const size_t i = begin + k;
    mask[k] = (std::to_integer<unsigned>(bits[i >> 3]) >> (i & 7)) & 1u;
  }
  for (; k + 8 <= count; k += 8) {
    const uint64_t lanes = kSignBytes.lanes[std::to_integer<unsigned>(bits[(begin + k) >> 3])];
    std::memcpy(mask + k, &lanes, 8);
  }
  for (; k < count; ++k) {
    const size_t i = begin + k;
    mask[k] = (std::to_integer<unsigned>(bits[i >> 3]) >> (i & 7)) & 1u;
  }
}

FRUGAL_INLINE void AddColumnSignsBody(const std::byte* __restrict bits, size_t rows, size_t cols,
                                      const float* __restrict pos, const float* __restrict neg,
                                      float* __restrict out, uint8_t* __restrict mask) {
  for (size_t r = 0; r < rows; ++r) {
    const size_t base = r * cols;
    UnpackSignBits(bits, base, cols, mask);
    float* __restrict row = out + base;
    for (size_t j = 0; j < cols; ++j) row[j] += mask[j] != 0 ? neg[j] : pos[j];
  }
}

// The one-column case (a flat tensor): eight float lanes per block of kFlatBlock elements (short
// enough for float sums to stay accurate), added into double totals after each block, in a fixed
// order.
constexpr size_t kFlatBlock = 1024;

FRUGAL_INLINE void FlatSumsBody(const float* x, size_t n, double* pos_sum, double* neg_sum,
                                uint32_t* pos_count, float* chk) {
  double ps = 0, ns = 0;
  uint64_t pc = 0;
  float ck = 0;
  for (size_t begin = 0; begin < n; begin += kFlatBlock) {
    const size_t len = std::min(kFlatBlock, n - begin);
    const float* b = x + begin;
    float fp[8] = {0, 0, 0, 0, 0, 0, 0, 0}, fn[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float fc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, fk[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
      for (int j = 0; j < 8; ++j) {
        float v = b[i + j];
        bool neg = v < 0.0f;
        fp[j] += neg ? 0.0f : v;
        fn[j] += neg ? v : 0.0f;
        fc[j] += neg ? 0.0f : 1.0f;
        fk[j] += v * 0.0f;
      }
    }
    for (; i < len; ++i) {
      float v = b[i];
      bool neg = v < 0.0f;
      fp[0] += neg ? 0.0f : v;
      fn[0] += neg ? v : 0.0f;
      fc[0] += neg ? 0.0f : 1.0f;
      fk[0] += v * 0.0f;
    }
    for (int j = 0; j < 8; ++j) {
      ps += fp[j];
      ns += fn[j];
      pc += static_cast<uint64_t>(fc[j]);
      ck += fk[j];
    }
  }
  *pos_sum = ps;
  *neg_sum = ns;
  *pos_count = static_cast<uint32_t>(pc);
  *chk = ck;
}

void FlatSumsGeneric(const float* x, size_t n, double* ps, double* ns, uint32_t* pc, float* chk) {
  FlatSumsBody(x, n, ps, ns, pc, chk);
}
#if defined(FRUGAL_X86)
// FlatSumsBody with AVX2: the eight float lanes are one register.
FRUGAL_TARGET_V3 void FlatSumsV3(const float* x, size_t n, double* pos_sum, double* neg_sum,
                                 uint32_t* pos_count, float* chk) {
  double ps = 0, ns = 0;
  uint64_t pc = 0;
  float ck = 0;
  const __m256 zero = _mm256_setzero_ps();
  const __m256 one = _mm256_set1_ps(1.0f);
  for (size_t begin = 0; begin < n; begin += kFlatBlock) {
    const size_t len = std::min(kFlatBlock, n - begin);
    const float* b = x + begin;
    __m256 fp = zero, fn = zero, fc = zero, fk = zero;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
      __m256 v = _mm256_loadu_ps(b + i);
      __m256 neg = _mm256_cmp_ps(v, zero, _CMP_LT_OQ);
      fp = _mm256_add_ps(fp, _mm256_andnot_ps(neg, v));
      fn = _mm256_add_ps(fn, _mm256_and_ps(neg, v));
      fc = _mm256_add_ps(fc, _mm256_andnot_ps(neg, one));
      fk = _mm256_add_ps(fk, _mm256_mul_ps(v, zero));
    }
    alignas(32) float ap[8], an[8], ac[8], ak[8];
    _mm256_store_ps(ap, fp);
    _mm256_store_ps(an, fn);
    _mm256_store_ps(ac, fc);
    _mm256_store_ps(ak, fk);
    for (; i < len; ++i) {
      float v = b[i];
      bool neg = v < 0.0f;
      ap[0] += neg ? 0.0f : v;
      an[0] += neg ? v : 0.0f;
      ac[0] += neg ? 0.0f : 1.0f;
      ak[0] += v * 0.0f;
    }
    for (int j = 0; j < 8; ++j) {
      ps += ap[j];
      ns += an[j];
      pc += static_cast<uint64_t>(ac[j]);
      ck += ak[j];
    }
  }
  *pos_sum = ps;
  *neg_sum = ns;
  *pos_count = static_cast<uint32_t>(pc);
  *chk = ck;
}
#endif

void ColumnSumsGeneric(const float* x, size_t rows, size_t cols, double* ps, double* ns,
                       uint32_t* pc, float* chk, float* scratch) {
  ColumnSumsBody(x, rows, cols, ps, ns, pc, chk, scratch);
}
void AddColumnSignsGeneric(const std::byte* bits, size_t rows, size_t cols, const float* pos,
                           const float* neg, float* out, uint8_t* mask) {
  AddColumnSignsBody(bits, rows, cols, pos, neg, out, mask);
}
#if defined(FRUGAL_X86)
FRUGAL_TARGET_V3 void ColumnSumsV3(const float* x, size_t rows, size_t cols, double* ps, double* ns,
                                   uint32_t* pc, float* chk, float* scratch) {
  ColumnSumsBody(x, rows, cols, ps, ns, pc, chk, scratch);
}
FRUGAL_TARGET_V3 void AddColumnSignsV3(const std::byte* bits, size_t rows, size_t cols,
                                       const float* pos, const float* neg, float* out,
                                       uint8_t* mask) {
  AddColumnSignsBody(bits, rows, cols, pos, neg, out, mask);
}
#endif

class OneBitCompressor final : public QuantizerBase {
 public:
  OneBitCompressor()
      : QuantizerBase("onebit", CompressorId::kOneBit,
                      CompressorTraits{.requantizable = true, .needs_error_feedback = true}, "") {}

  static size_t Cols(const TensorInfo& t) { return t.numel == 0 ? 0 : t.cols(); }

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return 8 * (8 * Cols(tensor) + SignBytes(tensor.numel));
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    const size_t n = input.size();
    const size_t cols = Cols(tensor);
    const size_t rows = cols == 0 ? 0 : n / cols;
    std::span<std::byte> body = BeginPayload(*this, tensor, 8 * cols + SignBytes(n), out);
    std::vector<double> pos_sum(cols, 0.0), neg_sum(cols, 0.0);
    std::vector<uint32_t> pos_count(cols, 0);
    std::vector<float> chk(cols, 0.0f);
    const bool v3 = kernels() == Kernels::kX86V3;
    if (cols == 1) {
#if defined(FRUGAL_X86)
      if (v3) {
        FlatSumsV3(input.data(), n, pos_sum.data(), neg_sum.data(), pos_count.data(), chk.data());
      } else {
        FlatSumsGeneric(input.data(), n, pos_sum.data(), neg_sum.data(), pos_count.data(),
                        chk.data());
      }
#else
      FlatSumsGeneric(input.data(), n, pos_sum.data(), neg_sum.data(), pos_count.data(),
                      chk.data());
#endif
    } else {
      std::vector<float> scratch(4 * cols);
#if defined(FRUGAL_X86)
      if (v3) {
        ColumnSumsV3(input.data(), rows, cols, pos_sum.data(), neg_sum.data(), pos_count.data(),
                     chk.data(), scratch.data());
      } else {
        ColumnSumsGeneric(input.data(), rows, cols, pos_sum.data(), neg_sum.data(),
                          pos_count.data(), chk.data(), scratch.data());
      }
#else
      ColumnSumsGeneric(input.data(), rows, cols, pos_sum.data(), neg_sum.data(), pos_count.data(),
                        chk.data(), scratch.data());
#endif
    }
    for (size_t j = 0; j < cols; ++j) {
      if (chk[j] != 0.0f) {
        return InvalidArgumentError(
            fmt::format("onebit: tensor '{}' has non-finite values", tensor.name));
      }
      uint32_t neg_count = static_cast<uint32_t>(rows) - pos_count[j];
      float pos = pos_count[j] > 0 ? static_cast<float>(pos_sum[j] / pos_count[j]) : 0.0f;
      float neg = neg_count > 0 ? static_cast<float>(neg_sum[j] / neg_count) : 0.0f;
      StoreF32(body.data() + 8 * j, pos);
      StoreF32(body.data() + 8 * j + 4, neg);
    }
    PackSigns(kernels(), input.data(), n, body.data() + 8 * cols);
    return Status::Ok();
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    CheckInput(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    const size_t n = tensor.numel;
    const size_t cols = Cols(tensor);
    if (body.size() != 8 * cols + SignBytes(n)) {
      return MalformedError(fmt::format("onebit payload: body of {} bytes, expected {}",
                                        body.size(), 8 * cols + SignBytes(n)));
    }
    std::vector<float> pos(cols), neg(cols);
    for (size_t j = 0; j < cols; ++j) {
      pos[j] = LoadF32(body.data() + 8 * j);
      neg[j] = LoadF32(body.data() + 8 * j + 4);
      if (!std::isfinite(pos[j]) || !std::isfinite(neg[j]) || pos[j] < 0.0f || neg[j] > 0.0f) {
        return MalformedError(
            fmt::format("onebit payload: column {} has means ({}, {})", j, pos[j], neg[j]));
      }
    }
    const std::byte* bits = body.data() + 8 * cols;
    FRUGAL_RETURN_IF_ERROR(CheckSignPadding(bits, n, "onebit"));
    if (cols == 1) {
      AddSigns(kernels(), bits, n, pos[0], neg[0], output.data());
      return Status::Ok();
    }
    if (n == 0) return Status::Ok();
    const size_t rows = n / cols;
    std::vector<uint8_t> mask(cols);
#if defined(FRUGAL_X86)
    if (kernels() == Kernels::kX86V3) {
      AddColumnSignsV3(bits, rows, cols, pos.data(), neg.data(), output.data(), mask.data());
      return Status::Ok();
    }
#endif
    AddColumnSignsGeneric(bits, rows, cols, pos.data(), neg.data(), output.data(), mask.data());
    return Status::Ok();
  }
};

}  // namespace

void RegisterOneBit(CompressorRegistry& registry) {
  MustRegister(registry,
               {.name = "onebit",
                .summary = "1-bit SGD: signs, per-column means of the positive and negative parts "
                           "(use with ef)",
                .params = "",
                .factory = [](CompressorParams&) -> StatusOr<std::unique_ptr<Compressor>> {
                  return std::unique_ptr<Compressor>(std::make_unique<OneBitCompressor>());
                }});
}

}  // namespace frugal::compress_internal
