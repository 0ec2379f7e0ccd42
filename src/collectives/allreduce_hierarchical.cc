// Hierarchical all-reduce: reduce inside each host, all-reduce across hosts, broadcast inside
// each host (the two-level scheme of Horovod's and NCCL's hierarchical all-reduce, with one
// leader per host).
//
// Hosts: with ranks_per_host = k > 0, rank r is on host r / k; with 0, every rank's
// Transport::hostname() is gathered with Allgatherv and ranks with equal names share a host,
// numbered by their lowest rank. Two Splits build the groups: `local` (color = host, key = rank:
// the ranks of one host in rank order, its rank 0 being the host's leader) and `cross`
// (color 0 for the leaders, 1 for the rest, key = rank). The host numbering and both groups are
// made on the first call only and kept in the transport's SplitCache (split_cache.cc) under
// "hier/<ranks_per_host>" or "hier/hostname", so later calls neither gather names nor split.
// Steps:
//   1. intra-host reduce: a TreePipeline without broadcast over HeapTree(local size, local rank,
//      0) leaves the host's sum on its leader, pipelined in segments of `segment_bytes`;
//   2. inter-host all-reduce: the leaders all-reduce their host sums with `inner_algorithm`
//      (InnerOptions: a plain sum, no second length check), then scale by 1/n for kAverage;
//   3. intra-host broadcast: the leader sends the result to its host's ranks (pipelined binomial
//      tree, BinomialBroadcast).
// Where the ranks of a host can map each other's memory (Transport::SharesMemoryWithPeers of the
// host's group), step 1 is the direct all-reduce inside the host instead (each rank sums a block
// reading its peers' buffers, as NCCL does within a node): every rank of the host then holds the
// host's sum, and the leader goes on with it. With a single host the reduce and broadcast are one
// all-reduce: the direct one where the ranks share memory, otherwise a pipelined tree all-reduce
// (HeapTree with broadcast, no Split); with one rank per host only step 2 remains, run on the
// transport itself.
// Only the leaders' traffic crosses hosts, N bytes each way per host instead of per rank. The
// inner all-reduce is deterministic and the broadcast copies, so results are bit-identical on all
// ranks. Errors inside a group name its ranks in both numberings ("rank 1 (world rank 5)").
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "collectives/tree.h"

