// Global top-k (gTop-k, Shi et al. 2019) by pairwise merges over a Transport. Internal to
// frugal_compress.
//
// Every rank brings a sparse vector (its local top-k); the ranks merge them pairwise in
// ceil(log2 P) rounds, each merge keeping the top-k by magnitude of the union (values at common
// indices summed), until every rank holds the same global sparse vector of at most k entries. A
// rank also learns which of its own entries survived every merge on the way ("alive"): exactly
// those entries' values are contained in the global sum, so the others can go back to its
// residual and the total is conserved.
//
// Blocking, collective: every rank of `t` calls GlobalTopK with the same n, k and tag, in the same
// order. Waits are bounded by `timeout` (kTimeout names the peer); payloads that fail validation
// give kMalformed. Called by the thread that owns the transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compress/sparse_select.h"
#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal::sparse {

// out = top-k by magnitude (ties: smaller index) of a + b, where a and b are sparse vectors with
// increasing indices; values at common indices are added. Symmetric: Merge(a, b) == Merge(b, a)
// bit for bit. `union_scratch` and `selector` are scratch.
void MergeTopK(const SparseVector& a, const SparseVector& b, size_t k, SparseVector* union_scratch,
               TopKSelector& selector, SparseVector* out);

struct GlobalTopKOptions {
  Duration timeout = kDefaultTimeout;
  int tag = 0;  // tags tag, tag + 1 and tag + 2 are used
};

// `local` has increasing indices below n and at most k entries. On success `global` holds the
// merged vector (sums, not averages) and alive[i] is 1 when local entry i is part of it.
Status GlobalTopK(Transport& t, const SparseVector& local, uint64_t n, size_t k,
                  const GlobalTopKOptions& options, SparseVector* global,
                  std::vector<uint8_t>* alive);

// Serialisation of a sparse vector as it travels between ranks: an index section (see
// sparse_coding.h) followed by the float values.
void AppendSparseVector(const SparseVector& v, uint64_t n, std::vector<std::byte>* out);
// Reads a whole buffer; at most max_count entries, indices below n. Returns kMalformed otherwise.
Status ReadSparseVector(std::span<const std::byte> in, uint64_t n, size_t max_count,
                        SparseVector* out);

}  // namespace frugal::sparse
