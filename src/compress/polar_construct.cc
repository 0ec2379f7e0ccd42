// Constructions of the information set (see polar_construct.h for the index convention).
//
// pw: the polarization weight W(i) = sum_j b_j 2^(j/4) of the bits b_j of i (the beta-expansion
//   of He et al. 2017, the basis of the 5G NR sequence); a larger weight is a more reliable
//   position. It does not depend on the source.
// bb: the Bhattacharyya parameter Z of each synthetic channel of the test channel BSC(D) with
//   D = h^-1(1 - rate) (the distortion a rate-`rate` code can reach), evolved as
//   Z- = 2Z - Z^2 (check node) and Z+ = Z^2 (variable node), in the log domain so that deep
//   channels neither underflow nor round to 1; a smaller Z is more reliable.
// ga: the mean m of the LLR of each synthetic channel of the BI-AWGN channel whose capacity is
//   `rate` (ten Brink's J function gives its LLR spread), evolved as m+ = 2m and
//   m- = phi^-1(1 - (1 - phi(m))^2) with Chung's approximation of phi (Trifonov 2012); a larger
//   mean is more reliable.
// Ties (bb and ga saturate at their extremes) are broken by the polarization weight, then by the
// larger index, so the order is a total order and every build picks the same sets.
#include "compress/polar_construct.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "frugal/check.h"
#include "frugal/crc.h"