namespace frugal {

StatusOr<std::vector<int>> HostOfEachRank(Transport& t, int ranks_per_host, Duration timeout) {
  const int n = t.size();
  std::vector<int> host(static_cast<size_t>(n));
  if (ranks_per_host > 0) {
    for (int r = 0; r < n; ++r) host[static_cast<size_t>(r)] = r / ranks_per_host;
    return host;
  }
  const std::string mine = t.hostname();
  std::vector<std::byte> names;
  std::vector<size_t> sizes;
  CollectiveOptions gather_options;
  gather_options.timeout = timeout;
  FRUGAL_RETURN_IF_ERROR(
      Allgatherv(t, std::as_bytes(std::span<const char>(mine)), names, sizes, gather_options)
          .Annotate("gathering host names"));
  std::map<std::string, int> first_rank;
  size_t offset = 0;
  for (int r = 0; r < n; ++r) {
    const size_t len = sizes[static_cast<size_t>(r)];
    std::string name(reinterpret_cast<const char*>(names.data()) + offset, len);
    offset += len;
    host[static_cast<size_t>(r)] = first_rank.emplace(std::move(name), r).first->second;
  }
  return host;
}

namespace coll {
namespace {

// The direct all-reduce inside a host: `op`, the direct all-reduce's own segment (the piece it
// sums in the cache), the caller's timeout and memory.
AllreduceOptions IntraHostOptions(const AllreduceOptions& options, ReduceOp op) {
  AllreduceOptions intra = options;
  intra.algorithm = AllreduceAlgorithm::kDirect;
  intra.op = op;
  intra.segment_bytes.reset();
  return intra;
}

}  // namespace

Status HierarchicalAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options) {
  const int n = t.size();
  const int r = t.rank();
  if (options.ranks_per_host < 0) {
    return InvalidArgumentError(
        fmt::format("ranks_per_host must be >= 0, got {}", options.ranks_per_host));
  }
  if (options.inner_algorithm == AllreduceAlgorithm::kDirect) {
    return InvalidArgumentError(
        "the direct all-reduce cannot run between hosts (hierarchical's inner algorithm)");
  }
  // The layout (hosts and the two groups) is split once per transport and kept in its SplitCache
  // under a key that every rank derives from the same option.
  const std::string key =
      options.ranks_per_host > 0 ? fmt::format("hier/{}", options.ranks_per_host) : "hier/hostname";
  SplitCache& cache = SplitCacheOf(t);
  SplitCache::Entry* layout = cache.Find(key);
  if (layout == nullptr) {
    FRUGAL_ASSIGN_OR_RETURN(std::vector<int> hosts,
                            HostOfEachRank(t, options.ranks_per_host, options.timeout));
    SplitCache::Entry entry;
    entry.host = std::move(hosts);
    layout = &cache.Insert(key, std::move(entry));
  }
  const std::vector<int>& host = layout->host;
  std::vector<int> local_members;
  std::vector<int> leaders;
  for (int q = 0; q < n; ++q) {
    if (host[static_cast<size_t>(q)] == host[static_cast<size_t>(r)]) local_members.push_back(q);
    if (q == 0 || std::find(host.begin(), host.begin() + q, host[static_cast<size_t>(q)]) ==
                      host.begin() + q) {
      leaders.push_back(q);
    }
  }
  const bool leader = local_members.front() == r;
  const float scale = options.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(n) : 1.0f;
  if (leaders.size() == 1) {
    // One host: the direct all-reduce where the ranks share memory; otherwise the intra-host
    // reduce and broadcast overlap as in the binary tree.
    if (t.SharesMemoryWithPeers()) {
      return DirectAllreduce(t, data, IntraHostOptions(options, options.op))
          .Annotate("intra-host direct allreduce (one host)");
    }
    TreePipeline tree(t, HeapTree(n, r, 0), data, SegmentElems(SegmentBytes(options)),
                      kTagHierReduce, options.timeout, scale, /*broadcast=*/true,
                      DataIo{options.data_owner});
    Status status = tree.Start();
    for (size_t s = 0; status.ok() && s < tree.segments(); ++s) status = tree.Step(s);
    if (status.ok()) status = tree.Finish();
    return status.Annotate("intra-host allreduce (one host)");
  }
  if (static_cast<int>(leaders.size()) == n) {
    // One rank per host: only the inter-host level is left.
    FRUGAL_RETURN_IF_ERROR(Allreduce(t, data, InnerOptions(options))
                               .Annotate("inter-host allreduce (one rank per host)"));
    if (options.op == ReduceOp::kAverage) ScaleForAverage(data, n);
    return Status::Ok();
  }
  if (layout->groups.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Transport> local_group,
                            t.Split(host[static_cast<size_t>(r)], r, options.timeout));
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Transport> leader_group,
                            t.Split(leader ? 0 : 1, r, options.timeout));
    layout->groups.push_back(std::move(local_group));
    layout->groups.push_back(std::move(leader_group));
  }
  Transport* const local = layout->groups[0].get();
  Transport* const cross = layout->groups[1].get();
  FRUGAL_INTERNAL_ASSERT(local->size() == static_cast<int>(local_members.size()));

  if (local->size() > 1 && local->SharesMemoryWithPeers()) {
    Status status = DirectAllreduce(*local, data, IntraHostOptions(options, ReduceOp::kSum));
    if (!status.ok()) {
      return status.Annotate(
          fmt::format("intra-host direct allreduce over {}", DescribeRanks(local_members)));
    }
  } else if (local->size() > 1) {
    TreePipeline reduce(*local, HeapTree(local->size(), local->rank(), 0), data,
                        SegmentElems(SegmentBytes(options)), kTagHierReduce, options.timeout, 1.0f,
                        /*broadcast=*/false, DataIo{options.data_owner});
    Status status = reduce.Start();
    for (size_t s = 0; status.ok() && s < reduce.segments(); ++s) status = reduce.Step(s);
    if (status.ok()) status = reduce.Finish();
    if (!status.ok()) {
      return status.Annotate(
          fmt::format("intra-host reduce over {}", DescribeRanks(local_members)));
    }
  }
  if (leader) {
    if (cross->size() > 1) {
      Status status = Allreduce(*cross, data, InnerOptions(options));
      if (!status.ok()) {
        return status.Annotate(
            fmt::format("inter-host allreduce over leaders {}", DescribeRanks(leaders)));
      }
    }
    if (options.op == ReduceOp::kAverage) ScaleForAverage(data, n);
  }
  if (local->size() > 1) {
    Status status =
        BinomialBroadcast(*local, FloatBytes(data), 0, kTagHierBroadcast,
                          SegmentBytesOf(SegmentElems(SegmentBytes(options))), options.timeout);
    if (!status.ok()) {
      return status.Annotate(
          fmt::format("intra-host broadcast over {}", DescribeRanks(local_members)));
    }
  }
  return Status::Ok();
}

}  // namespace coll
}  // namespace frugal
