// `frugal bench contention`: how much a model's compute slows down while an all-reduce moves on
// the same ranks, i.e. the CPU that communication (the collective's thread, TCP, emulated links)
// takes from the training thread. Built with frugal_torch only.
//
// Every rank builds the model (MakeModel with --seed), a fixed random batch of its input shape
// and random targets. A compute iteration is what a training step computes: zero_grad, forward,
// cross-entropy, backward and a step of SGD (lr 0.01). After `warmup` untimed iterations and a
// Barrier come two phases of `iters` iterations each, timed one by one:
//   alone  the iterations, then a Barrier;
//   busy   a thread loops ring all-reduces of `bytes` bytes, timing each, while the main thread
//          runs the iterations. Before each all-reduce the thread writes 1 into the buffer's last
//          float if the main thread has finished its iterations (compute_done), 0 otherwise;
//          the rest of the buffer stays zero, so sums stay zero. When that float sums to the
//          world size every rank has finished, and all ranks leave the loop after the same
//          all-reduce. With --topology T the loop runs gossip rounds instead (round k: `bytes`
//          to each out-neighbour of phase k of graph T, the in-neighbours' received, as D-PSGD's
//          round), each followed by an all-reduce of that one flag. The main thread starts
//          timing once the thread has entered its first exchange, so every timed iteration runs
//          while the loop runs. The thread owns the transport until it is joined; a failed
//          exchange (a dead peer: the timeout) ends it and becomes the command's error.
// Each rank's median alone iteration, median busy iteration, exchange count and median exchange
// time are gathered (Allgather); rank 0 prints them with the slowdown, the sum over ranks of busy
// medians over the sum of alone medians.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "bench_util.h"
#include "commands.h"
#include "frugal/collectives.h"
#include "frugal/gossip_graph.h"
#include "frugal/timer.h"
#include "frugal_torch/models.h"
#include "frugal_torch/text_corpus.h"
#include "frugal_torch/trainer.h"
#include "round_bench.h"

namespace frugal::apps {
namespace {

// Fashion-MNIST's images and classes (models.h).
constexpr int64_t kImageSide = 28;
constexpr int64_t kImageClasses = 10;

struct ContentionFlags {
  std::string model = "cnn";
  int batch = static_cast<int>(frugal_torch::TrainOptions{}.batch_size);
  std::string bytes = "4M";
  int iters = 20;
  int warmup = 3;
  int threads = frugal_torch::TrainOptions{}.threads;  // as `frugal train`
  uint64_t seed = 1;
  int timeout_ms = 60000;
  std::string topology;  // gossip rounds on this graph instead of all-reduces
  std::string json;
};

struct ContentionOptions {
  std::string model;
  int64_t batch = 0;
  size_t bytes = 0;
  int iters = 0;
  int warmup = 0;
  int threads = 1;
  uint64_t seed = 0;
  Duration timeout{};
  std::optional<TopologySpec> topology;  // unset: ring all-reduces
};

StatusOr<ContentionOptions> ParseContentionFlags(const ContentionFlags& flags) {
  ContentionOptions options;
  const std::vector<std::string> models = frugal_torch::ModelNames();
  if (std::find(models.begin(), models.end(), flags.model) == models.end()) {
    return InvalidArgumentError(
        fmt::format("unknown model '{}' (known: {})", flags.model, fmt::join(models, ", ")));
  }
  FRUGAL_ASSIGN_OR_RETURN(options.bytes, bench::ParseByteSize(flags.bytes));
  if (options.bytes < 2 * sizeof(float)) return InvalidArgumentError("--bytes must be at least 8");
  if (flags.batch <= 0) return InvalidArgumentError("--batch must be positive");
  if (flags.iters <= 0) return InvalidArgumentError("--iters must be positive");
  if (flags.warmup < 0) return InvalidArgumentError("--warmup must not be negative");
  if (flags.threads < 1) return InvalidArgumentError("--threads must be >= 1");
  if (flags.timeout_ms <= 0) return InvalidArgumentError("--timeout-ms must be positive");
  options.model = flags.model;
  options.batch = flags.batch;
  options.iters = flags.iters;
  options.warmup = flags.warmup;
  options.threads = flags.threads;
  options.seed = flags.seed;
  options.timeout = Duration(flags.timeout_ms);
  if (!flags.topology.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(options.topology, ParseTopologySpec(flags.topology));
  }
  return options;
}

// What the busy phase's loop runs: "all-reduce" or "round" (gossip rounds), as printed and in the
// record's field names.
std::string ExchangeName(const ContentionOptions& options) {
  return options.topology ? "round" : "allreduce";
}

// The model with a fixed batch of its input shape and SGD over its parameters.
class Workload {
 public:
  static StatusOr<std::unique_ptr<Workload>> Make(const ContentionOptions& options) {
    FRUGAL_ASSIGN_OR_RETURN(std::shared_ptr<frugal_torch::Classifier> model,
                            frugal_torch::MakeModel(options.model, options.seed));
    at::Generator generator = at::detail::createCPUGenerator(options.seed);
    torch::Tensor input;
    torch::Tensor target;
    const int64_t b = options.batch;
    if (options.model == "charlstm") {
      // Character codes as floats, N x 1 x 1 x L, and the next code of every position.
      const int64_t length = frugal_torch::TextCorpusOptions{}.sequence_length;
      const int64_t codes = frugal_torch::kCharVocabulary;
      input = torch::randint(codes, {b, 1, 1, length}, generator, torch::kFloat);
      target = torch::randint(codes, {b, length}, generator, torch::kLong);
    } else {
      input = torch::randn({b, 1, kImageSide, kImageSide}, generator, torch::kFloat);
      target = torch::randint(kImageClasses, {b}, generator, torch::kLong);
    }
    return std::unique_ptr<Workload>(new Workload(std::move(model), input, target));
  }

