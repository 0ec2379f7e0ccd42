// Uses the installed frugal: an all-reduce over two in-process ranks, the compressor registry
// and, with the torch adapter, a parameter broadcast. Prints one line per check.
#include <cstdio>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/compressor.h"
#include "frugal/inproc_transport.h"

#if defined(CONSUMER_WITH_TORCH)
#include "frugal_torch/distributed.h"
#endif

int main() {
  constexpr int kRanks = 2;
  std::mutex mu;
  std::vector<float> rank0_result;
  std::vector<frugal::Status> statuses = frugal::RunRanks(kRanks, [&](frugal::Transport& t) {
    std::vector<float> data(4, static_cast<float>(t.rank() + 1));
    frugal::Status s = frugal::Allreduce(t, std::span<float>(data), frugal::AllreduceOptions{});
    if (s.ok() && t.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      rank0_result = data;
    }
    return s;
  });
  for (const frugal::Status& s : statuses) {
    if (!s.ok()) {
      std::fprintf(stderr, "allreduce: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("allreduce over %d ranks:", kRanks);
  for (float x : rank0_result) std::printf(" %g", x);
  std::printf("\n");

  frugal::CompressorRegistry registry = frugal::DefaultCompressorRegistry();
  for (const std::string& name : registry.Names()) {
    auto compressor = registry.Create(name);
    if (!compressor.ok()) {
      std::fprintf(stderr, "compressor %s: %s\n", name.c_str(),
                   compressor.status().ToString().c_str());
      return 1;
    }
  }
  std::printf("compressors: %zu\n", registry.Names().size());

#if defined(CONSUMER_WITH_TORCH)
  std::vector<int> consistent(kRanks, 0);
  statuses = frugal::RunRanks(kRanks, [&](frugal::Transport& t) -> frugal::Status {
    torch::manual_seed(t.rank());  // different initial weights on each rank
    torch::nn::Linear layer(4, 2);
    frugal::Status s = frugal_torch::BroadcastParameters(t, *layer, 0, frugal::kDefaultTimeout);
    if (!s.ok()) return s;
    auto same = frugal_torch::ParametersConsistent(t, *layer, frugal::kDefaultTimeout);
    if (!same.ok()) return same.status();
    consistent[t.rank()] = *same ? 1 : 0;
    return frugal::Status::Ok();
  });
  for (const frugal::Status& s : statuses) {
    if (!s.ok()) {
      std::fprintf(stderr, "torch: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  bool all_consistent = true;
  for (int c : consistent) all_consistent = all_consistent && c == 1;
  std::printf("torch: parameters broadcast from rank 0, %s\n",
              all_consistent ? "consistent" : "INCONSISTENT");
#endif
  return 0;
}
