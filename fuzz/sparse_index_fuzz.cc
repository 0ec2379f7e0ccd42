// libFuzzer target: the index-section reader (fixed, Elias-gamma and Rice codes) and the sparse
// vectors that gTop-k ranks exchange.
//
// Input: bytes 0-3 give n (the index bound), the rest is a section. Whatever the bytes, the reader
// either fails with kMalformed or returns strictly increasing indices below n, never more than
// the bound it was given, having consumed no more than the input. A vector that decodes is
// encoded again and must decode to the same indices and values.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "compress/gtopk_merge.h"
#include "compress/sparse_coding.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t n32;
  std::memcpy(&n32, data, 4);
  const uint64_t n = n32 == 0 ? (uint64_t{1} << 32) : n32;
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data + 4), size - 4);
  const size_t max_count = 1 + (size % 4096);

  std::vector<uint32_t> indices;
  auto used = frugal::sparse::ReadIndexSection(in, n, max_count, &indices);
  if (used.ok()) {
    if (*used > in.size() || indices.size() > max_count) std::abort();
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] >= n || (i > 0 && indices[i] <= indices[i - 1])) std::abort();
    }
  } else if (used.status().code() != frugal::StatusCode::kMalformed) {
    std::abort();
  }

  frugal::sparse::SparseVector v;
  frugal::Status s = frugal::sparse::ReadSparseVector(in, n, max_count, &v);
  if (s.ok()) {
    std::vector<std::byte> again;
    frugal::sparse::AppendSparseVector(v, n, &again);
    frugal::sparse::SparseVector back;
    if (!frugal::sparse::ReadSparseVector(again, n, max_count, &back).ok()) std::abort();
    if (back.indices != v.indices) std::abort();
    if (!v.values.empty() &&
        std::memcmp(back.values.data(), v.values.data(), 4 * v.values.size()) != 0) {
      std::abort();
    }
  } else if (s.code() != frugal::StatusCode::kMalformed) {
    std::abort();
  }
  return 0;
}
