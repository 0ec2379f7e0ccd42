// Checkpoints of the compressed reducer: a reducer whose state was saved after k steps and loaded
// into a fresh reducer continues bit for bit as the reducer that was never interrupted, for every
// compressor that keeps state (error-feedback residuals, DGC's momentum and velocity, PowerSGD's
// warm-started Q, Signum's momentum) and for worker momentum; state of another configuration is
// refused naming the field.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "compress/test_util.h"
#include "frugal/checkpoint_file.h"
#include "frugal/compressed_reducer.h"
#include "frugal/inproc_transport.h"

namespace frugal {
namespace {

using testing_compress::Gaussian;

BucketInfo Bucket(uint64_t step) {
  BucketInfo b;
  b.name = "bucket0";
  b.step = step;
  size_t at = 0;
  for (auto [name, count] : std::vector<std::pair<std::string, size_t>>{
           {"bias1", 10}, {"conv/w1", 4800}, {"bias2", 3}, {"w2", 20000}}) {
    b.entries.push_back(BucketEntry{name, at, count, {}});
    at += count;
  }
  b.entries[1].shape = {48, 100};
  b.entries[3].shape = {200, 100};
  b.count = at;
  return b;
}

std::vector<float> Input(int step, int rank) {
  return Gaussian(Bucket(0).count, static_cast<uint64_t>(1000 * step + rank + 1));
}

// Outputs of steps [from, to) by rank, and each rank's saved state after step to - 1.
struct Segment {
  std::vector<std::vector<std::vector<float>>> out;  // [rank][step - from]
  std::vector<StateRecords> saved;
  std::vector<Status> status;
};

// Runs steps [from, to) on n ranks with fresh reducers that first load `load` (if given).
Segment RunSegment(int n, const CompressedReducerOptions& options, int from, int to,
                   const std::vector<StateRecords>* load) {
  Segment s;
  s.out.resize(n);
  s.saved.resize(n);
  s.status = RunRanks(n, [&](Transport& t) -> Status {
    CompressorRegistry registry = DefaultCompressorRegistry();
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<CompressedReducer> reducer,
                            MakeCompressedReducer(t, registry, options));
    const int r = t.rank();
    if (load != nullptr) {
      // Through the file format, as a checkpoint does.
      const std::vector<std::byte> bytes =
          EncodeCheckpointFile(CheckpointFileKind::kRankState, (*load)[r]);
      FRUGAL_ASSIGN_OR_RETURN(StateRecords records,
                              DecodeCheckpointFile(bytes, CheckpointFileKind::kRankState));
      StateLoader loader(records);
      reducer->VisitState(loader);
      FRUGAL_RETURN_IF_ERROR(loader.Finish());
    }
    for (int step = from; step < to; ++step) {
      std::vector<float> data = Input(step, r);
      FRUGAL_RETURN_IF_ERROR(reducer->Reduce(Bucket(step), data));
      s.out[r].push_back(std::move(data));
    }
    StateSaver saver;
    reducer->VisitState(saver);
    FRUGAL_RETURN_IF_ERROR(saver.status());
    s.saved[r] = saver.records();
    return Status::Ok();
  });
  return s;
}

void ExpectResumeIsExact(const CompressedReducerOptions& options, int n, size_t min_fields) {
  constexpr int kSteps = 6;
  constexpr int kCut = 3;
  const Segment whole = RunSegment(n, options, 0, kSteps, nullptr);
  for (const Status& s : whole.status) ASSERT_TRUE(s.ok()) << s.ToString();
  const Segment first = RunSegment(n, options, 0, kCut, nullptr);
  for (const Status& s : first.status) ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(first.saved[0].size(), min_fields) << options.spec;
  const Segment rest = RunSegment(n, options, kCut, kSteps, &first.saved);
  for (const Status& s : rest.status) ASSERT_TRUE(s.ok()) << s.ToString();
  for (int r = 0; r < n; ++r) {
    for (int step = kCut; step < kSteps; ++step) {
      const std::vector<float>& a = whole.out[r][step];
      const std::vector<float>& b = rest.out[r][step - kCut];
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), 4 * a.size()), 0)
          << options.spec << ": rank " << r << " step " << step << " differs after the resume";
    }
    // The state after the last step is the same too.
    EXPECT_EQ(rest.saved[r], whole.saved[r]) << options.spec << ": rank " << r;
  }
}

