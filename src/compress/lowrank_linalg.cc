#include "compress/lowrank_linalg.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "frugal/check.h"

// PowerSGD's products, row by row.
//
// MultiplyMQ: P(i, c) = dot(row i of M, column c of Q); each row of M is read once and dotted
// with the r columns of Q while it is in cache. MultiplyMtP: column c of Q accumulates
// P(i, c) * (row i of M) over the rows i, again one read of M for all r columns; the sums are kept
// in a double buffer and rounded at the end. OrthonormalizeColumns is Gram-Schmidt with
// re-orthogonalisation ("twice is enough"): the projections of column c on the columns before it
// are subtracted in two passes, then column c is divided by its norm. The second pass keeps the
// columns orthogonal to working precision even when column c was nearly dependent on the earlier
// ones and little more than rounding noise remains of it.
namespace frugal::lowrank {
namespace {

double Dot(const float* a, const float* b, size_t n) {
  // Four independent partial sums let the compiler pipeline the additions.
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += static_cast<double>(a[i]) * b[i];
    s1 += static_cast<double>(a[i + 1]) * b[i + 1];
    s2 += static_cast<double>(a[i + 2]) * b[i + 2];
    s3 += static_cast<double>(a[i + 3]) * b[i + 3];
  }
  for (; i < n; ++i) s0 += static_cast<double>(a[i]) * b[i];
  return (s0 + s1) + (s2 + s3);
}

// Elements of row i present in a row-major buffer of `size` elements (the rest is zero padding).
size_t RowLength(size_t size, size_t i, size_t cols) {
  size_t start = i * cols;
  return start >= size ? 0 : std::min(cols, size - start);
}

}  // namespace

void MultiplyMQ(std::span<const float> m, size_t rows, size_t cols, std::span<const float> q, int r,
                std::span<float> p) {
  FRUGAL_CHECK_LE(m.size(), rows * cols);
  FRUGAL_CHECK_EQ(q.size(), cols * static_cast<size_t>(r));
  FRUGAL_CHECK_EQ(p.size(), rows * static_cast<size_t>(r));
  for (size_t i = 0; i < rows; ++i) {
    const size_t len = RowLength(m.size(), i, cols);
    const float* row = m.data() + i * cols;
    for (int c = 0; c < r; ++c) {
      p[static_cast<size_t>(c) * rows + i] =
          len == 0 ? 0.0f
                   : static_cast<float>(Dot(row, q.data() + static_cast<size_t>(c) * cols, len));
    }
  }
}

void MultiplyMtP(std::span<const float> m, size_t rows, size_t cols, std::span<const float> p,
                 int r, std::span<float> q) {
  FRUGAL_CHECK_LE(m.size(), rows * cols);
  FRUGAL_CHECK_EQ(p.size(), rows * static_cast<size_t>(r));
  FRUGAL_CHECK_EQ(q.size(), cols * static_cast<size_t>(r));
  std::vector<double> acc(cols * static_cast<size_t>(r), 0.0);
  for (size_t i = 0; i < rows; ++i) {
    const size_t len = RowLength(m.size(), i, cols);
    const float* row = m.data() + i * cols;
    for (int c = 0; c < r; ++c) {
      double w = p[static_cast<size_t>(c) * rows + i];
      if (w == 0) continue;
      double* out = acc.data() + static_cast<size_t>(c) * cols;
      for (size_t j = 0; j < len; ++j) out[j] += w * row[j];
    }
  }
  for (size_t j = 0; j < acc.size(); ++j) q[j] = static_cast<float>(acc[j]);
}

void OrthonormalizeColumns(std::span<float> a, size_t length, int r) {
  FRUGAL_CHECK_EQ(a.size(), length * static_cast<size_t>(r));
  for (int c = 0; c < r; ++c) {
    float* col = a.data() + static_cast<size_t>(c) * length;
    for (int pass = 0; pass < 2; ++pass) {
      for (int d = 0; d < c; ++d) {
        const float* prev = a.data() + static_cast<size_t>(d) * length;
        double proj = Dot(prev, col, length);
        if (proj == 0) continue;
        for (size_t i = 0; i < length; ++i) col[i] = static_cast<float>(col[i] - proj * prev[i]);
      }
    }
    double norm = std::sqrt(Dot(col, col, length));
    if (!(norm > 0) || !std::isfinite(norm)) {
      std::fill(col, col + length, 0.0f);
    } else {
      double inv = 1.0 / norm;
      for (size_t i = 0; i < length; ++i) col[i] = static_cast<float>(col[i] * inv);
    }
  }
}

void AddOuterProducts(std::span<const float> p, std::span<const float> q, size_t rows, size_t cols,
                      int r, float scale, std::span<float> out) {
  FRUGAL_CHECK_EQ(p.size(), rows * static_cast<size_t>(r));
  FRUGAL_CHECK_EQ(q.size(), cols * static_cast<size_t>(r));
  FRUGAL_CHECK_LE(out.size(), rows * cols);
  for (size_t i = 0; i < rows; ++i) {
    const size_t len = RowLength(out.size(), i, cols);
    float* row = out.data() + i * cols;
    for (int c = 0; c < r; ++c) {
      float w = scale * p[static_cast<size_t>(c) * rows + i];
      if (w == 0.0f) continue;
      const float* qc = q.data() + static_cast<size_t>(c) * cols;
      for (size_t j = 0; j < len; ++j) row[j] += w * qc[j];
    }
  }
}

void FillNormal(std::span<float> a, RngStream& rng) {
  for (float& v : a) v = static_cast<float>(rng.Normal());
}

}  // namespace frugal::lowrank