  // One compute iteration; returns its seconds.
  double Iteration() {
    const Stopwatch watch;
    sgd_.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(model_->forward(input_), target_);
    loss.backward();
    sgd_.step();
    return watch.Seconds();
  }

 private:
  Workload(std::shared_ptr<frugal_torch::Classifier> model, torch::Tensor input,
           torch::Tensor target)
      : model_(std::move(model)),
        input_(std::move(input)),
        target_(std::move(target)),
        sgd_(model_->parameters(), torch::optim::SGDOptions(0.01)) {
    model_->train();
  }

  std::shared_ptr<frugal_torch::Classifier> model_;
  torch::Tensor input_;
  torch::Tensor target_;
  torch::optim::SGD sgd_;
};

// What one rank measured; the fields in the order they are gathered.
struct RankResult {
  double alone_s = 0;
  double busy_s = 0;
  double exchanges = 0;
  double exchange_s = 0;
};
constexpr size_t kResultFields = 4;

// One exchange of the busy loop: a ring all-reduce of `buffer` whose last float carries the done
// flag, or a gossip round of the buffer's bytes and an all-reduce of the flag alone. flags_sum()
// is then the flag's sum over the ranks.
class Exchange {
 public:
  static StatusOr<Exchange> Make(Transport& world, const ContentionOptions& options) {
    Exchange e;
    e.buffer_.assign(options.bytes / sizeof(float), 0.0f);
    e.allreduce_.algorithm = AllreduceAlgorithm::kRing;
    e.allreduce_.timeout = options.timeout;
    e.allreduce_.check_lengths = false;
    if (options.topology) {
      FRUGAL_ASSIGN_OR_RETURN(bench::GossipRounds rounds,
                              bench::GossipRounds::Make(*options.topology, world.size(), 0));
      e.rounds_ = std::make_unique<bench::GossipRounds>(std::move(rounds));
    }
    return e;
  }

  Status Run(Transport& world, float done, Duration timeout) {
    if (!rounds_) {
      buffer_.back() = done;
      FRUGAL_RETURN_IF_ERROR(Allreduce(world, buffer_, allreduce_));
      flags_sum_ = buffer_.back();
      return Status::Ok();
    }
    FRUGAL_RETURN_IF_ERROR(rounds_->Run(world, round_++, FloatBytes(), timeout));
    flags_sum_ = done;
    return Allreduce(world, std::span<float>(&flags_sum_, 1), allreduce_);
  }
  float flags_sum() const { return flags_sum_; }

 private:
  std::span<const std::byte> FloatBytes() const { return std::as_bytes(std::span(buffer_)); }

