// Communication graphs (see gossip_graph.h).
//
// Every rank builds the whole graph itself from the spec, n and the seed: the graphs are
// deterministic functions of these, so the ranks agree without exchanging anything.
//
// random-regular:degree=D (the pairing model with rejection): every rank gets D "stubs"; stubs
// are paired at random, a pair that would make a self loop or a repeated edge is redrawn (up to
// 100 times in a row), and the whole draw starts again when it gets stuck or the graph is not
// connected. Draw a (a = 0, 1, ...) uses the stream (seed, any rank, a, "gossip/random-regular").
// For D > (n-1)/2 the complement, an (n-1-D)-regular graph, is drawn instead (a dense simple
// graph is rarely hit by chance); its complement is D-regular.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>

#include "frugal/check.h"
#include "frugal/compressor.h"
#include "frugal/gossip_graph.h"
#include "frugal/random.h"

namespace frugal {
namespace {

using Adjacency = std::vector<std::vector<int>>;  // [rank] -> neighbours

constexpr std::string_view kAccepted =
    "ring, torus, exp, onepeer-exp, random-regular:degree=D, complete, file:PATH, "
    "edges:U-V/U-V/...";
constexpr int kMaxRanks = 1 << 16;
constexpr int kMaxDraws = 1000;

// Adds the undirected edge {a, b} (ignored when present).
void AddEdge(Adjacency& adj, int a, int b) {
  if (a == b) return;
  if (std::find(adj[a].begin(), adj[a].end(), b) == adj[a].end()) {
    adj[a].push_back(b);
    adj[b].push_back(a);
  }
}

Adjacency Ring(int n) {
  Adjacency adj(n);
  for (int i = 0; i < n; ++i) AddEdge(adj, i, (i + 1) % n);
  return adj;
}

Adjacency Torus(int n) {
  int rows = 1;
  for (int r = 1; r * r <= n; ++r) {
    if (n % r == 0) rows = r;
  }
  const int cols = n / rows;
  Adjacency adj(n);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const int i = r * cols + c;
      AddEdge(adj, i, ((r + 1) % rows) * cols + c);
      AddEdge(adj, i, r * cols + (c + 1) % cols);
    }
  }
  return adj;
}

Adjacency Exponential(int n) {
  Adjacency adj(n);
  for (int i = 0; i < n; ++i) {
    for (int64_t hop = 1; hop < n; hop *= 2) AddEdge(adj, i, static_cast<int>((i + hop) % n));
  }
  return adj;
}

Adjacency Complete(int n) {
  Adjacency adj(n);
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) AddEdge(adj, i, j);
  }
  return adj;
}

// Every rank is reachable from rank 0 along `adj` (directed lists).
bool AdjacencyConnected(const Adjacency& adj) {
  const int n = static_cast<int>(adj.size());
  if (n <= 1) return true;
  std::vector<char> seen(n, 0);
  std::vector<int> stack = {0};
  seen[0] = 1;
  int reached = 1;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    for (int w : adj[v]) {
      if (!seen[w]) {
        seen[w] = 1;
        ++reached;
        stack.push_back(w);
      }
    }
  }
  return reached == n;
}

// One draw of the pairing model; false when it got stuck.
bool DrawRegular(int n, int degree, RngStream& rng, Adjacency& adj) {
  adj.assign(n, {});
  std::vector<int> stubs;
  for (int i = 0; i < n; ++i) stubs.insert(stubs.end(), degree, i);
  while (!stubs.empty()) {
    bool paired = false;
    for (int attempt = 0; attempt < 100 && !paired; ++attempt) {
      const size_t a = rng.Below(stubs.size());
      const size_t b = rng.Below(stubs.size());
      const int u = stubs[a];
      const int v = stubs[b];
      if (a == b || u == v || std::find(adj[u].begin(), adj[u].end(), v) != adj[u].end()) {
        continue;
      }
      AddEdge(adj, u, v);
      stubs.erase(stubs.begin() + static_cast<long>(std::max(a, b)));
      stubs.erase(stubs.begin() + static_cast<long>(std::min(a, b)));
      paired = true;
    }
    if (!paired) return false;
  }
  return true;
}

