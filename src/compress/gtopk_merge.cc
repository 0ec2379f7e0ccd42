#include "compress/gtopk_merge.h"

#include <fmt/format.h>

#include <bit>

#include "compress/sparse_coding.h"

// gTop-k merge tree.
//
// MergeTopK walks a and b in index order into union_scratch (adding values at common indices;
// float addition is commutative, so both partners of a merge get the same bits) and keeps the
// top-k of the union with TopKSelector::SelectExact, whose tie rule (smaller index) is symmetric.
//
// GlobalTopK is recursive doubling with a fold for world sizes that are not powers of two. With
// p2 the largest power of two <= P and extra = P - p2:
//   1. fold: rank p2 + j (j < extra) sends its vector to rank j, which merges it into its own;
//   2. rounds: for mask = 1, 2, ..., p2 / 2, rank i < p2 exchanges its current vector with rank
//      i ^ mask and both replace it by MergeTopK of the two — after log2(p2) rounds all p2 ranks
//      hold the same vector, the top-k-of-unions of everyone's contribution;
//   3. unfold: rank j sends the result back to rank p2 + j.
// Survival: after each merge a rank marks dead every entry of its own (and, for a folding rank j,
// of its partner p2 + j) whose index is not in the merged vector. By induction an entry that is
// still alive at the end has its value inside the final value at its index; an entry dropped in
// some round is not counted in the final value even if its index comes back from another branch
// later. Rank j returns its partner's survival flags with the result. Messages are an index
// section plus float values (AppendSparseVector); sizes vary, so a receiver probes for the size
// first. A received vector with more than k entries or indices out of range is kMalformed.
namespace frugal::sparse {
namespace {

// Marks dead every alive entry of `mine` whose index is not in `merged` (both increasing).
void MarkSurvivors(const SparseVector& mine, const SparseVector& merged,
                   std::vector<uint8_t>* alive) {
  size_t j = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    uint32_t index = mine.indices[i];
    while (j < merged.size() && merged.indices[j] < index) ++j;
    if (j == merged.size() || merged.indices[j] != index) (*alive)[i] = 0;
  }
}

Status ReceiveProbed(Transport& t, int src, int tag, Duration timeout,
                     std::vector<std::byte>* buf) {
  FRUGAL_ASSIGN_OR_RETURN(ProbeResult probe, t.Probe(src, tag, timeout));
  buf->resize(probe.bytes);
  return Recv(t, src, tag, *buf, timeout);
}

// Sends `out` to peer and receives the peer's message into `in`.
Status Exchange(Transport& t, int peer, int tag, std::span<const std::byte> out,
                std::vector<std::byte>* in, Duration timeout) {
  std::unique_ptr<Work> send = t.ISend(peer, tag, out);
  Status received = ReceiveProbed(t, peer, tag, timeout, in);
  Status sent = send->Wait(timeout);
  FRUGAL_RETURN_IF_ERROR(received);
  return sent;
}

}  // namespace

void AppendSparseVector(const SparseVector& v, uint64_t n, std::vector<std::byte>* out) {
  AppendIndexSection(v.indices, n, out);
  AppendFloats(v.values, out);
}

Status ReadSparseVector(std::span<const std::byte> in, uint64_t n, size_t max_count,
                        SparseVector* out) {
  FRUGAL_ASSIGN_OR_RETURN(size_t used, ReadIndexSection(in, n, max_count, &out->indices));
  FRUGAL_ASSIGN_OR_RETURN(size_t value_bytes,
                          ReadFloats(in.subspan(used), out->indices.size(), &out->values));
  if (used + value_bytes != in.size()) {
    return MalformedError(fmt::format("sparse vector of {} entries has {} trailing bytes",
                                      out->indices.size(), in.size() - used - value_bytes));
  }
  return Status::Ok();
}

void MergeTopK(const SparseVector& a, const SparseVector& b, size_t k, SparseVector* union_scratch,
               TopKSelector& selector, SparseVector* out) {
  SparseVector& u = *union_scratch;
  u.indices.resize(a.size() + b.size());
  u.values.resize(a.size() + b.size());
  size_t i = 0, j = 0, m = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a.indices[i] < b.indices[j])) {
      u.indices[m] = a.indices[i];
      u.values[m++] = a.values[i++];
    } else if (i == a.size() || b.indices[j] < a.indices[i]) {
      u.indices[m] = b.indices[j];
      u.values[m++] = b.values[j++];
    } else {
      u.indices[m] = a.indices[i];
      u.values[m++] = a.values[i++] + b.values[j++];
    }
  }
  u.indices.resize(m);
  u.values.resize(m);
  // Top-k over the union's positions; positions are increasing with the indices, so the tie rule
  // on positions is the tie rule on indices.
  SparseVector picked;
  selector.SelectExact(u.values, k, &picked);
  out->indices.resize(picked.size());
  out->values.resize(picked.size());
  for (size_t p = 0; p < picked.size(); ++p) {
    out->indices[p] = u.indices[picked.indices[p]];
    out->values[p] = picked.values[p];
  }
}

