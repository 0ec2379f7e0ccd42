// The strategy factory's rules: which options combine, and what each combination means for the
// reducer and the optimizer. Every caller (the command line, sweeps, bindings) goes through
// PlanStrategy, so a combination is accepted or refused in one place.
//
// Rules:
//  - --ef, --worker-momentum, --aggregate and --compress-min-bytes need --compress;
//  - --compress runs over frugal's transport: not with allreduce:mpi;
//  - DGC (Lin et al. 2018) moves the optimizer's momentum into the compressor (momentum
//    correction; otherwise the momentum would be applied twice and training diverges) and counts
//    its warm-up in epochs: a dgc spec without momentum= takes --momentum, one without
//    epoch_steps= takes the run's steps per epoch, and unless it says momentum=0 the optimizer
//    runs without momentum (and --nesterov is refused);
//  - worker momentum (momentum on each worker before compression) needs --momentum > 0, does not
//    combine with DGC, and the optimizer then runs without momentum;
//  - Signum under BSP keeps its momentum on the worker as DGC does: a signum spec without beta=
//    takes --momentum and the optimizer runs without momentum (no --nesterov, no
//    --worker-momentum); the sign votes (sign, signum) move each coordinate by the learning
//    rate, so without a --lr (StrategyOptions::lr_given) the plan sets one of their scale
//    (StrategyPlan::lr, listed in implied);
//  - 1-bit compressors that are re-quantizable and need error feedback (onebit, efsign) lose 2-3
//    points of accuracy on the automatic two-phase path (a biased partial sum is quantized again)
//    with the optimizer's momentum spreading each step's error over the following steps. Under
//    BSP, with neither --aggregate nor --worker-momentum given, the plan gives them what keeps
//    them within a point and a half of dense on the 4-rank cnn (performance.md): all-gather,
//    worker momentum (when --momentum > 0) and error feedback, and lists what it added in
//    StrategyPlan::implied; `--aggregate twophase` (or any explicit path) keeps the old path;
//  - a summable compressor that needs error feedback (random-k without its n/k scale) given
//    under BSP with none of --ef, --aggregate and --worker-momentum runs with error feedback:
//    alone it ends 3.9 points below dense on the 4-rank cnn, with it 1.4 on the mean of three
//    seeds (performance.md, "Every compressor alone");
//  - --od-sgd and --skip-comm exclude each other, and belong to BSP;
//  - Local SGD exchanges model deltas, not gradients: no DGC and no worker momentum (both are
//    defined on gradients); a compressor on model deltas always keeps an error-feedback residual
//    (what a round's compression dropped is sent in a later round, as in Lin et al.'s and
//    Stich's local-SGD-with-compression analyses);
//  - FedAvg runs its own round loop: no --od-sgd, --skip-comm, DGC or worker momentum. Its
//    compressor encodes each client's model delta on its own (always with a per-client
//    error-feedback residual) and the server decodes every upload apart: so no --aggregate, and
//    no compressor that only aggregates across ranks (custom aggregation: powersgd, gtopk,
//    terngrad; majority vote: sign, signum). Its reducer, the exact aggregate over the workers,
//    is dense.
//  - the parameter server (--arch ps) runs the optimizer on its servers and has its own exchange:
//    not with --od-sgd or --skip-comm (engine modes of all-reduce), nor Local SGD / FedAvg. Its
//    pushes take --compress (and --ef), its answers --compress-pull (pulls need every worker to
//    pull every version: bsp or lag), each with a compressor that codes one key on its own (not
//    powersgd, gtopk, terngrad, sign, signum), not dgc; --compress-pull needs --arch ps. Its
//    consistency models are --sync bsp, ssp, asp, backup and lag; ssp, backup and lag exist only
//    over it (asp also over gossip); backup needs B < W (with the number of workers);
//    --staleness-policy applies to ssp and asp only. Its reducer (the workers' evaluation
//    exchanges) is the dense ring.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "frugal/compressor.h"
#include "frugal/strategy.h"
#include "strategy/gossip_strategy.h"

