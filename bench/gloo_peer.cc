// The Gloo peer: Gloo's all-reduce (frugal/gloo.h) on the benchmark's own buffer, in place, so
// that nothing of frugal's stands between the buffer and Gloo.
#include <memory>

#include "peers.h"

namespace frugal::bench {
namespace {

class GlooPeer : public AllreducePeer {
 public:
  GlooPeer(std::unique_ptr<GlooContext> context, GlooAlgorithm algorithm)
      : context_(std::move(context)), algorithm_kind_(algorithm) {}

  std::string name() const override { return "gloo"; }

  Status Allreduce(std::span<float> data) override {
    // A Gloo algorithm is bound to its buffer: make it again only when the buffer changes.
    if (!allreduce_ || data.data() != data_ || data.size() != count_) {
      allreduce_.reset();
      FRUGAL_ASSIGN_OR_RETURN(allreduce_, context_->MakeAllreduce(algorithm_kind_, data));
      data_ = data.data();
      count_ = data.size();
    }
    Status status = allreduce_->Run();
    if (!status.ok()) allreduce_.reset();
    return status;
  }

 private:
  std::unique_ptr<GlooContext> context_;
  GlooAlgorithm algorithm_kind_;
  std::unique_ptr<GlooAllreduce> allreduce_;
  float* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<AllreducePeer>> MakeGlooPeer(Transport& t,
                                                      const GlooPeerOptions& options) {
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<GlooContext> context, GlooContext::Connect(t, options));
  return std::unique_ptr<AllreducePeer>(
      std::make_unique<GlooPeer>(std::move(context), options.algorithm));
}

}  // namespace frugal::bench
