// Averaging a model's buffers across ranks: the exchange of Local SGD and of every strategy that
// lets replicas drift and then brings them together. See model_average.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "frugal/reducer.h"
#include "frugal/strategy.h"

namespace frugal::strategy_internal {

struct AverageParts {
  bool buffers = true;   // ModelBuffers::buffers
  bool momenta = false;  // ModelBuffers::momenta
};

// Averages a model over the ranks of the reducer's transport.
//  - dense (deltas = false): the parameters, and the parts asked for, are packed into one bucket
//    ("model") and averaged by the reducer: one fused all-reduce.
//  - deltas (a compressing reducer): the parameters' change since the last average
//    (x - anchor) is packed into one bucket ("model-delta") whose entries are the parameters
//    (names and counts), so the compressor sees every tensor apart; the reducer averages it
//    (compressed, with its error-feedback residual), and x = anchor + average, anchor = x. The
//    other parts are averaged exactly with frugal's ring all-reduce on the same transport.
// Not thread safe; Average runs on the thread that owns the reducer's transport.
class ModelAverager {
 public:
  ModelAverager(GradientReducer& reducer, bool deltas) : reducer_(reducer), deltas_(deltas) {}

  // Delta mode: the model every rank starts from (identical on all ranks), before any step.
  void SetAnchor(const ModelBuffers& model);

  // Collective over the reducer's ranks; `t` is that transport. `step` keys the compressors'
  // random streams. The model's layout must not change between calls.
  Status Average(Transport& t, uint64_t step, ModelBuffers& model, AverageParts parts,
                 Duration timeout);

  // The anchor (last averaged parameters) in delta mode.
  void VisitState(const std::function<void(std::string_view, std::span<float>)>& visit);

 private:
  Status AverageDense(uint64_t step, ModelBuffers& model, AverageParts parts);
  Status AverageDeltas(Transport& t, uint64_t step, ModelBuffers& model, AverageParts parts,
                       Duration timeout);

  GradientReducer& reducer_;
  bool deltas_;
  std::vector<float> flat_;
  std::vector<float> anchor_;
};

// The buffers an average covers, in this order: the parameters (unless parameters = false), then
// the float buffers and the momenta that `parts` names.
std::vector<NamedBuffer> AveragedBuffers(const ModelBuffers& model, AverageParts parts,
                                         bool parameters = true);

// Averages `buffers` exactly (frugal's ring all-reduce, one fused message) over `t`.
Status AverageExactly(Transport& t, std::span<const NamedBuffer> buffers, Duration timeout);

// Packs `buffers` one after the other into `flat` (resized) and back.
void Pack(std::span<const NamedBuffer> buffers, std::vector<float>& flat);
void Unpack(std::span<const float> flat, std::span<const NamedBuffer> buffers);

}  // namespace frugal::strategy_internal
