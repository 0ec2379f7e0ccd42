// Gradient compression: the Compressor interface, its traits, the per-tensor context, the
// registry that builds compressors from spec strings, and the aggregation paths that move
// compressed gradients between ranks.
//
// The compressors DefaultCompressorRegistry() holds, by family (src/compress/, layer
// frugal_compress; each family registers itself through a hook declared in
// src/compress/register.h):
//   quantizers: none, fp16, bf16, minmax8, qsgd, terngrad, onebit, sign, signum, efsign,
//     natural ...................... quant_*.cc, RegisterQuantizers()
//   sparsifiers: randomk, topk, threshold, adaptive, sbc, stc, dgc, gtopk
//     .............................. sparse_*.cc and gtopk_*.cc, RegisterSparsifiers()
//   low rank: powersgd ............. lowrank_*.cc, RegisterLowRank()
//   sketches: sketch ............... sketch_*.cc, RegisterSketches()
//   coding: polar .................. polar_*.cc, RegisterCoding()
// tests/compress/registry_test.cc checks that the registry holds exactly these names.
// CompressorRegistry::Create also builds compositions "a | b" of them (compose.cc).
//
// Wire format: see compress_wire.h (versioned header + bit-packed body, validated before use).
//
// Sign convention, the same for every compressor that keeps signs (sign, signum, efsign, onebit,
// natural): sign(x) = +1 for x >= 0, including -0 and NaN, and -1 for x < 0. A majority vote that
// is tied gives 0.
//
// Thread safety: a Compressor is immutable after construction; its const methods may be called
// from several threads at once as long as each thread uses its own CompressContext. A
// CompressContext (and the per-tensor state in it) belongs to one thread at a time. A
// CompressorRegistry is immutable after it has been filled and may then be shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "frugal/check.h"
#include "frugal/collectives.h"
#include "frugal/random.h"
#include "frugal/state_visitor.h"
#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal {

// Stable one-byte ids written into the wire header. Never renumber: a payload made by one build
// must be refused (not misread) by another build that does not know its id.
enum class CompressorId : uint8_t {
  kNone = 1,
  kFp16 = 2,
  kBf16 = 3,
  kMinMax8 = 4,
  kQsgd = 5,
  kTernGrad = 6,
  kOneBit = 7,
  kSign = 8,
  kSignum = 9,
  kEfSign = 10,
  kNatural = 11,
  // Sparsification family.
  kRandomK = 32,
  kTopK = 33,
  kThreshold = 34,
  kAdaptiveThreshold = 35,
  kDgc = 36,
  kGTopK = 37,
  kSbc = 38,
  kStc = 39,
  // Low rank.
  kPowerSgd = 48,
  // Sketches.
  kCountSketch = 64,
  // Coding.
  kPolar = 80,
  // A composition of compressors (compose.cc).
  kComposite = 96,
};

// What a compressor promises. The aggregation path is chosen from these (see AggregationPath).
struct CompressorTraits {
  // E[Decode(Encode(x))] == x over the compressor's randomness (QSGD, TernGrad w.r.t. the clipped
  // input, natural, random-k with rescaling). Lossless compressors are unbiased.
  bool unbiased = false;
  // Decode(Encode(x)) == x exactly (none).
  bool lossless = false;
  // The body of the payload (after the header) is a sequence of little-endian float32 values,
  // the header is the same on every rank for the same tensor and step, and the element-wise sum
  // of the bodies of several ranks is a valid body that decodes to the sum of their inputs (none,
  // random-k with a shared seed, count sketch). Such payloads are all-reduced as they are.
  bool summable = false;
  // A decoded partial sum can be encoded again by the same compressor, so the two-phase path
  // (compressed reduce-scatter, re-compression with server-side error feedback, all-gather) is
  // meaningful (fp16, bf16, minmax8, qsgd, onebit, efsign, natural).
  bool requantizable = false;
  // Biased in a way that only converges with error feedback (onebit, efsign, top-k, ...). The
  // command line warns when such a compressor is used without --ef.
  bool needs_error_feedback = false;
  // Random choices come from kAnyRank streams (RngKey without the rank), so every rank makes the
  // same choice without sending it (random-k indices, PowerSGD's initial Q).
  bool shared_seed = false;
  // Payloads carry signs; ranks combine them by majority vote (sign, signum).
  bool sign_vote = false;
  // The payload size depends on the data (top-k with a threshold, Elias-gamma coding): BodyBits()
  // returns nullopt and the payload size is what Encode produced.
  bool variable_size = false;
  // The compressor overrides Aggregate() and moves its own data over the transport (PowerSGD
  // all-reduces P and Q, gTop-k merges pairwise, TernGrad agrees on a scale across ranks).
  bool custom_aggregate = false;
  // DecodeScaled touches only the entries the payload carries (the sparse compressors): a weighted
  // sum of such messages costs their length, not numel.
  bool sparse_decode = false;
  // The body ends with float32 values (TrailingFloats counts them) that the next stage of a
  // composition may code in their place (none, randomk, topk).
  bool ends_with_floats = false;
};