Adjacency ComplementOf(const Adjacency& adj) {
  const int n = static_cast<int>(adj.size());
  Adjacency out(n);
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      if (std::find(adj[i].begin(), adj[i].end(), j) == adj[i].end()) AddEdge(out, i, j);
    }
  }
  return out;
}

StatusOr<Adjacency> RandomRegular(int n, int degree, uint64_t seed) {
  const std::string what =
      fmt::format("topology random-regular:degree={} over {} ranks", degree, n);
  if (degree < 1 || degree >= n) {
    return InvalidArgumentError(fmt::format("{}: the degree must be in [1, {}]", what, n - 1));
  }
  if ((static_cast<int64_t>(n) * degree) % 2 != 0) {
    return InvalidArgumentError(
        fmt::format("{}: ranks x degree must be even (no such graph exists)", what));
  }
  if (degree == 1 && n > 2) {
    return InvalidArgumentError(
        fmt::format("{}: a 1-regular graph is a matching, never connected", what));
  }
  const bool complement = degree > (n - 1) / 2;
  const int drawn = complement ? n - 1 - degree : degree;
  Adjacency adj;
  for (int draw = 0; draw < kMaxDraws; ++draw) {
    RngStream rng(
        RngKey{seed, kAnyRank, static_cast<uint64_t>(draw), TensorId("gossip/random-regular")});
    if (drawn == 0) {
      adj.assign(n, {});
    } else if (!DrawRegular(n, drawn, rng, adj)) {
      continue;
    }
    if (complement) adj = ComplementOf(adj);
    if (AdjacencyConnected(adj)) return adj;
  }
  return InvalidArgumentError(
      fmt::format("{}: no connected graph in {} draws (seed {})", what, kMaxDraws, seed));
}

// The undirected edges of `in`, one "u v" per line ('#' starts a comment). `where(line)` names
// the place of an error, `form` the form of an edge.
StatusOr<Adjacency> EdgeList(std::istream& in, int n,
                             const std::function<std::string(int line)>& where,
                             std::string_view form) {
  Adjacency adj(n);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> items;
    for (std::string w; words >> w;) items.push_back(w);
    if (items.empty()) continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgumentError(fmt::format("{}: {}", where(number), why));
    };
    if (items.size() != 2) return bad(fmt::format("expected two ranks '{}'", form));
    int ends[2];
    for (int k = 0; k < 2; ++k) {
      const std::string& w = items[static_cast<size_t>(k)];
      if (w.empty() || w.size() > 9 || w.find_first_not_of("0123456789") != std::string::npos) {
        return bad(fmt::format("'{}' is not a rank", w));
      }
      ends[k] = std::stoi(w);
      if (ends[k] >= n) {
        return bad(fmt::format("rank {} but the job has {} rank{}", ends[k], n, n == 1 ? "" : "s"));
      }
    }
    if (ends[0] == ends[1]) return bad(fmt::format("self loop at rank {}", ends[0]));
    AddEdge(adj, ends[0], ends[1]);
  }
  return adj;
}

StatusOr<Adjacency> FromFile(const std::string& path, int n) {
  std::ifstream in(path);
  if (!in) return IoError(fmt::format("topology file:{}: cannot read the file", path));
  return EdgeList(
      in, n, [&](int line) { return fmt::format("topology file:{} line {}", path, line); }, "u v");
}

// "0-1/1-2": the edges separated by '/', the ends of each by '-'.
StatusOr<Adjacency> FromEdges(const std::string& edges, int n) {
  std::string lines = edges;
  for (char& c : lines) {
    if (c == '/') c = '\n';
    if (c == '-') c = ' ';
  }
  std::istringstream in(lines);
  return EdgeList(
      in, n, [&](int edge) { return fmt::format("topology edges:{} edge {}", edges, edge); },
      "U-V");
}

// out[phase][rank] of the one-peer exponential graph.
std::vector<Adjacency> OnePeerExponential(int n) {
  int tau = 0;
  while ((int64_t{1} << tau) < n) ++tau;
  std::vector<Adjacency> phases;
  for (int k = 0; k < std::max(tau, 1); ++k) {
    Adjacency out(n);
    if (n > 1) {
      for (int i = 0; i < n; ++i) out[i] = {static_cast<int>((i + (int64_t{1} << k)) % n)};
    }
    phases.push_back(std::move(out));
  }
  return phases;
}

}  // namespace