  std::vector<float> buffer_;
  AllreduceOptions allreduce_;
  std::unique_ptr<bench::GossipRounds> rounds_;
  uint64_t round_ = 0;
  float flags_sum_ = 0;
};

// The busy phase: the compute iterations' seconds beside the exchange loop's (see the top).
Status RunBusyPhase(Transport& world, Workload& workload, const ContentionOptions& options,
                    std::vector<double>& compute_s, std::vector<double>& exchange_s) {
  FRUGAL_ASSIGN_OR_RETURN(Exchange exchange, Exchange::Make(world, options));
  const float everyone = static_cast<float>(world.size());
  std::atomic<bool> started{false};
  std::atomic<bool> compute_done{false};
  Status loop_status;
  std::thread loop([&] {
    for (;;) {
      const float done = compute_done.load() ? 1.0f : 0.0f;
      started.store(true);
      const Stopwatch watch;
      loop_status = exchange.Run(world, done, options.timeout);
      if (!loop_status.ok()) return;
      exchange_s.push_back(watch.Seconds());
      if (exchange.flags_sum() == everyone) return;
    }
  });
  // Ends the loop (once every rank is done) and joins it on every way out, exceptions included.
  struct Joiner {
    std::atomic<bool>& done;
    std::thread& thread;
    ~Joiner() {
      done.store(true);
      if (thread.joinable()) thread.join();
    }
  } joiner{compute_done, loop};
  while (!started.load()) std::this_thread::yield();
  for (int i = 0; i < options.iters; ++i) compute_s.push_back(workload.Iteration());
  compute_done.store(true);
  loop.join();
  return loop_status;
}

StatusOr<RankResult> MeasureRank(Transport& world, const ContentionOptions& options) {
  torch::set_num_threads(options.threads);
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Workload> workload, Workload::Make(options));
  const CollectiveOptions collective{.timeout = options.timeout};
  for (int i = 0; i < options.warmup; ++i) workload->Iteration();
  FRUGAL_RETURN_IF_ERROR(Barrier(world, collective));
  std::vector<double> alone_s;
  for (int i = 0; i < options.iters; ++i) alone_s.push_back(workload->Iteration());
  FRUGAL_RETURN_IF_ERROR(Barrier(world, collective));
  std::vector<double> busy_s;
  std::vector<double> exchange_s;
  FRUGAL_RETURN_IF_ERROR(RunBusyPhase(world, *workload, options, busy_s, exchange_s));
  return RankResult{.alone_s = bench::Median(alone_s),
                    .busy_s = bench::Median(busy_s),
                    .exchanges = static_cast<double>(exchange_s.size()),
                    .exchange_s = bench::Median(exchange_s)};
}

StatusOr<std::vector<RankResult>> GatherResults(Transport& world, const RankResult& mine,
                                                Duration timeout) {
  const std::vector<float> in = {static_cast<float>(mine.alone_s), static_cast<float>(mine.busy_s),
                                 static_cast<float>(mine.exchanges),
                                 static_cast<float>(mine.exchange_s)};
  std::vector<float> out(in.size() * world.size());
  FRUGAL_RETURN_IF_ERROR(Allgather(world, in, out, CollectiveOptions{.timeout = timeout}));
  std::vector<RankResult> results;
  for (size_t r = 0; r < static_cast<size_t>(world.size()); ++r) {
    const float* f = out.data() + r * kResultFields;
    results.push_back(RankResult{f[0], f[1], f[2], f[3]});
  }
  return results;
}

double Slowdown(const std::vector<RankResult>& results) {
  double alone = 0;
  double busy = 0;
  for (const RankResult& r : results) {
    alone += r.alone_s;
    busy += r.busy_s;
  }
  return busy / alone;
}

std::string ContentionTable(const ContentionOptions& options,
                            const std::vector<RankResult>& results) {
  const std::string what =
      options.topology ? fmt::format("gossip rounds on {} of", TopologySpecName(*options.topology))
                       : "ring all-reduce of";
  std::string text = fmt::format(
      "model {}, batch {}, {} torch thread(s) per rank, {} iterations; {} {}\n", options.model,
      options.batch, options.threads, options.iters, what, bench::FormatBytes(options.bytes));
  const std::string name = ExchangeName(options);
  bench::Table table({"rank", "compute_alone_ms", "compute_with_" + name + "_ms", "ratio",
                      name + "s", name + "_ms"});
  for (size_t r = 0; r < results.size(); ++r) {
    const RankResult& result = results[r];
    table.AddRow({fmt::format("{}", r), fmt::format("{:.2f}", result.alone_s * 1e3),
                  fmt::format("{:.2f}", result.busy_s * 1e3),
                  fmt::format("{:.3f}", result.busy_s / result.alone_s),
                  fmt::format("{}", static_cast<int64_t>(result.exchanges)),
                  fmt::format("{:.2f}", result.exchange_s * 1e3)});
  }
  return text + table.Render() +
         fmt::format("slowdown (sum of busy medians / sum of alone medians): {:.3f}\n",
                     Slowdown(results));
}

nlohmann::json ContentionJson(const ContentionOptions& options,
                              const std::vector<RankResult>& results) {
  nlohmann::json alone = nlohmann::json::array();
  nlohmann::json busy = nlohmann::json::array();
  nlohmann::json exchanges = nlohmann::json::array();
  nlohmann::json exchange_s = nlohmann::json::array();
  for (const RankResult& r : results) {
    alone.push_back(r.alone_s);
    busy.push_back(r.busy_s);
    exchanges.push_back(static_cast<int64_t>(r.exchanges));
    exchange_s.push_back(r.exchange_s);
  }
  const std::string name = ExchangeName(options);
  nlohmann::json record = {{"bench", "contention"},        {"pattern", name},
                           {"model", options.model},       {"batch", options.batch},
                           {"ranks", results.size()},      {"bytes", options.bytes},
                           {"iters", options.iters},       {"threads", options.threads},
                           {"compute_alone_s", alone},     {"compute_busy_s", busy},
                           {name + "s", exchanges},        {name + "_s", exchange_s},
                           {"slowdown", Slowdown(results)}};
  if (options.topology) record["topology"] = TopologySpecName(*options.topology);
  return record;
}

}  // namespace