// The tensor being compressed. `shape` is empty for a flat buffer; otherwise its product is numel.
struct TensorInfo {
  std::string name;
  uint64_t id = 0;  // TensorId(name)
  size_t numel = 0;
  std::vector<int64_t> shape;

  TensorInfo() = default;
  TensorInfo(std::string name_in, size_t numel_in, std::vector<int64_t> shape_in = {});

  // The matrix view used by low-rank and per-column compressors (PyTorch PowerSGD's
  // convention): rows = shape[0], cols = numel / rows; a flat or 1-D tensor is numel x 1.
  size_t rows() const;
  size_t cols() const;
};

// Base of any per-tensor state a compressor keeps between steps (residuals, momentum, Q).
// VisitState names what must survive a restart (state_visitor.h): a compressor's state type
// overrides it for everything a later step reads (residuals, momenta, warm-started factors);
// scratch buffers and caches that a step recomputes visit nothing. A resumed run is only
// bit-identical to an uninterrupted one if every such value is visited.
class TensorState {
 public:
  virtual ~TensorState() = default;
  virtual void VisitState(StateVisitor& visitor) {}
};

// The error-feedback residual (slot kErrorFeedbackSlot, and kServerErrorFeedbackSlot for the
// server side of the two-phase path).
struct ResidualState : TensorState {
  std::vector<float> residual;     // e, numel values (zeros before the first step)
  std::vector<float> compensated;  // scratch: p = g + e of the last step
  void VisitState(StateVisitor& visitor) override { visitor.FloatVector("residual", residual); }
};

inline constexpr std::string_view kErrorFeedbackSlot = "ef";
inline constexpr std::string_view kServerErrorFeedbackSlot = "ef.server";

// Everything a compressor needs to know besides the tensor: who it is (rank, world size), the
// run's seed and the step, and the per-tensor state it keeps. One context per rank (per thread).
// State is keyed by (tensor name, slot); a compressor uses its own name (or any string it
// chooses) as slot, so wrappers (error feedback) and inner compressors do not collide.
class CompressContext {
 public:
  CompressContext(uint64_t seed = 0, int rank = 0, int world_size = 1);

