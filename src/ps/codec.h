// Compression of the parameter server's traffic, both ways (internal).
//
// Pushes (ParameterServerConfig::push_compress): each worker encodes the gradient of a key with
// the compressor, in its own CompressContext (rank = the worker, step = the key's clock), with
// error feedback when push_error_feedback is set (the residual of each key stays in that context,
// slot kErrorFeedbackSlot); the server decodes the payload with the encoder's rank and step, so
// shared-seed and step-keyed compressors agree.
//
// Pulls (pull_compress): the servers answer with the change of the parameters, compressed
// (DoubleSqueeze, Tang et al. 2019). For each key the server keeps x_hat, the parameters as the
// workers hold them; at a new version v it encodes x - x_hat once, adds the decoded payload to
// x_hat and sends that payload to every worker that pulls version v, which adds it to its own
// copy. x - x_hat is the server's error-feedback residual: what compression held back at one
// version is part of the next change sent. Every worker must pull every version (bsp, lag) and
// start from the server's initial values, so the workers' copies and x_hat stay equal bit for bit.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/compressor.h"
#include "frugal/parameter_server.h"
#include "frugal/state_visitor.h"
#include "frugal/status.h"
#include "ps/sharding.h"

namespace frugal::ps_internal {

// What MakeKeyCompressor does about error feedback: keep what the spec says ("ef=1", efsign's
// default), add it, or build the compressor without it (the pulls keep their own residual).
enum class KeyErrorFeedback { kAsSpecified, kAdd, kWithout };

// The compressor of `spec` from the default registry, with error feedback as `error_feedback`
// says. kInvalidArgument naming `flag` for a spec the registry refuses, or a compressor that cannot
// code one key on its own: one that aggregates across ranks itself (custom aggregation) or by
// majority vote.
StatusOr<std::unique_ptr<Compressor>> MakeKeyCompressor(std::string_view spec,
                                                        KeyErrorFeedback error_feedback,
                                                        std::string_view flag);

// kInvalidArgument when the configuration compresses pulls under a consistency model in which a
// worker may skip versions (ssp, asp, backup): the workers' copies would part from x_hat.
Status CheckCompression(const ParameterServerConfig& config);

// The tensor a key is for the compressors: its name and element count.
TensorInfo KeyTensor(const KeyPart& part);

// A worker's pushes.
class PushEncoder {
 public:
  PushEncoder(std::unique_ptr<Compressor> compressor, uint64_t seed, int worker, int workers);
  // The payload of the gradient of `part` at the key's clock `step` into `out` (replaced).
  Status Encode(const KeyPart& part, uint64_t step, std::span<const float> gradient,
                std::vector<std::byte>& out);
  // The residuals of error feedback (and any state of the compressor), by key name.
  void VisitState(StateVisitor& visitor) { ctx_.VisitState(visitor); }

 private:
  std::unique_ptr<Compressor> compressor_;
  CompressContext ctx_;
};

// A server's decoding of pushes: one context per worker (its rank in the random streams).
class PushDecoder {
 public:
  PushDecoder(std::unique_ptr<Compressor> compressor, uint64_t seed, int workers);
  // Decodes the payload `worker` pushed for `part` at clock `step` into `out` (part.count values,
  // overwritten). kMalformed for a payload the compressor refuses.
  Status Decode(const KeyPart& part, int worker, uint64_t step, std::span<const std::byte> payload,
                std::span<float> out);
  // Each worker's decoding context (any state the compressor keeps there), by worker.
  void VisitState(StateVisitor& visitor);

 private:
  std::unique_ptr<Compressor> compressor_;
  std::vector<CompressContext> ctx_;
};

// A server's compressed answers: x_hat and the payload of the last version, per key.
class PullEncoder {
 public:
  PullEncoder(std::unique_ptr<Compressor> compressor, uint64_t seed, int server, int servers);
  // The key's initial values: x_hat at version 0.
  void Start(const KeyPart& part, std::span<const float> values);
  // The payload that takes x_hat from its version to `version` (encoded at the first call for a
  // version; x holds the key's parameters at `version`). kFailedPrecondition for a version older
  // than the last one encoded.
  StatusOr<std::span<const std::byte>> Payload(const KeyPart& part, uint64_t version,
                                               std::span<const float> x);
  // The version x_hat of a key is at.
  uint64_t version(uint32_t key) const;
  // x_hat of every key and its version, by key name (the compressor's own state too).
  void VisitState(StateVisitor& visitor);

 private:
  struct Stream {
    const KeyPart* part = nullptr;
    std::vector<float> x_hat;
    uint64_t version = 0;
    std::vector<std::byte> payload;
    std::vector<float> change;  // scratch
  };
  std::unique_ptr<Compressor> compressor_;
  CompressContext ctx_;
  std::map<uint32_t, Stream> streams_;
};

// A worker's copy of the parameters under compressed pulls, per key.
class PullDecoder {
 public:
  PullDecoder(std::unique_ptr<Compressor> compressor, uint64_t seed, int servers);
  // The key's initial values.
  void Start(const KeyPart& part, std::span<const float> values);
  // Adds the payload that server `server` sent for `part` at `version` to the copy, which must be
  // at version - 1, and writes the copy into `out`. kMalformed for a payload the compressor
  // refuses or a version that does not follow the copy's.
  Status Apply(const KeyPart& part, int server, uint64_t version,
               std::span<const std::byte> payload, std::span<float> out);
  void VisitState(StateVisitor& visitor);

 private:
  struct Copy {
    std::vector<float> x;
    uint64_t version = 0;
  };
  std::unique_ptr<Compressor> compressor_;
  std::vector<CompressContext> ctx_;  // by server: the encoder's rank
  std::map<uint32_t, Copy> copies_;
  std::map<uint32_t, std::string> names_;
};

// The state of one side's codecs, those it has, under "push" and "pull" (checkpoints).
template <class PushCodec, class PullCodec>
void VisitCodecs(StateVisitor& v, std::optional<PushCodec>& push, std::optional<PullCodec>& pull) {
  if (push) {
    StateVisitor::Scope scope(v, "push");
    push->VisitState(v);
  }
  if (pull) {
    StateVisitor::Scope scope(v, "pull");
    pull->VisitState(v);
  }
}

}  // namespace frugal::ps_internal