namespace frugal::polar {
namespace {

constexpr int kMaxLog2 = 20;

// Each synthetic channel's value, index bits MSB first: stage s turns value v of prefix k into
// Minus(v) at 2k and Plus(v) at 2k + 1.
template <typename Minus, typename Plus>
std::vector<double> Evolve(int m, double start, Minus minus, Plus plus) {
  std::vector<double> values(1, start);
  for (int s = 0; s < m; ++s) {
    std::vector<double> next(values.size() * 2);
    for (size_t k = 0; k < values.size(); ++k) {
      next[2 * k] = minus(values[k]);
      next[2 * k + 1] = plus(values[k]);
    }
    values.swap(next);
  }
  return values;
}

double BinaryEntropy(double p) {
  if (p <= 0.0 || p >= 1.0) return 0.0;
  return -p * std::log2(p) - (1.0 - p) * std::log2(1.0 - p);
}

// D in [0, 1/2] with h(D) = y, by bisection.
double InverseBinaryEntropy(double y) {
  double lo = 0.0, hi = 0.5;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (BinaryEntropy(mid) < y ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// ln Z of every channel of BSC(h^-1(1 - rate)).
std::vector<double> BhattacharyyaLog(int m, double rate) {
  const double d = InverseBinaryEntropy(1.0 - rate);
  const double z0 = 2.0 * std::sqrt(d * (1.0 - d));
  return Evolve(
      m, std::log(z0),
      // ln(2z - z^2) = ln z + ln(2 - z) = ln z + log1p(1 - z)
      [](double lz) { return lz + std::log1p(-std::expm1(lz)); },
      [](double lz) { return 2.0 * lz; });
}

// Chung's approximation of phi(x) = 1 - E[tanh(L/2)], L ~ N(x, 2x), as ln phi.
constexpr double kPhiA = 0.4527, kPhiB = 0.86, kPhiC = 0.0218;
double LogPhiLow(double x) { return -kPhiA * std::pow(x, kPhiB) + kPhiC; }
double LogPhiHigh(double x) {
  return 0.5 * std::log(M_PI / x) - 0.25 * x + std::log1p(-10.0 / (7.0 * x));
}
double LogPhi(double x) {
  if (x <= 0.0) return 0.0;
  return x < 10.0 ? LogPhiLow(x) : LogPhiHigh(x);
}

// The x with ln phi(x) = t (t <= 0).
double InverseLogPhi(double t) {
  if (t >= LogPhiLow(10.0)) return std::pow((kPhiC - t) / kPhiA, 1.0 / kPhiB);
  // LogPhiHigh decreases on [10, inf) and is below t at -4t: Newton's method kept in the bracket.
  double lo = 10.0, hi = std::max(10.0, -4.0 * t);
  double x = 0.5 * (lo + hi);
  for (int i = 0; i < 100; ++i) {
    const double f = LogPhiHigh(x) - t;
    if (f > 0) {
      lo = x;
    } else {
      hi = x;
    }
    const double u = 10.0 / (7.0 * x);
    const double df = -0.5 / x - 0.25 + (u / x) / (1.0 - u);
    double next = x - f / df;
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    if (std::fabs(next - x) <= 1e-13 * x) return next;
    x = next;
  }
  return x;
}

// Mean LLR of every channel of the BI-AWGN channel of capacity `rate`.
std::vector<double> GaussianMeans(int m, double rate) {
  // ten Brink's J(sigma) ~ (1 - 2^(-H1 sigma^(2 H2)))^H3, inverted at the capacity `rate`.
  constexpr double kH1 = 0.3073, kH2 = 0.8935, kH3 = 1.1064;
  const double sigma =
      std::pow(-std::log2(1.0 - std::pow(rate, 1.0 / kH3)) / kH1, 1.0 / (2.0 * kH2));
  const double m0 = 0.5 * sigma * sigma;
  return Evolve(
      m, m0,
      [](double x) {
        const double lphi = LogPhi(x);
        // phi(minus) = 1 - (1 - phi)^2 = phi (2 - phi)
        const double t = lphi + std::log1p(-std::expm1(lphi));
        return std::min(x, InverseLogPhi(std::min(t, 0.0)));
      },
      [](double x) { return 2.0 * x; });
}

}  // namespace

double DesignDistortion(double rate) { return InverseBinaryEntropy(1.0 - rate); }

std::string_view ConstructionName(Construction c) {
  switch (c) {
    case Construction::kPw:
      return "pw";
    case Construction::kBb:
      return "bb";
    case Construction::kGa:
      return "ga";
  }
  return "?";
}

StatusOr<Construction> ParseConstruction(std::string_view name) {
  for (Construction c : {Construction::kPw, Construction::kBb, Construction::kGa}) {
    if (ConstructionName(c) == name) return c;
  }
  return InvalidArgumentError(
      fmt::format("unknown polar construction '{}' (accepted: pw, bb, ga)", name));
}

double PolarizationWeight(uint32_t i) {
  // 2^(1/4), 2^(1/2), 2^(3/4) as correctly rounded literals.
  constexpr double kBeta[4] = {1.0, 1.1892071150027210667, 1.4142135623730950488,
                               1.6817928305074290861};
  double c[4] = {0, 0, 0, 0};
  for (int j = 0; j < 32; ++j) {
    if ((i >> j) & 1u) c[j % 4] += static_cast<double>(uint32_t{1} << (j / 4));
  }
  return ((c[0] * kBeta[0] + c[1] * kBeta[1]) + c[2] * kBeta[2]) + c[3] * kBeta[3];
}

std::vector<uint32_t> ReliabilityOrder(int m, Construction c, double rate) {
  FRUGAL_CHECK(m >= 0 && m <= kMaxLog2, "polar block of 2^", m, " positions");
  const size_t size = size_t{1} << m;
  rate = std::clamp(rate, 1e-6, 1.0 - 1e-6);
  std::vector<double> weight(size);
  for (size_t i = 0; i < size; ++i) weight[i] = PolarizationWeight(static_cast<uint32_t>(i));
  // key: larger is more reliable.
  std::vector<double> key;
  switch (c) {
    case Construction::kPw:
      key = weight;
      break;
    case Construction::kBb:
      key = BhattacharyyaLog(m, rate);
      for (double& v : key) v = -v;
      break;
    case Construction::kGa:
      key = GaussianMeans(m, rate);
      break;
  }
  std::vector<uint32_t> order(size);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (key[a] != key[b]) return key[a] > key[b];
    if (weight[a] != weight[b]) return weight[a] > weight[b];
    return a > b;
  });
  return order;
}

InfoSet MakeInfoSet(std::span<const uint32_t> order, int m, uint32_t k) {
  InfoSet set;
  set.m = m;
  set.k = k;
  FRUGAL_CHECK_EQ(order.size(), set.size(), "reliability order of a block of 2^", m);
  FRUGAL_CHECK_LE(k, order.size(), "information positions of a block of 2^", m);
  set.mask.assign(std::max<size_t>(1, set.size() / 64), 0);
  for (uint32_t j = 0; j < k; ++j) set.mask[order[j] / 64] |= uint64_t{1} << (order[j] % 64);
  std::vector<std::byte> bytes(5 + 8 * set.mask.size());
  bytes[0] = static_cast<std::byte>(m);
  std::memcpy(bytes.data() + 1, &k, 4);
  std::memcpy(bytes.data() + 5, set.mask.data(), 8 * set.mask.size());
  set.fingerprint = Crc32(bytes);
  return set;
}

}  // namespace frugal::polar