namespace frugal {
namespace {

// DGC's (and Signum's) adaptation of the spec to the optimizer and the run.
struct DgcAdaptation {
  std::string spec;
  bool is_dgc = false;
  bool takes_momentum = false;  // the optimizer must run without momentum
  std::string name;             // of the compressor that takes it (dgc, signum)
  std::string off;              // the spec that turns its momentum off
};

DgcAdaptation AdaptDgcSpec(const std::string& spec, double momentum, int64_t steps_per_epoch) {
  StatusOr<CompressorParams> params = CompressorParams::Parse(spec);
  // Another compressor, or a spec the registry will refuse with its own message.
  if (!params.ok() || params->name() != "dgc") return {spec, false, false};
  std::string adapted = spec;
  auto add = [&](const std::string& item) {
    adapted += (adapted.find(':') == std::string::npos ? ":" : ",") + item;
  };
  if (!params->Has("momentum")) add(fmt::format("momentum={}", momentum));
  if (!params->Has("epoch_steps") && steps_per_epoch > 0) {
    add(fmt::format("epoch_steps={}", steps_per_epoch));
  }
  // A malformed momentum value counts as non-zero; the registry refuses it.
  StatusOr<double> correction = params->Double("momentum", momentum, 0.0, 1.0);
  return {adapted, true, !correction.ok() || *correction != 0, "dgc", "dgc:momentum=0"};
}

// Signum (Bernstein et al. 2018) keeps a momentum on each worker and votes on its sign: a signum
// spec without beta= takes --momentum, and unless its beta is 0 the optimizer runs without
// momentum (a second momentum after the vote). Other specs come back unchanged.
DgcAdaptation AdaptSignumSpec(const std::string& spec, double momentum) {
  StatusOr<CompressorParams> params = CompressorParams::Parse(spec);
  if (!params.ok() || params->name() != "signum") return {spec, false, false};
  std::string adapted = spec;
  if (!params->Has("beta")) {
    adapted += fmt::format("{}beta={}", spec.find(':') == std::string::npos ? ":" : ",",
                           std::min(momentum, 0.999999));
  }
  StatusOr<double> beta = params->Double("beta", momentum, 0.0, 1.0);
  return {adapted, false, !beta.ok() || *beta != 0, "signum", "signum:beta=0"};
}

// Sign-vote compressors move every coordinate by the learning rate itself (the vote is +-1), so
// an SGD learning rate such as --lr's default 0.05 diverges (cnn, 4 workers: 10% accuracy). When
// none is given the plan takes these, from runs of the 4-worker cnn (performance.md, "Every
// compressor alone"): Signum (worker momentum) 1e-3, signSGD under the optimizer's momentum 1e-4.
constexpr double kSignumLearningRate = 1e-3;
constexpr double kSignLearningRate = 1e-4;

// FedAvg's server decodes each client's upload apart (see the rules above).
Status CheckFedAvgCompressor(const Compressor& compressor, const StrategyOptions& options) {
  if (options.aggregate != "auto") {
    return InvalidArgumentError(fmt::format(
        "--aggregate {} does not apply to --sync fedavg: the server decodes each client's upload "
        "on its own",
        options.aggregate));
  }
  const CompressorTraits traits = compressor.traits();
  if (traits.custom_aggregate || traits.sign_vote) {
    return InvalidArgumentError(fmt::format(
        "--compress {} aggregates across ranks; --sync fedavg compresses each client's upload on "
        "its own (use e.g. topk, randomk, qsgd, fp16)",
        compressor.name()));
  }
  return Status::Ok();
}

Status CheckCompression(const StrategyOptions& options, StrategyPlan& plan) {
  if (options.compress.empty()) {
    if (options.error_feedback || options.worker_momentum || options.aggregate != "auto" ||
        options.compress_min_bytes != 65536) {
      return InvalidArgumentError(
          "--ef, --worker-momentum, --aggregate and --compress-min-bytes need --compress");
    }
    return Status::Ok();
  }
  if (IsLibraryAllreduce(plan.arch.algorithm)) {
    return InvalidArgumentError(fmt::format(
        "--compress runs over frugal's transport: --arch allreduce:{} does not apply (use "
        "ring, rd, rabenseifner, tree, dbtree, hier or torus)",
        plan.arch.algorithm));
  }
  const bool exchanges_models = plan.sync.kind != SyncKind::kBsp;
  DgcAdaptation dgc = AdaptDgcSpec(options.compress, options.momentum, 0);
  if (!dgc.is_dgc && !exchanges_models) dgc = AdaptSignumSpec(options.compress, options.momentum);
  plan.dgc = dgc.is_dgc;
  if (exchanges_models && dgc.is_dgc) {
    return InvalidArgumentError(fmt::format(
        "--compress dgc works on gradients; --sync {} exchanges models (use e.g. topk or qsgd)",
        SyncSpecName(plan.sync)));
  }
  if (exchanges_models && options.worker_momentum) {
    return InvalidArgumentError(
        fmt::format("--worker-momentum works on gradients; --sync {} exchanges models",
                    SyncSpecName(plan.sync)));
  }
  // Created now: the rules below read its traits, and a bad spec is refused before anything runs.
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> compressor,
                          DefaultCompressorRegistry().Create(dgc.spec));
  // efsign comes wrapped in its own error feedback: the traits are those of what it wraps.
  const CompressorTraits traits =
      compressor->inner() != nullptr ? compressor->inner()->traits() : compressor->traits();
  const bool one_bit_defaults = !exchanges_models && options.aggregate == "auto" &&
                                !options.worker_momentum && traits.requantizable &&
                                traits.needs_error_feedback;
  // Random-k (summable, biased without its n/k scale) keeps no memory of the 99% of each gradient
  // it leaves out unless error feedback does: given alone under BSP it runs with it.
  const bool summable_defaults = !exchanges_models && options.aggregate == "auto" &&
                                 !options.worker_momentum && !options.error_feedback &&
                                 traits.summable && traits.needs_error_feedback &&
                                 compressor->inner() == nullptr;
  const bool worker_momentum =
      options.worker_momentum || (one_bit_defaults && options.momentum > 0);
  CompressedReducerOptions compressed;
  compressed.spec = dgc.spec;
  compressed.error_feedback =
      options.error_feedback || exchanges_models || one_bit_defaults || summable_defaults;
  if (summable_defaults) plan.implied.push_back("--ef");
  if (worker_momentum) {
    if (dgc.takes_momentum) {
      return InvalidArgumentError(fmt::format(
          "--worker-momentum does not combine with {}, whose momentum already runs on the worker",
          dgc.name));
    }
    if (!(options.momentum > 0)) {
      return InvalidArgumentError("--worker-momentum needs a --momentum above 0");
    }
    compressed.worker_momentum = options.momentum;
    compressed.worker_nesterov = options.nesterov;
    plan.optimizer_momentum = 0;
    plan.optimizer_nesterov = false;
  }
  if (dgc.takes_momentum) {
    if (options.nesterov) {
      return InvalidArgumentError(
          fmt::format("--nesterov does not combine with {}'s momentum on the worker ({} turns it "
                      "off)",
                      dgc.name, dgc.off));
    }
    plan.optimizer_momentum = 0;
  }
  if (traits.sign_vote && !exchanges_models && !options.lr_given) {
    // Signum's rate where its momentum runs on the worker; signSGD's otherwise (signum:beta=0).
    plan.lr = dgc.takes_momentum ? kSignumLearningRate : kSignLearningRate;
    plan.implied.push_back(fmt::format("--lr {}", *plan.lr));
  }
  compressed.min_bytes = options.compress_min_bytes;
  FRUGAL_ASSIGN_OR_RETURN(compressed.path, ParseAggregationPath(options.aggregate));
  if (one_bit_defaults) {
    compressed.path = AggregationPath::kAllgather;
    plan.implied.push_back("--aggregate allgather");
    if (worker_momentum) plan.implied.push_back("--worker-momentum");
    if (!options.error_feedback && compressor->inner() == nullptr) plan.implied.push_back("--ef");
  }
  if (plan.arch.kind == ArchKind::kAllreduce) {
    FRUGAL_ASSIGN_OR_RETURN(compressed.algorithm, ParseAllreduceAlgorithm(plan.arch.algorithm));
  }
  compressed.seed = options.seed;
  compressed.timeout = options.timeout;
  // The compressor must suit the aggregation path: checked now, before anything runs.
  if (compressed.error_feedback && compressor->inner() == nullptr) {
    compressor = WithErrorFeedback(std::move(compressor));
  }
  if (plan.sync.kind == SyncKind::kFedAvg) {
    FRUGAL_RETURN_IF_ERROR(CheckFedAvgCompressor(*compressor, options));
  } else {
    FRUGAL_RETURN_IF_ERROR(CheckAggregationPath(*compressor, compressed.path));
  }
  plan.compressed = std::move(compressed);
  return Status::Ok();
}

Status CheckParameterServer(const StrategyOptions& options, const StrategyPlan& plan) {
  if (plan.arch.kind != ArchKind::kParameterServer) return Status::Ok();
  const std::string arch = ArchSpecName(plan.arch);
  if (options.od_sgd || options.skip_comm) {
    return InvalidArgumentError(fmt::format("--{} runs over all-reduce, not --arch {}",
                                            options.od_sgd ? "od-sgd" : "skip-comm", arch));
  }
  if (plan.sync.kind == SyncKind::kFedAvg) {
    // The servers hold the global model and average the uploads, weighted by sample count; the
    // clients' uploads are compressed (if at all) as over all-reduce, each on its own.
    if (!options.compress_pull.empty() || plan.staleness_policy != StalenessPolicy::kNone) {
      return InvalidArgumentError(fmt::format(
          "--sync {} over --arch {}: --compress-pull and --staleness-policy do not apply (every "
          "worker pulls the dense global model once per round, no update is stale)",
          SyncSpecName(plan.sync), arch));
    }
  }
  if (plan.sync.kind == SyncKind::kLocal &&
      (plan.sync.start_epoch > 0 || plan.sync.intra_period > 0 || plan.sync.average_momenta ||
       plan.sync.overlap)) {
    return InvalidArgumentError(fmt::format(
        "--sync {} over --arch {}: start-epoch, intra-period, momenta=1 and overlap=1 do not "
        "apply (the servers average the workers' models, every period local steps, and run no "
        "optimizer)",
        SyncSpecName(plan.sync), arch));
  }
  if (plan.sync.kind == SyncKind::kBackup && options.workers > 0 &&
      plan.sync.backup_workers >= options.workers) {
    return InvalidArgumentError(
        fmt::format("--sync {} needs fewer backup workers than the {} workers (B < W)",
                    SyncSpecName(plan.sync), options.workers));
  }
  return Status::Ok();
}

// The parameter server's compression: --compress on the pushes (--ef: the workers' residual),
// --compress-pull on the answers (the servers' residual). The workers' exchanges of the
// all-reduce modes (--worker-momentum, --aggregate, --compress-min-bytes) and DGC, which moves
// the optimizer's momentum onto the workers while the servers run the optimizer, do not apply.
Status PlanParameterServerCompression(const StrategyOptions& options, StrategyPlan& plan) {
  const std::string arch = ArchSpecName(plan.arch);
  if (options.compress.empty() && (options.error_feedback || options.worker_momentum)) {
    return InvalidArgumentError("--ef and --worker-momentum need --compress");
  }
  if (options.worker_momentum || options.aggregate != "auto" ||
      options.compress_min_bytes != 65536) {
    return InvalidArgumentError(fmt::format(
        "--worker-momentum, --aggregate and --compress-min-bytes do not apply to --arch {} (its "
        "servers run the optimizer and decode every push of every key)",
        arch));
  }
  if (AdaptDgcSpec(options.compress, 0, 0).is_dgc ||
      AdaptDgcSpec(options.compress_pull, 0, 0).is_dgc) {
    return InvalidArgumentError(fmt::format(
        "dgc moves the optimizer's momentum onto the workers; over --arch {} the servers run the "
        "optimizer (use e.g. topk with --ef)",
        arch));
  }
  plan.push_compress = options.compress;
  // Model deltas, as Local SGD's over all-reduce, always keep an error-feedback residual.
  plan.push_error_feedback =
      options.error_feedback || (plan.sync.kind == SyncKind::kLocal && !options.compress.empty());
  plan.pull_compress = options.compress_pull;
  // Only whether workers may skip versions matters here: bsp, lag and local do not, the others
  // do.
  ParameterServerConfig config;
  config.consistency = plan.sync.kind == SyncKind::kBsp || plan.sync.kind == SyncKind::kLag ||
                               plan.sync.kind == SyncKind::kLocal
                           ? PsConsistency::kBsp
                           : PsConsistency::kAsp;
  config.push_compress = plan.push_compress;
  config.pull_compress = plan.pull_compress;
  Status status = CheckParameterServerCompression(config);
  if (!status.ok()) {
    if (status.message().rfind("--compress", 0) == 0) return status;
    return InvalidArgumentError(fmt::format("--compress-pull {} does not run with --sync {}: {}",
                                            plan.pull_compress, SyncSpecName(plan.sync),
                                            status.message()));
  }
  return Status::Ok();
}

// "none" | "drop:T" | "scale".
Status ParseStalenessPolicy(const StrategyOptions& options, StrategyPlan& plan) {
  const std::string& spec = options.staleness_policy;
  if (spec == "none" || spec.empty()) {
    plan.staleness_policy = StalenessPolicy::kNone;
  } else if (spec == "scale") {
    plan.staleness_policy = StalenessPolicy::kScale;
  } else if (spec.rfind("drop:", 0) == 0) {
    char* end = nullptr;
    const std::string number = spec.substr(5);
    const unsigned long long t = std::strtoull(number.c_str(), &end, 10);
    if (number.empty() || *end != '\0' || number[0] == '-') {
      return InvalidArgumentError(
          fmt::format("--staleness-policy '{}': drop:T needs a whole number T >= 0", spec));
    }
    plan.staleness_policy = StalenessPolicy::kDrop;
    plan.drop_above = t;
  } else {
    return InvalidArgumentError(fmt::format(
        "--staleness-policy '{}': unknown policy (accepted: none, drop:T, scale)", spec));
  }
  if (plan.staleness_policy != StalenessPolicy::kNone && plan.sync.kind != SyncKind::kSsp &&
      plan.sync.kind != SyncKind::kAsp) {
    return InvalidArgumentError(
        fmt::format("--staleness-policy {} applies to stale updates, which only --sync ssp and "
                    "asp over --arch ps apply (not --sync {})",
                    spec, SyncSpecName(plan.sync)));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<StrategyPlan> PlanStrategy(const StrategyOptions& options) {
  StrategyPlan plan;
  FRUGAL_ASSIGN_OR_RETURN(plan.arch, ParseArchSpec(options.arch));
  FRUGAL_ASSIGN_OR_RETURN(plan.sync, ParseSyncSpec(options.sync));
  plan.optimizer_momentum = options.momentum;
  plan.optimizer_nesterov = options.nesterov;
  plan.od_sgd = options.od_sgd;
  plan.skip_comm = options.skip_comm;
  plan.ranks_per_host = options.ranks_per_host;
  plan.seed = options.seed;
  plan.timeout = options.timeout;
  if (options.od_sgd && options.skip_comm) {
    return InvalidArgumentError("--od-sgd and --skip-comm exclude each other");
  }
  if (plan.sync.kind != SyncKind::kBsp && (options.od_sgd || options.skip_comm)) {
    return InvalidArgumentError(fmt::format("--{} applies to --sync bsp only, not {}",
                                            options.od_sgd ? "od-sgd" : "skip-comm",
                                            SyncSpecName(plan.sync)));
  }
  if (options.ranks_per_host < 0) {
    return InvalidArgumentError("ranks per host must be >= 0");
  }
  FRUGAL_RETURN_IF_ERROR(ParseStalenessPolicy(options, plan));
  FRUGAL_RETURN_IF_ERROR(CheckParameterServer(options, plan));
  if (plan.arch.kind == ArchKind::kParameterServer && plan.sync.kind == SyncKind::kFedAvg) {
    FRUGAL_RETURN_IF_ERROR(CheckCompression(options, plan));
    return plan;
  }
  if (plan.arch.kind == ArchKind::kParameterServer) {
    FRUGAL_RETURN_IF_ERROR(PlanParameterServerCompression(options, plan));
    return plan;
  }
  if (!options.compress_pull.empty()) {
    return InvalidArgumentError(
        "--compress-pull compresses the answers of a parameter server: it needs --arch "
        "ps:servers=S");
  }
  if (plan.staleness_policy != StalenessPolicy::kNone) {
    return InvalidArgumentError("--staleness-policy applies to --arch ps:servers=S");
  }
  if (plan.arch.kind == ArchKind::kGossip) {
    FRUGAL_RETURN_IF_ERROR(strategy_internal::CheckGossipPlan(options, plan));
    return plan;
  }
  if (plan.sync.kind == SyncKind::kAsp) {
    return InvalidArgumentError(
        "--sync asp needs --arch gossip[:topology=T] (AD-PSGD) or --arch ps:servers=S");
  }
  if (plan.sync.kind == SyncKind::kSsp || plan.sync.kind == SyncKind::kBackup ||
      plan.sync.kind == SyncKind::kLag) {
    return InvalidArgumentError(
        fmt::format("--sync {} needs --arch ps:servers=S", SyncSpecName(plan.sync)));
  }
  FRUGAL_RETURN_IF_ERROR(CheckCompression(options, plan));
  return plan;
}

StatusOr<std::unique_ptr<GradientReducer>> MakeStrategyReducer(const StrategyPlan& plan,
                                                               Transport& workers,
                                                               int64_t steps_per_epoch,
                                                               const CompressorRegistry& registry) {
  if (plan.compressed && plan.sync.kind != SyncKind::kFedAvg &&
      plan.arch.kind != ArchKind::kGossip) {
    CompressedReducerOptions compressed = *plan.compressed;
    if (plan.dgc) {
      // The momentum= item is already in the spec; only the warm-up's epoch length is added.
      compressed.spec = AdaptDgcSpec(compressed.spec, 0, steps_per_epoch).spec;
    }
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<CompressedReducer> reducer,
                            MakeCompressedReducer(workers, registry, compressed));
    return std::unique_ptr<GradientReducer>(std::move(reducer));
  }
  DenseReducerOptions dense;
  dense.algorithm =
      plan.arch.kind == ArchKind::kParameterServer ? std::string("ring") : plan.arch.algorithm;
  dense.timeout = plan.timeout;
  // Bucket plans are verified across ranks once, so the per-call length check is not needed.
  dense.allreduce.check_lengths = false;
  return MakeDenseReducer(workers, dense);
}

}  // namespace frugal