  uint64_t seed() const { return seed_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  uint64_t step() const { return step_; }
  // The training step (iteration); the caller advances it once per step, before encoding.
  void set_step(uint64_t step) { step_ = step; }

  // The key of the random stream for `tensor` at the current step: this rank's own stream, or
  // with `shared` the stream every rank draws identically (rank = kAnyRank).
  RngKey Key(const TensorInfo& tensor, bool shared = false) const {
    return RngKey{seed_, shared ? kAnyRank : static_cast<int64_t>(rank_), step_, tensor.id};
  }

  // The state of type S in (tensor.name, slot), default-constructed on first use. The numel of the
  // tensor is recorded at creation: asking again with another numel (or another S) for the same
  // key is a caller bug and throws CheckError.
  template <typename S>
  S& State(const TensorInfo& tensor, std::string_view slot) {
    static_assert(std::is_base_of_v<TensorState, S>, "state types derive from TensorState");
    auto key = std::make_pair(tensor.name, std::string(slot));
    auto it = states_.find(key);
    if (it == states_.end()) {
      it = states_.emplace(std::move(key), Entry{tensor.numel, std::make_unique<S>()}).first;
      if (!pending_.empty()) RestorePending(it->first, *it->second.state, tensor.numel);
    }
    FRUGAL_CHECK_EQ(it->second.numel, tensor.numel, "tensor '", tensor.name,
                    "' changed size; compressor state slot '", slot, "'");
    auto* state = dynamic_cast<S*>(it->second.state.get());
    FRUGAL_CHECK(state != nullptr, "state slot '", slot, "' of tensor '", tensor.name,
                 "' holds another type than ", typeid(S).name());
    return *state;
  }
  // The state in (tensor name, slot) if it exists, else nullptr.
  template <typename S>
  S* FindState(std::string_view tensor_name, std::string_view slot) {
    auto it = states_.find(std::make_pair(std::string(tensor_name), std::string(slot)));
    return it == states_.end() ? nullptr : dynamic_cast<S*>(it->second.state.get());
  }

  // Drops the state of one tensor (every slot), or of all tensors (restored records too).
  void Erase(std::string_view tensor_name);
  void Clear() {
    states_.clear();
    pending_.clear();
  }
  size_t num_states() const { return states_.size(); }

  // Checkpoints (state_visitor.h). Saving: every state that visits something, as
  // "<tensor>/<slot>/..." with its numel, and the records a load left that no State() call has
  // taken yet. Loading: keeps the records; State() restores a state from them when it creates it
  // and throws CheckError (naming the tensor, the slot and the field) when they do not fit it:
  // another numel, a missing field or one the state does not have.
  void VisitState(StateVisitor& visitor);

 private:
  using SlotKey = std::pair<std::string, std::string>;
  struct Entry {
    size_t numel = 0;
    std::unique_ptr<TensorState> state;
  };
  void RestorePending(const SlotKey& key, TensorState& state, size_t numel);
  uint64_t seed_;
  int rank_;
  int world_size_;
  uint64_t step_ = 0;
  std::map<SlotKey, Entry> states_;
  std::map<SlotKey, StateRecords> pending_;  // loaded, not yet created
};

// How compressed payloads move between ranks.
enum class AggregationPath {
  kAuto,       // from the traits: custom > sign vote > allreduce > two-phase > allgather
  kAllreduce,  // summable payloads: all-reduce the payload body itself
  kAllgather,  // any payload: all-gather (allgatherv) the payloads, every rank decodes and sums
  kTwoPhase,   // re-quantizable: compressed reduce-scatter, server-side error feedback and
               // re-compression of each rank's chunk, all-gather of the re-compressed chunks
  kSignVote,   // sign payloads: all-gather, every rank takes the element-wise majority
  kCustom,     // the compressor's own Aggregate()
};

// Names on the command line: auto, allreduce, allgather, twophase, vote, custom.
std::string_view AggregationPathName(AggregationPath path);
StatusOr<AggregationPath> ParseAggregationPath(std::string_view name);

struct AggregateOptions {
  AggregationPath path = AggregationPath::kAuto;
  // kAverage divides the sum by the world size. The sign vote ignores it: its result is the
  // majority sign in {-1, 0, +1} (0 where the vote is tied), scaled as the compressor decodes.
  ReduceOp op = ReduceOp::kAverage;
  Duration timeout = kDefaultTimeout;
  // Algorithm of the all-reduce on the kAllreduce path.
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  // Check before aggregating that every rank passes the same numel (one small all-reduce).
  bool check_lengths = true;
};

struct AggregateStats {
  AggregationPath path = AggregationPath::kAuto;  // the path actually taken
  uint64_t bytes_sent = 0;     // what this rank's transport sent, counted by the transport
  uint64_t payload_bytes = 0;  // size of this rank's (first) encoded payload
  uint64_t dense_bytes = 0;    // numel * sizeof(float)
};

// A gradient compressor. Encode and Decode are pure functions of their inputs and of the state
// kept in the context; the same inputs, context state, seed, rank and step give the same bytes.
class Compressor {
 public:
  virtual ~Compressor() = default;