CompressedReducerOptions Options(std::string spec, bool ef) {
  CompressedReducerOptions o;
  o.spec = std::move(spec);
  o.error_feedback = ef;
  o.min_bytes = 1024;
  o.seed = 5;
  return o;
}

TEST(ReducerCheckpoint, ErrorFeedbackResidualsResumeExactly) {
  // Two large tensors, each with its residual and numel: 4 fields.
  ExpectResumeIsExact(Options("efsign", false), 3, 4);
  ExpectResumeIsExact(Options("topk:ratio=0.01", true), 3, 4);
  ExpectResumeIsExact(Options("qsgd:levels=4", true), 2, 4);
}

TEST(ReducerCheckpoint, DgcMomentumAndVelocityResumeExactly) {
  ExpectResumeIsExact(Options("dgc:ratio=0.01,momentum=0.9", false), 3, 6);
}

TEST(ReducerCheckpoint, PowerSgdWarmStartResumesExactly) {
  ExpectResumeIsExact(Options("powersgd:rank=2,start_iter=1", true), 3, 8);
}

TEST(ReducerCheckpoint, SignumMomentumResumesExactly) {
  ExpectResumeIsExact(Options("signum:beta=0.9", false), 3, 4);
}

TEST(ReducerCheckpoint, WorkerMomentumResumesExactly) {
  CompressedReducerOptions o = Options("onebit", true);
  o.worker_momentum = 0.9;
  o.worker_nesterov = true;
  // Residuals of the two large tensors (4 fields) and the momentum of all four entries.
  ExpectResumeIsExact(o, 3, 8);
}

TEST(ReducerCheckpoint, TheStateMattersForExactness) {
  // Without loading, the continuation differs: the test above can fail.
  const CompressedReducerOptions o = Options("efsign", false);
  const Segment whole = RunSegment(2, o, 0, 4, nullptr);
  const Segment fresh = RunSegment(2, o, 2, 4, nullptr);
  EXPECT_NE(whole.out[0][3], fresh.out[0][1]);
}

// Loads `records` into fresh dgc reducers and runs a step: the CheckError each rank meets.
std::vector<std::string> LoadAndStep(const std::vector<StateRecords>& records) {
  std::mutex mu;
  std::vector<std::string> errors;
  RunRanks(2, [&](Transport& t) -> Status {
    CompressorRegistry registry = DefaultCompressorRegistry();
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<CompressedReducer> reducer,
                            MakeCompressedReducer(t, registry, Options("dgc:ratio=0.01", false)));
    StateLoader loader(records[t.rank()]);
    reducer->VisitState(loader);
    // Per-tensor state is taken now and checked when the tensor's state is made.
    EXPECT_TRUE(loader.Finish().ok());
    std::vector<float> data = Input(0, t.rank());
    try {
      (void)reducer->Reduce(Bucket(2), data);
    } catch (const CheckError& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors.push_back(e.what());
    }
    return Status::Ok();
  });
  return errors;
}

TEST(ReducerCheckpoint, StateThatDoesNotFitIsRefusedNamingTheField) {
  const Segment dgc = RunSegment(2, Options("dgc:ratio=0.01", false), 0, 2, nullptr);
  std::vector<StateRecords> missing = dgc.saved;
  for (StateRecords& r : missing) ASSERT_EQ(r.erase("compressor/conv%2Fw1/dgc/u"), 1u);
  std::vector<std::string> errors = LoadAndStep(missing);
  ASSERT_EQ(errors.size(), 2u);
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("checkpoint state of tensor 'conv/w1' (slot 'dgc'): field 'u' is missing "
                     "from the checkpoint"),
              std::string::npos)
        << e;
  }
  std::vector<StateRecords> resized = dgc.saved;
  for (StateRecords& r : resized) {
    uint64_t numel = 4801;
    StateSaver saver;
    saver.U64("numel", numel);
    r["compressor/w2/dgc/numel"] = saver.records().at("numel");
  }
  errors = LoadAndStep(resized);
  ASSERT_EQ(errors.size(), 2u);
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("checkpoint state of tensor 'w2' (slot 'dgc'): 4801 elements saved, the "
                     "tensor has 20000"),
              std::string::npos)
        << e;
  }
}

}  // namespace
}  // namespace frugal
