// Phases inside a reduction, for the engine's timeline: a GradientReducer is one call to the
// engine, but a compressing reducer encodes, communicates and decodes inside it. WithPhaseTiming
// makes a compressor registry whose compressors report each Encode ("compress") and Decode
// ("decompress") to a PhaseRecorder; the engine (EngineOptions::phases) drains the recorder after
// each reduction and draws those phases, and "communicate" for the rest of the reduction.
//
// Thread safety: PhaseRecorder is thread safe. The timed compressors forward every other method
// to the compressor they wrap and have its name, spec, id and traits; error feedback wraps them
// as it wraps the compressor itself.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/compressor.h"
#include "frugal/timer.h"

namespace frugal {

struct Phase {
  std::string name;    // "compress" or "decompress"
  std::string tensor;  // TensorInfo::name of the call
  Clock::time_point begin;
  Clock::time_point end;
};

class PhaseRecorder {
 public:
  void Record(std::string_view name, std::string_view tensor, Clock::time_point begin,
              Clock::time_point end);
  // The phases recorded since the last Drain, in the order recorded.
  std::vector<Phase> Drain();

 private:
  std::mutex mutex_;
  std::vector<Phase> phases_;
};

// A registry with the compressors of `base`, each reporting its Encode and Decode to `recorder`
// (which must outlive every compressor the registry makes).
CompressorRegistry WithPhaseTiming(const CompressorRegistry& base, PhaseRecorder& recorder);

}  // namespace frugal