  // Registry name ("qsgd") and the canonical spec with every parameter spelled out
  // ("qsgd:bucket=512,levels=16"): parsing the spec again gives an identical compressor.
  virtual std::string_view name() const = 0;
  virtual std::string spec() const = 0;
  virtual CompressorId id() const = 0;
  virtual CompressorTraits traits() const = 0;

  // Exact size in bits of the body Encode produces for `tensor` (bodies are padded to whole bytes;
  // the padding is counted), or nullopt when it depends on the data (traits().variable_size).
  // The payload is kWireHeaderBytes + BodyBits/8 bytes.
  virtual std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const = 0;

  // Encodes `input` (input.size() == tensor.numel, else CheckError) into `out`, which is
  // replaced by header + body. May update the compressor's state in `ctx`. Errors: kInvalidArgument
  // when the input cannot be encoded by this compressor (a shape it does not support).
  virtual Status Encode(std::span<const float> input, const TensorInfo& tensor,
                        CompressContext& ctx, std::vector<std::byte>& out) const = 0;

  // Validates `payload` completely (header, lengths, parameters, indices, scales), then ADDS the
  // decoded values into `output` (output.size() == tensor.numel, else CheckError). Malformed
  // payloads return kMalformed and leave `output` unchanged. Never reads out of bounds, whatever
  // the bytes.
  virtual Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor,
                        CompressContext& ctx, std::span<float> output) const = 0;

  // Decode that WRITES the decoded values into `output` instead of adding them: bit for bit what
  // zeroing `output` and calling Decode gives, which is what the default does. A compressor
  // overrides it to spare the pass that zeroes. Errors as Decode's; after an error `output` holds
  // zeros or is unchanged.
  virtual Status DecodeOverwrite(std::span<const std::byte> payload, const TensorInfo& tensor,
                                 CompressContext& ctx, std::span<float> output) const;

  // Decode that ADDS `scale` times the decoded values into `output`: output[e] += scale * v[e], in
  // float. With scale 1 it is Decode. The default decodes into a scratch vector of the context
  // (DecodeOverwrite) and adds it scaled; the sparse compressors override it to touch only the
  // entries they carry (a weighted sum of sparse messages costs their length, not numel). Errors
  // as Decode's: a malformed payload leaves `output` unchanged.
  virtual Status DecodeScaled(std::span<const std::byte> payload, const TensorInfo& tensor,
                              CompressContext& ctx, float scale, std::span<float> output) const;

  // Compressors with traits().custom_aggregate move their own data over `t`. Called on every rank
  // in the same order. `data` holds this rank's input on entry and the aggregate (sum, or average
  // for ReduceOp::kAverage) on return. If `residual` is not empty (size numel) it receives
  // input - (this rank's contribution as it was actually transmitted), which error feedback keeps
  // for the next step. The default returns kFailedPrecondition.
  virtual Status Aggregate(Transport& t, std::span<float> data, std::span<float> residual,
                           const TensorInfo& tensor, CompressContext& ctx,
                           const AggregateOptions& options) const;

  // For a compressor with traits().custom_aggregate whose Aggregate() is a fixed sequence of
  // float all-reduces (with the AggregateOptions' algorithm, no length check), the element count
  // of each, in order, for `tensor` at step `step`; nullopt where its traffic is not such a
  // sequence (gTop-k's pairwise merges, TernGrad's agreed scale). The cost model and the
  // simulator read it (PowerSGD: P and Q of a compressed matrix, the values of a dense one).
  virtual std::optional<std::vector<uint64_t>> AggregateAllreduceFloats(const TensorInfo& tensor,
                                                                        uint64_t step) const {
    return std::nullopt;
  }

