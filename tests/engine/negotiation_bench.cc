// The cost of the engine's negotiation cycle, against a barrier measured in the same run.
//
// Every rank submits one single-float tensor and waits for it, `iterations` times, through an
// engine with a reducer that does nothing and a cycle time of zero: each iteration is one
// negotiation cycle (plus the engine's hand-offs), so the time per iteration is the cycle cost.
// The peer is frugal's Barrier over the same transport, run on the engine thread (Engine::Call)
// as many times: a barrier is the least any agreement among the ranks can cost. The figures are
// medians over `repeats` repetitions of the maximum over ranks of the mean time per iteration,
// and of the CPU time the ranks' processes used per cycle (waiting included: waits poll).
//
//   negotiation_bench --ranks 4,8,16 [--iterations 2000] [--repeats 5]      ranks as threads
//   mpirun -np 8 ... negotiation_bench --mpi [--iterations 2000] [--repeats 5]
//
// Prints a table and, per world size, one JSON line.
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/engine.h"
#include "frugal/inproc_transport.h"
#include "frugal/mpi_transport.h"
#include "frugal/timer.h"
#include "noop_reducer.h"

namespace frugal {
namespace {

using testing::NoOpReducer;

struct Sample {
  double cycle_us = 0;    // per iteration
  double barrier_us = 0;  // per barrier
  double cpu_us = 0;      // CPU time of the process per cycle (MPI: of this rank; threads: all)
  double cycles_per_iteration = 0;
  double messages_per_cycle = 0;  // sent by this rank, negotiation only
  double bytes_per_cycle = 0;
};

constexpr Duration kTimeout = std::chrono::seconds(60);

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

StatusOr<Sample> Measure(Transport& t, int iterations) {
  NoOpReducer reducer;
  EngineOptions options;
  options.cycle_time = Duration::zero();
  options.timeout = kTimeout;
  options.stall_warning = Duration::zero();
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, reducer, options));
  std::vector<float> value(1, 1.0f);
  TensorRequest request;
  request.name = "g";
  auto run = [&](int count) -> Status {
    for (int i = 0; i < count; ++i) {
      request.step = static_cast<uint64_t>(i);
      FRUGAL_RETURN_IF_ERROR(engine->Submit(request, value)->Wait(kTimeout));
    }
    return Status::Ok();
  };
  FRUGAL_RETURN_IF_ERROR(run(iterations / 10 + 1));  // warm-up: the tensor enters the cache
  uint64_t messages_before = 0;
  FRUGAL_RETURN_IF_ERROR(engine
                             ->Call("count",
                                    [&](Transport& tt) {
                                      FRUGAL_RETURN_IF_ERROR(
                                          Barrier(tt, CollectiveOptions{.timeout = kTimeout}));
                                      messages_before = tt.messages_sent();
                                      return Status::Ok();
                                    })
                             ->Wait(kTimeout));
  const EngineStats before = engine->stats();
  const double cpu_before = ProcessCpuSeconds();
  const Stopwatch watch;
  FRUGAL_RETURN_IF_ERROR(run(iterations));
  const double seconds = watch.Seconds();
  const double cpu_seconds = ProcessCpuSeconds() - cpu_before;
  const EngineStats after = engine->stats();
  Sample sample;
  double barrier_seconds = 0;
  FRUGAL_RETURN_IF_ERROR(
      engine
          ->Call("barriers",
                 [&](Transport& tt) -> Status {
                   const uint64_t messages = tt.messages_sent();
                   const uint64_t cycles = after.cycles - before.cycles;
                   sample.messages_per_cycle = static_cast<double>(messages - messages_before) /
                                               static_cast<double>(std::max<uint64_t>(1, cycles));
                   const Stopwatch barriers;
                   for (int i = 0; i < iterations; ++i) {
                     FRUGAL_RETURN_IF_ERROR(Barrier(tt, CollectiveOptions{.timeout = kTimeout}));
                   }
                   barrier_seconds = barriers.Seconds();
                   return Status::Ok();
                 })
          ->Wait(kTimeout));
  FRUGAL_RETURN_IF_ERROR(engine->Shutdown());
  const double cycles = static_cast<double>(after.cycles - before.cycles);
  sample.cycle_us = seconds / iterations * 1e6;
  sample.barrier_us = barrier_seconds / iterations * 1e6;
  sample.cycles_per_iteration = cycles / iterations;
  sample.cpu_us = cpu_seconds / std::max(1.0, cycles) * 1e6;
  sample.bytes_per_cycle = static_cast<double>(after.negotiation_bytes - before.negotiation_bytes) /
                           std::max(1.0, cycles);
  return sample;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Row {
  int ranks = 0;
  std::vector<double> cycle_us, barrier_us, cycles_per_iteration, messages, bytes, cpu_us;
};

// The slowest rank's sample of one repetition; sums over ranks for the message counts and
// (processes: one per rank) the CPU time; threads share one process, whose CPU time rank 0 took.
void Add(Row& row, const std::vector<Sample>& samples, bool processes) {
  double cycle = 0, barrier = 0, per = 0, messages = 0, bytes = 0, cpu = 0;
  for (const Sample& s : samples) {
    cycle = std::max(cycle, s.cycle_us);
    barrier = std::max(barrier, s.barrier_us);
    per = std::max(per, s.cycles_per_iteration);
    messages += s.messages_per_cycle;
    bytes += s.bytes_per_cycle;
    cpu += s.cpu_us;
  }
  row.cycle_us.push_back(cycle);
  row.barrier_us.push_back(barrier);
  row.cycles_per_iteration.push_back(per);
  row.messages.push_back(messages);
  row.bytes.push_back(bytes);
  row.cpu_us.push_back(processes ? cpu : samples[0].cpu_us);
}

void Print(const std::vector<Row>& rows, const std::string& transport, int iterations) {
  std::cout << fmt::format("{:>6} {:>12} {:>12} {:>8} {:>14} {:>12} {:>14} {:>14}\n", "ranks",
                           "cycle [us]", "barrier [us]", "ratio", "cpu/cycle [us]", "cycles/iter",
                           "msgs/cycle all", "bytes/cycle all");
  for (const Row& r : rows) {
    const double cycle = Median(r.cycle_us);
    const double barrier = Median(r.barrier_us);
    std::cout << fmt::format(
        "{:>6} {:>12.1f} {:>12.1f} {:>8.2f} {:>14.1f} {:>12.2f} {:>14.1f} {:>14.1f}\n", r.ranks,
        cycle, barrier, cycle / barrier, Median(r.cpu_us), Median(r.cycles_per_iteration),
        Median(r.messages), Median(r.bytes));
  }
  for (const Row& r : rows) {
    std::cout << fmt::format(
        R"({{"bench":"negotiation","transport":"{}","ranks":{},"iterations":{},"repeats":{},)"
        R"("cycle_us":{:.2f},"barrier_us":{:.2f},"ratio":{:.3f},"cpu_us_per_cycle":{:.2f},)"
        R"("cycles_per_iteration":{:.3f},"messages_per_cycle":{:.2f},"bytes_per_cycle":{:.1f}}})"
        "\n",
        transport, r.ranks, iterations, r.cycle_us.size(), Median(r.cycle_us), Median(r.barrier_us),
        Median(r.cycle_us) / Median(r.barrier_us), Median(r.cpu_us), Median(r.cycles_per_iteration),
        Median(r.messages), Median(r.bytes));
  }
}

int Usage(const std::string& message) {
  std::cerr << "negotiation_bench: " << message
            << "\nusage: negotiation_bench (--ranks N[,N...] | --mpi) [--iterations K] "
               "[--repeats R]\n";
  return 2;
}

int Main(int argc, char** argv) {
  std::vector<int> ranks;
  bool mpi = false;
  int iterations = 2000;
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--mpi") {
      mpi = true;
    } else if (arg == "--ranks") {
      const std::string list = value();
      size_t start = 0;
      while (start < list.size()) {
        const size_t comma = list.find(',', start);
        ranks.push_back(std::atoi(list.substr(start, comma - start).c_str()));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (arg == "--iterations") {
      iterations = std::atoi(value().c_str());
    } else if (arg == "--repeats") {
      repeats = std::atoi(value().c_str());
    } else {
      return Usage("unknown argument '" + arg + "'");
    }
  }
  if (iterations <= 0 || repeats <= 0) return Usage("--iterations and --repeats must be > 0");
  if (mpi == !ranks.empty()) return Usage("give either --ranks or --mpi");
  for (int n : ranks) {
    if (n < 1) return Usage("--ranks: world sizes must be >= 1");
  }
  std::vector<Row> rows;
  if (mpi) {
    StatusOr<std::unique_ptr<MpiRuntime>> runtime = MpiRuntime::Init(&argc, &argv);
    if (!runtime.ok()) return Usage(runtime.status().ToString());
    StatusOr<std::unique_ptr<Transport>> world = (*runtime)->World();
    if (!world.ok()) return Usage(world.status().ToString());
    Transport& t = **world;
    Row row;
    row.ranks = t.size();
    for (int r = 0; r < repeats; ++r) {
      StatusOr<Sample> sample = Measure(t, iterations);
      if (!sample.ok()) {
        std::cerr << "rank " << t.rank() << ": " << sample.status().ToString() << "\n";
        (*runtime)->Abort(1);
      }
      // Gather every rank's sample on rank 0.
      std::vector<std::byte> all;
      std::vector<size_t> sizes;
      Status gathered = Allgatherv(t, std::as_bytes(std::span<const Sample>(&*sample, 1)), all,
                                   sizes, CollectiveOptions{.timeout = kTimeout});
      if (!gathered.ok()) (*runtime)->Abort(1);
      std::vector<Sample> samples(static_cast<size_t>(t.size()));
      std::memcpy(samples.data(), all.data(), samples.size() * sizeof(Sample));
      Add(row, samples, true);
    }
    rows.push_back(row);
    if (t.rank() == 0) Print(rows, "mpi", iterations);
    world->reset();
    return 0;
  }
  for (int n : ranks) {
    Row row;
    row.ranks = n;
    for (int r = 0; r < repeats; ++r) {
      std::vector<Sample> samples(static_cast<size_t>(n));
      std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
        FRUGAL_ASSIGN_OR_RETURN(samples[static_cast<size_t>(t.rank())], Measure(t, iterations));
        return Status::Ok();
      });
      for (const Status& s : statuses) {
        if (!s.ok()) {
          std::cerr << "negotiation_bench: " << s.ToString() << "\n";
          return 1;
        }
      }
      Add(row, samples, false);
    }
    rows.push_back(row);
  }
  Print(rows, "inproc", iterations);
  return 0;
}

}  // namespace
}  // namespace frugal

int main(int argc, char** argv) { return frugal::Main(argc, argv); }