StatusOr<TopologySpec> ParseTopologySpec(std::string_view text) {
  TopologySpec spec;
  if (text.rfind("file:", 0) == 0) {
    spec.kind = TopologyKind::kFile;
    spec.path = std::string(text.substr(5));
    if (spec.path.empty()) {
      return InvalidArgumentError("topology 'file:': expected file:PATH (an edge list)");
    }
    return spec;
  }
  if (text.rfind("edges:", 0) == 0) {
    spec.kind = TopologyKind::kEdges;
    spec.edges = std::string(text.substr(6));
    if (spec.edges.empty() || spec.edges.find_first_not_of("0123456789-/") != std::string::npos) {
      return InvalidArgumentError(fmt::format(
          "topology '{}': expected edges:U-V/U-V/... (ranks, '-' within an edge, '/' between)",
          text));
    }
    return spec;
  }
  StatusOr<CompressorParams> params = CompressorParams::Parse(text);
  if (!params.ok()) {
    return InvalidArgumentError(
        fmt::format("topology '{}': unknown topology (accepted: {})", text, kAccepted));
  }
  const std::string& name = params->name();
  if (name == "ring") {
    spec.kind = TopologyKind::kRing;
  } else if (name == "torus") {
    spec.kind = TopologyKind::kTorus;
  } else if (name == "exp") {
    spec.kind = TopologyKind::kExp;
  } else if (name == "onepeer-exp") {
    spec.kind = TopologyKind::kOnePeerExp;
  } else if (name == "complete") {
    spec.kind = TopologyKind::kComplete;
  } else if (name == "random-regular") {
    spec.kind = TopologyKind::kRandomRegular;
    if (!params->Has("degree")) {
      return InvalidArgumentError(fmt::format(
          "topology '{}': random-regular needs degree=D (random-regular:degree=D)", text));
    }
    StatusOr<int64_t> degree = params->Int("degree", 0, 1, kMaxRanks);
    if (!degree.ok()) {
      return InvalidArgumentError(fmt::format("topology {}", degree.status().message()));
    }
    spec.degree = static_cast<int>(*degree);
  } else {
    return InvalidArgumentError(
        fmt::format("topology '{}': unknown topology (accepted: {})", text, kAccepted));
  }
  Status finished = params->Finish();
  if (!finished.ok()) {
    return InvalidArgumentError(fmt::format("topology {}", finished.message()));
  }
  return spec;
}

std::string TopologySpecName(const TopologySpec& spec) {
  switch (spec.kind) {
    case TopologyKind::kRing:
      return "ring";
    case TopologyKind::kTorus:
      return "torus";
    case TopologyKind::kExp:
      return "exp";
    case TopologyKind::kOnePeerExp:
      return "onepeer-exp";
    case TopologyKind::kRandomRegular:
      return fmt::format("random-regular:degree={}", spec.degree);
    case TopologyKind::kComplete:
      return "complete";
    case TopologyKind::kFile:
      return "file:" + spec.path;
    case TopologyKind::kEdges:
      return "edges:" + spec.edges;
  }
  return "?";
}