  // The size in bits an entropy coder would give this payload's body, where the compressor
  // defines one (QSGD: Elias-gamma coding of the levels); nullopt otherwise.
  virtual std::optional<uint64_t> EntropyCodedBits(std::span<const std::byte> payload) const {
    return std::nullopt;
  }

  // The compressor this one wraps (error feedback), or nullptr.
  virtual const Compressor* inner() const { return nullptr; }

  // Error feedback fused into the encoder, for compressors that can do it in fewer passes over
  // memory than the generic path (p = input + residual; Encode(p); residual = p - Decode(...)):
  // the same payload and residual, bit for bit; on an error the residual is unchanged. nullopt
  // when the compressor has no fused path.
  virtual std::optional<Status> EncodeWithResidual(std::span<const float> input,
                                                   std::span<float> residual,
                                                   const TensorInfo& tensor, CompressContext& ctx,
                                                   std::vector<std::byte>& out) const {
    return std::nullopt;
  }

  // A word the wire header carries (compress_wire.h) and a decoder checks: something this
  // compressor derives from its parameters and the tensor that another build could derive
  // differently (polar: a fingerprint of its information sets). 0 for most compressors.
  virtual uint32_t WireCheck(const TensorInfo& tensor) const { return 0; }

  // For composition ("a | b", compose.cc): the number of float32 values that end the body of this
  // payload, which a next stage may code in their place, at most the tensor's numel; nullopt when
  // the body does not end with such values (then this compressor can only be a last stage). Called
  // on payloads this compressor has just encoded.
  virtual std::optional<uint64_t> TrailingFloats(std::span<const std::byte> payload,
                                                 const TensorInfo& tensor) const {
    return std::nullopt;
  }

  // kWireHeaderBytes * 8 + BodyBits(tensor), or nullopt for variable-size payloads.
  std::optional<uint64_t> WireBits(const TensorInfo& tensor) const;
  // The largest body Encode can produce for `tensor`, in bits: BodyBits for fixed-size payloads;
  // for variable-size ones the bound where the compressor knows one (top-k: every index in the
  // fixed-width code), else nullopt. The cost model (step_cost.h) uses it as an upper bound.
  virtual std::optional<uint64_t> MaxBodyBits(const TensorInfo& tensor) const {
    return BodyBits(tensor);
  }
};

// Error feedback (residual memory) around any compressor: Encode computes p = g + e, encodes p
// and keeps e = p - Decode(Encode(p)) in the context (slot kErrorFeedbackSlot). Summed over
// steps, everything transmitted plus the final residual equals everything that came in. With a
// custom-aggregate inner compressor, Aggregate compensates the same way and keeps the residual
// the inner compressor reports. name() and id() are the inner compressor's; spec() is the inner
// spec with the parameter ef=1 (CompressorRegistry::Create builds it from "onebit:ef=1").
std::unique_ptr<Compressor> WithErrorFeedback(std::unique_ptr<Compressor> inner);

// ----- Registry -----

// The parameters of a spec string "name:key=value,key=value". Getters record which keys were
// read; Finish() rejects keys nobody read, listing the accepted ones.
class CompressorParams {
 public:
  // Parses "name" or "name:k=v,k=v". kInvalidArgument on syntax errors or repeated keys.
  static StatusOr<CompressorParams> Parse(std::string_view spec);

  const std::string& name() const { return name_; }
  bool Has(std::string_view key) const;

  // Each getter returns the value of `key`, or `fallback` when it is absent; kInvalidArgument
  // naming the key, the value and the accepted range when it does not parse or is out of range.
  StatusOr<int64_t> Int(std::string_view key, int64_t fallback, int64_t min, int64_t max);
  StatusOr<double> Double(std::string_view key, double fallback, double min, double max);
  StatusOr<bool> Bool(std::string_view key, bool fallback);  // 1/0, true/false, yes/no, on/off
  StatusOr<std::string> Choice(std::string_view key, std::string_view fallback,
                               const std::vector<std::string>& accepted);

  // kInvalidArgument naming any key that no getter asked for and the keys that were accepted.
  Status Finish() const;