Status GlobalTopK(Transport& t, const SparseVector& local, uint64_t n, size_t k,
                  const GlobalTopKOptions& options, SparseVector* global,
                  std::vector<uint8_t>* alive) {
  FRUGAL_CHECK_LE(local.size(), k, "gtopk: the local vector has more than k entries");
  const int size = t.size();
  const int rank = t.rank();
  const int p2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(size)));
  const int extra = size - p2;
  const int fold_tag = options.tag;
  const int round_tag = options.tag + 1;
  const int unfold_tag = options.tag + 2;
  alive->assign(local.size(), 1);
  *global = local;
  std::vector<std::byte> out_buf, in_buf;

  if (rank >= p2) {
    const int partner = rank - p2;
    AppendSparseVector(local, n, &out_buf);
    FRUGAL_RETURN_IF_ERROR(
        Send(t, partner, fold_tag, out_buf, options.timeout).Annotate("gtopk fold"));
    FRUGAL_RETURN_IF_ERROR(
        ReceiveProbed(t, partner, unfold_tag, options.timeout, &in_buf).Annotate("gtopk unfold"));
    // Result, then one survival byte per local entry.
    if (in_buf.size() < local.size()) return MalformedError("gtopk unfold message too short");
    size_t flags_at = in_buf.size() - local.size();
    FRUGAL_RETURN_IF_ERROR(
        ReadSparseVector(std::span(in_buf).first(flags_at), n, k, global).Annotate("gtopk unfold"));
    for (size_t i = 0; i < local.size(); ++i) {
      uint8_t flag = std::to_integer<uint8_t>(in_buf[flags_at + i]);
      if (flag > 1) return MalformedError("gtopk unfold: survival flag not 0 or 1");
      (*alive)[i] = flag;
    }
    return Status::Ok();
  }

  TopKSelector selector;
  SparseVector scratch, merged, theirs;
  SparseVector partner_local;
  std::vector<uint8_t> partner_alive;
  const bool folds = rank < extra;
  if (folds) {
    FRUGAL_RETURN_IF_ERROR(
        ReceiveProbed(t, rank + p2, fold_tag, options.timeout, &in_buf).Annotate("gtopk fold"));
    FRUGAL_RETURN_IF_ERROR(ReadSparseVector(in_buf, n, k, &partner_local).Annotate("gtopk fold"));
    partner_alive.assign(partner_local.size(), 1);
    MergeTopK(*global, partner_local, k, &scratch, selector, &merged);
    std::swap(*global, merged);
    MarkSurvivors(local, *global, alive);
    MarkSurvivors(partner_local, *global, &partner_alive);
  }
  for (int mask = 1; mask < p2; mask <<= 1) {
    const int peer = rank ^ mask;
    out_buf.clear();
    AppendSparseVector(*global, n, &out_buf);
    FRUGAL_RETURN_IF_ERROR(Exchange(t, peer, round_tag, out_buf, &in_buf, options.timeout)
                               .Annotate(fmt::format("gtopk round with rank {}", peer)));
    FRUGAL_RETURN_IF_ERROR(ReadSparseVector(in_buf, n, k, &theirs)
                               .Annotate(fmt::format("gtopk round with rank {}", peer)));
    MergeTopK(*global, theirs, k, &scratch, selector, &merged);
    std::swap(*global, merged);
    MarkSurvivors(local, *global, alive);
    if (folds) MarkSurvivors(partner_local, *global, &partner_alive);
  }
  if (folds) {
    out_buf.clear();
    AppendSparseVector(*global, n, &out_buf);
    for (uint8_t flag : partner_alive) out_buf.push_back(static_cast<std::byte>(flag));
    FRUGAL_RETURN_IF_ERROR(
        Send(t, rank + p2, unfold_tag, out_buf, options.timeout).Annotate("gtopk unfold"));
  }
  return Status::Ok();
}

}  // namespace frugal::sparse