StatusOr<Topology> Topology::Make(const TopologySpec& spec, int n, uint64_t seed) {
  if (n < 1 || n > kMaxRanks) {
    return InvalidArgumentError(
        fmt::format("a gossip topology needs 1 to {} ranks, not {}", kMaxRanks, n));
  }
  std::vector<Adjacency> phases;
  switch (spec.kind) {
    case TopologyKind::kRing:
      phases = {Ring(n)};
      break;
    case TopologyKind::kTorus:
      phases = {Torus(n)};
      break;
    case TopologyKind::kExp:
      phases = {Exponential(n)};
      break;
    case TopologyKind::kOnePeerExp:
      phases = OnePeerExponential(n);
      break;
    case TopologyKind::kComplete:
      phases = {Complete(n)};
      break;
    case TopologyKind::kRandomRegular: {
      if (n == 1) {
        phases = {Adjacency(1)};
        break;
      }
      FRUGAL_ASSIGN_OR_RETURN(Adjacency adj, RandomRegular(n, spec.degree, seed));
      phases = {std::move(adj)};
      break;
    }
    case TopologyKind::kFile: {
      FRUGAL_ASSIGN_OR_RETURN(Adjacency adj, FromFile(spec.path, n));
      phases = {std::move(adj)};
      break;
    }
    case TopologyKind::kEdges: {
      FRUGAL_ASSIGN_OR_RETURN(Adjacency adj, FromEdges(spec.edges, n));
      phases = {std::move(adj)};
      break;
    }
  }
  FRUGAL_ASSIGN_OR_RETURN(Topology topology,
                          FromOutNeighbours(TopologySpecName(spec), std::move(phases)));
  if (!topology.Connected()) {
    return InvalidArgumentError(
        fmt::format("topology {} over {} ranks is not connected: the models would never agree",
                    TopologySpecName(spec), n));
  }
  return topology;
}

StatusOr<Topology> Topology::FromOutNeighbours(std::string name,
                                               std::vector<std::vector<std::vector<int>>> out) {
  FRUGAL_CHECK(!out.empty(), "a topology needs at least one phase");
  Topology t;
  t.name_ = std::move(name);
  t.n_ = static_cast<int>(out[0].size());
  for (auto& phase : out) {
    FRUGAL_CHECK_EQ(phase.size(), static_cast<size_t>(t.n_), "phases of different sizes");
    std::vector<std::vector<int>> in(t.n_);
    for (int i = 0; i < t.n_; ++i) {
      std::sort(phase[i].begin(), phase[i].end());
      for (size_t k = 0; k < phase[i].size(); ++k) {
        const int j = phase[i][k];
        if (j < 0 || j >= t.n_ || j == i || (k > 0 && phase[i][k - 1] == j)) {
          return InvalidArgumentError(
              fmt::format("topology {}: bad edge {} -> {} (out of range, self loop or repeated)",
                          t.name_, i, j));
        }
        in[j].push_back(i);
      }
    }
    for (int i = 0; i < t.n_; ++i) {
      std::sort(in[i].begin(), in[i].end());
      if (in[i] != phase[i]) t.undirected_ = false;
    }
    t.in_.push_back(std::move(in));
  }
  t.out_ = std::move(out);
  return t;
}

std::span<const int> Topology::Out(int rank, uint64_t step) const {
  return out_[step % out_.size()][static_cast<size_t>(rank)];
}

std::span<const int> Topology::In(int rank, uint64_t step) const {
  return in_[step % in_.size()][static_cast<size_t>(rank)];
}

bool Topology::Connected() const {
  // Strong connectivity of the union: rank 0 reaches every rank over the out-edges and over the
  // in-edges.
  for (const auto* edges : {&out_, &in_}) {
    Adjacency adj(n_);
    for (const auto& phase : *edges) {
      for (int i = 0; i < n_; ++i) adj[i].insert(adj[i].end(), phase[i].begin(), phase[i].end());
    }
    if (!AdjacencyConnected(adj)) return false;
  }
  return true;
}

bool Topology::Bipartite(std::vector<int>* side) const {
  if (!undirected_) return false;
  std::vector<int> colour(n_, -1);
  for (int start = 0; start < n_; ++start) {
    if (colour[start] >= 0) continue;
    colour[start] = 0;
    std::vector<int> stack = {start};
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      for (const auto& phase : out_) {
        for (int w : phase[v]) {
          if (colour[w] < 0) {
            colour[w] = 1 - colour[v];
            stack.push_back(w);
          } else if (colour[w] == colour[v]) {
            return false;
          }
        }
      }
    }
  }
  if (side != nullptr) *side = std::move(colour);
  return true;
}

size_t Topology::EdgeCount() const {
  size_t edges = 0;
  for (const auto& phase : out_) {
    for (const auto& list : phase) edges += list.size();
  }
  return undirected_ ? edges / 2 : edges;
}

}  // namespace frugal