 private:
  std::string name_;
  std::vector<std::pair<std::string, std::string>> values_;
  mutable std::vector<std::string> asked_;
};

using CompressorFactory =
    std::function<StatusOr<std::unique_ptr<Compressor>>(CompressorParams& params)>;

struct CompressorEntry {
  std::string name;     // "qsgd"
  std::string summary;  // one line for --help: "QSGD: s levels per bucket, stochastic rounding"
  std::string params;   // accepted parameters with defaults: "levels=16 bucket=512"
  CompressorFactory factory;
  // Default of the "ef" parameter: methods defined with error feedback (efsign) wrap themselves
  // unless the spec says ef=0.
  bool error_feedback_by_default = false;
};

class CompressorRegistry {
 public:
  // kInvalidArgument if the name is taken or empty.
  Status Register(CompressorEntry entry);

  // Builds a compressor from a spec ("none", "fp16", "qsgd:levels=16,bucket=512"). The parameter
  // "ef" (a boolean accepted by every compressor: "onebit:ef=1"; a bare key means 1, so
  // "onebit:ef" too) wraps the result in WithErrorFeedback; its default is the entry's
  // error_feedback_by_default. kNotFound for an unknown name (the message lists the
  // accepted names); kInvalidArgument for bad parameters (the message lists the accepted ones).
  // A spec of stages joined by '|' ("topk:ratio=0.01 | polar:rate=0.5") is a composition: each
  // stage codes the float values that end the previous stage's payload (see compose.cc for the
  // rules, the wire format and what it refuses, with kInvalidArgument).
  StatusOr<std::unique_ptr<Compressor>> Create(std::string_view spec) const;

  bool Contains(std::string_view name) const;
  std::vector<std::string> Names() const;
  const CompressorEntry* Find(std::string_view name) const;

 private:
  std::map<std::string, CompressorEntry, std::less<>> entries_;
};

// A registry holding every compressor frugal has.
CompressorRegistry DefaultCompressorRegistry();

// Registers none, fp16, bf16, minmax8, qsgd, terngrad, onebit, sign, signum, efsign, natural.
void RegisterQuantizers(CompressorRegistry& registry);

// ----- Aggregation -----

// The path `requested` resolves to for `compressor` (kAuto: from its traits; others unchanged).
AggregationPath ResolveAggregationPath(const Compressor& compressor, AggregationPath requested);

// kInvalidArgument when `path` (after resolving kAuto) does not suit the compressor's traits:
// kAllreduce needs summable payloads, kTwoPhase re-quantizable ones, kSignVote sign payloads,
// kCustom a compressor with its own Aggregate().
Status CheckAggregationPath(const Compressor& compressor, AggregationPath path);

// Aggregates `data` (this rank's gradient on entry; the sum or average over all ranks on return)
// through `compressor` over `t`, on the path chosen by `options.path` (kAuto: from the traits).
// Every rank calls it with the same compressor spec, tensor and options, in the same order.
// Errors: kInvalidArgument when the requested path does not suit the compressor (kAllreduce for
// a non-summable one, kTwoPhase for a non-requantizable one, kSignVote without sign payloads,
// kCustom without custom_aggregate) or ranks disagree on numel; kMalformed when a received payload
// is invalid; kTimeout / kPeerLost from the transport. Error feedback: when `compressor` is a
// WithErrorFeedback wrapper, every path compensates and keeps the residual; the two-phase path
// also keeps a server-side residual for the chunk this rank re-compresses.
Status AggregateCompressed(Transport& t, const Compressor& compressor, std::span<float> data,
                           const TensorInfo& tensor, CompressContext& ctx,
                           const AggregateOptions& options, AggregateStats* stats = nullptr);

// Tags [kCompressTagBase, kCompressTagBase + 16) are used by the compressed aggregation paths'
// point-to-point messages; compressors' own Aggregate() may use [kCompressTagBase + 16,
// kCompressTagBase + 64).
inline constexpr int kCompressTagBase = kCompressTags.begin;

}  // namespace frugal
