// 2D-torus all-reduce (Mikami et al. 2018; Ying et al. 2018, as used for large TPU/GPU pods).
//
// The n ranks are laid out as a grid of `rows` x `cols` (cols = n / rows): rank r sits at row
// r / cols, column r % cols. rows is options.torus_rows, or, when 0, the divisor of n closest to
// sqrt(n) (TorusRows; 1 for a prime n, which makes the torus a plain ring). Two Splits build the
// `row` group (color = row, key = column) and the `column` group (color = column, key = row), on
// the first call only: they are kept in the transport's SplitCache (split_cache.cc) under
// "torus/<rows>".
// Steps:
//   1. horizontal reduce-scatter: a ring reduce-scatter inside each row over cols blocks
//      (BlockPartition), leaving on the rank in column c the row's sum of block c;
//   2. vertical all-reduce: the ranks of column c all-reduce block c with `inner_algorithm`
//      (InnerOptions: plain sum), so each holds block c summed over the whole grid, then scale
//      it by 1/n for kAverage;
//   3. horizontal allgather: a ring allgather inside each row circulates the finished blocks.
// The rings are only cols (rows) long, so there are 2 (cols - 1) + the inner algorithm's steps
// instead of 2 (n - 1): fewer latency terms than a flat ring for the same 2 (n-1)/n-like volume.
// A 1 x n grid is exactly the ring all-reduce and an n x 1 grid the inner all-reduce; both run on
// the transport itself, without Split.
// Block c is summed by one deterministic vertical all-reduce and then copied, so results are
// bit-identical on all ranks.
#include <fmt/format.h>

#include <cmath>

#include "collectives/internal.h"

namespace frugal::coll {

int TorusRows(int n, int requested) {
  if (requested > 0) return requested;
  const double root = std::sqrt(static_cast<double>(n));
  int best = 1;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0 && std::abs(d - root) < std::abs(best - root)) best = d;
  }
  return best;
}

Status Torus2DAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options) {
  const int n = t.size();
  const int r = t.rank();
  if (options.torus_rows < 0 || options.torus_rows > n ||
      (options.torus_rows > 0 && n % options.torus_rows != 0)) {
    return InvalidArgumentError(
        fmt::format("torus_rows {} does not divide the number of ranks {}", options.torus_rows, n));
  }
  const int rows = TorusRows(n, options.torus_rows);
  const int cols = n / rows;
  const int row = r / cols;
  const int col = r % cols;
  if (rows == 1) return RingAllreduce(t, data, options);  // one row: the grid is a ring
  if (cols == 1) {
    // One column: only the vertical all-reduce is left, over the transport itself.
    FRUGAL_RETURN_IF_ERROR(Allreduce(t, data, InnerOptions(options)));
    if (options.op == ReduceOp::kAverage) ScaleForAverage(data, n);
    return Status::Ok();
  }
  SplitCache& cache = SplitCacheOf(t);
  const std::string key = fmt::format("torus/{}", rows);
  SplitCache::Entry* groups = cache.Find(key);
  if (groups == nullptr) {
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Transport> row_split,
                            t.Split(row, col, options.timeout));
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Transport> column_split,
                            t.Split(col, row, options.timeout));
    SplitCache::Entry entry;
    entry.groups.push_back(std::move(row_split));
    entry.groups.push_back(std::move(column_split));
    groups = &cache.Insert(key, std::move(entry));
  }
  Transport* const row_group = groups->groups[0].get();
  Transport* const column_group = groups->groups[1].get();
  std::vector<int> row_ranks;
  std::vector<int> column_ranks;
  for (int c = 0; c < cols; ++c) row_ranks.push_back(row * cols + c);
  for (int q = 0; q < rows; ++q) column_ranks.push_back(q * cols + col);

  const size_t seg = SegmentElems(SegmentBytes(options));
  const std::vector<Block> blocks = BlockPartitionAll(data.size(), cols);
  const DataIo io{options.data_owner};
  Status status =
      RingReduceScatter(*row_group, data, blocks, kTagTorusReduceScatter, seg, options.timeout, io);
  if (!status.ok()) {
    return status.Annotate(
        fmt::format("horizontal reduce-scatter over {}", DescribeRanks(row_ranks)));
  }
  const Block own = blocks[static_cast<size_t>(col)];
  const std::span<float> block = data.subspan(own.offset, own.count);
  if (column_group->size() > 1 && !block.empty()) {
    status = Allreduce(*column_group, block, InnerOptions(options));
    if (!status.ok()) {
      return status.Annotate(
          fmt::format("vertical allreduce over {}", DescribeRanks(column_ranks)));
    }
  }
  if (options.op == ReduceOp::kAverage) ScaleForAverage(block, n);
  status = RingAllgather(*row_group, FloatBytes(data), ToBytes(blocks, sizeof(float)),
                         kTagTorusAllgather, SegmentBytesOf(seg), options.timeout, io);
  if (!status.ok()) {
    return status.Annotate(fmt::format("horizontal allgather over {}", DescribeRanks(row_ranks)));
  }
  return Status::Ok();
}

}  // namespace frugal::coll
