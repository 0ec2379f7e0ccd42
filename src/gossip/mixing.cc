// Mixing matrices and their spectral gap (see gossip_mixing.h).
//
// Weights are computed in double and kept sparse, row by row and column by column. The spectral
// gap builds the dense matrix (of the product over one period for a time-varying graph) and asks
// Eigen for its eigenvalues: SelfAdjointEigenSolver for a symmetric matrix, EigenSolver (complex
// eigenvalues) otherwise. The largest modulus of a stochastic matrix is 1; the gap is 1 minus the
// second largest modulus, sorted in descending order.
#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "frugal/check.h"
#include "frugal/gossip_mixing.h"

namespace frugal {
namespace {

constexpr double kTolerance = 1e-12;

using Entries = std::vector<MixingMatrix::Entry>;

void SortByRank(Entries& entries) {
  std::sort(
      entries.begin(), entries.end(),
      [](const MixingMatrix::Entry& a, const MixingMatrix::Entry& b) { return a.rank < b.rank; });
}

bool SumsToOne(const std::vector<std::vector<Entries>>& lines) {
  for (const auto& phase : lines) {
    for (const Entries& line : phase) {
      double sum = 0;
      for (const auto& e : line) sum += e.weight;
      if (std::fabs(sum - 1.0) > kTolerance) return false;
    }
  }
  return true;
}

Eigen::MatrixXd DenseOf(const MixingMatrix& w, int phase) {
  const std::vector<double> dense = w.Dense(phase);
  Eigen::MatrixXd m(w.size(), w.size());
  for (int i = 0; i < w.size(); ++i) {
    for (int j = 0; j < w.size(); ++j) m(i, j) = dense[static_cast<size_t>(i) * w.size() + j];
  }
  return m;
}

}  // namespace

StatusOr<MixingKind> ParseMixingKind(std::string_view text) {
  if (text == "uniform") return MixingKind::kUniform;
  if (text == "metropolis") return MixingKind::kMetropolis;
  return InvalidArgumentError(
      fmt::format("mixing '{}': unknown mixing matrix (accepted: uniform, metropolis)", text));
}

std::string_view MixingKindName(MixingKind kind) {
  return kind == MixingKind::kUniform ? "uniform" : "metropolis";
}

StatusOr<MixingMatrix> MixingMatrix::Make(const Topology& topology, MixingKind kind) {
  if (kind == MixingKind::kMetropolis && !topology.undirected()) {
    return InvalidArgumentError(
        fmt::format("mixing=metropolis needs an undirected graph; topology {} is directed (use "
                    "mixing=uniform)",
                    topology.name()));
  }
  MixingMatrix w;
  w.kind_ = kind;
  w.n_ = topology.size();
  const int n = w.n_;
  for (int phase = 0; phase < topology.period(); ++phase) {
    const auto step = static_cast<uint64_t>(phase);
    std::vector<Entries> rows(n);
    std::vector<Entries> cols(n);
    for (int i = 0; i < n; ++i) {
      const std::span<const int> out = topology.Out(i, step);
      if (kind == MixingKind::kUniform) {
        const double share = 1.0 / static_cast<double>(out.size() + 1);
        cols[i].push_back({i, share});
        for (int j : out) cols[i].push_back({j, share});
      } else {
        double others = 0;
        for (int j : out) {
          const size_t degree = std::max(out.size(), topology.Out(j, step).size());
          const double weight = 1.0 / static_cast<double>(1 + degree);
          cols[i].push_back({j, weight});
          others += weight;
        }
        cols[i].push_back({i, 1.0 - others});
      }
      SortByRank(cols[i]);
    }
    for (int i = 0; i < n; ++i) {
      for (const Entry& e : cols[i]) rows[e.rank].push_back({i, e.weight});
    }
    for (Entries& row : rows) SortByRank(row);
    w.rows_.push_back(std::move(rows));
    w.cols_.push_back(std::move(cols));
  }
  return w;
}

std::span<const MixingMatrix::Entry> MixingMatrix::Row(int i, uint64_t step) const {
  return rows_[step % rows_.size()][static_cast<size_t>(i)];
}

std::span<const MixingMatrix::Entry> MixingMatrix::Column(int i, uint64_t step) const {
  return cols_[step % cols_.size()][static_cast<size_t>(i)];
}

double MixingMatrix::Weight(int i, int j, uint64_t step) const {
  for (const Entry& e : Row(i, step)) {
    if (e.rank == j) return e.weight;
  }
  return 0;
}

bool MixingMatrix::RowStochastic() const { return SumsToOne(rows_); }
bool MixingMatrix::ColumnStochastic() const { return SumsToOne(cols_); }

bool MixingMatrix::Symmetric() const {
  for (int phase = 0; phase < period(); ++phase) {
    for (int i = 0; i < n_; ++i) {
      for (const Entry& e : rows_[phase][i]) {
        if (std::fabs(e.weight - Weight(e.rank, i, static_cast<uint64_t>(phase))) > kTolerance) {
          return false;
        }
      }
    }
  }
  return true;
}

std::vector<double> MixingMatrix::Dense(int phase) const {
  FRUGAL_CHECK(phase >= 0 && phase < period(), "phase ", phase, " of ", period());
  std::vector<double> dense(static_cast<size_t>(n_) * n_, 0.0);
  for (int i = 0; i < n_; ++i) {
    for (const Entry& e : rows_[phase][i]) dense[static_cast<size_t>(i) * n_ + e.rank] = e.weight;
  }
  return dense;
}

double SpectralGap(const MixingMatrix& w) {
  if (w.size() <= 1) return 1.0;
  std::vector<double> moduli;
  if (w.period() == 1 && w.Symmetric()) {
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(DenseOf(w, 0), Eigen::EigenvaluesOnly);
    for (double l : solver.eigenvalues()) moduli.push_back(std::fabs(l));
  } else {
    Eigen::MatrixXd product = DenseOf(w, 0);
    for (int phase = 1; phase < w.period(); ++phase) product = DenseOf(w, phase) * product;
    Eigen::EigenSolver<Eigen::MatrixXd> solver(product, /*computeEigenvectors=*/false);
    for (const std::complex<double>& l : solver.eigenvalues()) moduli.push_back(std::abs(l));
  }
  std::sort(moduli.begin(), moduli.end(), std::greater<double>());
  const double second = std::pow(std::min(1.0, moduli[1]), 1.0 / w.period());
  return std::clamp(1.0 - second, 0.0, 1.0);
}

}  // namespace frugal