void AddBenchContentionCommand(CLI::App& bench, Dispatcher& dispatcher) {
  auto flags = std::make_shared<ContentionFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "contention",
      "How much a model's compute slows down while ring all-reduces (or gossip rounds) run on "
      "the same ranks");
  cmd->add_option("--model", flags->model,
                  fmt::format("{}", fmt::join(frugal_torch::ModelNames(), ", ")))
      ->capture_default_str();
  cmd->add_option("--batch", flags->batch, "Samples per compute iteration")->capture_default_str();
  cmd->add_option("--bytes", flags->bytes, "Size of each all-reduce (K, M, G suffixes)")
      ->type_name("SIZE")
      ->capture_default_str();
  cmd->add_option("--iters", flags->iters,
                  "Timed compute iterations alone, then as many beside the all-reduces")
      ->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "Untimed compute iterations before them")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads, "Torch threads per rank")->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the model and of its random batch")
      ->capture_default_str();
  cmd->add_option("--timeout-ms", flags->timeout_ms, "Timeout of every wait")
      ->capture_default_str();
  cmd->add_option("--topology", flags->topology,
                  "Gossip rounds on this graph (ring, onepeer-exp, ... as --arch gossip's "
                  "topology) instead of ring all-reduces: each round sends --bytes to every "
                  "out-neighbour")
      ->type_name("GRAPH");
  cmd->add_option("--json", flags->json, "Write the result as one JSON object to FILE")
      ->type_name("FILE");
  cmd->callback([flags, &dispatcher] {
    Action action;
    action.name = "bench contention";
    action.validate = [flags] { return ParseContentionFlags(*flags).status(); };
    action.check_files = [flags] { return CheckJsonPath(flags->json); };
    action.min_ranks = 2;
    action.run = [flags](RankContext& context) -> Status {
      FRUGAL_ASSIGN_OR_RETURN(ContentionOptions options, ParseContentionFlags(*flags));
      FRUGAL_ASSIGN_OR_RETURN(RankResult mine, MeasureRank(context.world, options));
      FRUGAL_ASSIGN_OR_RETURN(std::vector<RankResult> results,
                              GatherResults(context.world, mine, options.timeout));
      return PublishBench(context, ContentionTable(options, results),
                          {ContentionJson(options, results)}, flags->json);
    };
    dispatcher.Select(std::move(action));
  });
}

}  // namespace frugal::apps
