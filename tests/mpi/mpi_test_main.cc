// Main of the tier-2 suites: MpiRuntime around RUN_ALL_TESTS, rank-aware printing, and a final
// agreement on the result so that every rank exits with the same code.
#include "mpi_test_main.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "frugal/timer.h"

namespace frugal::mpitest {
namespace {

// Owned by main(); tests reach it through Runtime().
MpiRuntime* runtime_instance = nullptr;

// Prints only failed assertions, prefixed with the rank (used on ranks other than 0). The test's
// name is kept from OnTestStart: OnTestPartResult runs with Google Test's lock held, under which
// UnitTest::current_test_info() would wait for itself.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}

  void OnTestStart(const ::testing::TestInfo& info) override {
    test_ = std::string(info.test_suite_name()) + "." + info.name();
  }

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d: %s\n", rank_, test_.empty() ? "?" : test_.c_str(),
                 result.file_name() != nullptr ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
  std::string test_;
};

}  // namespace

MpiRuntime& Runtime() {
  FRUGAL_INTERNAL_ASSERT(runtime_instance != nullptr, "MPI runtime not initialised");
  return *runtime_instance;
}

std::unique_ptr<Transport> TestWorld() {
  auto world = Runtime().World();
  if (!world.ok()) {
    ADD_FAILURE() << "MpiRuntime::World: " << world.status().ToString();
    return nullptr;
  }
  return std::move(world).value();
}

bool AbandonedOperationsComplete(Duration timeout) {
  const auto start = Clock::now();
  while (Runtime().abandoned_operations() > 0) {
    if (Clock::now() - start > timeout) return false;
  }
  return true;
}

}  // namespace frugal::mpitest

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto runtime = frugal::MpiRuntime::Init(&argc, &argv);
  if (!runtime.ok()) {
    std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str());
    return 1;
  }
  frugal::mpitest::runtime_instance = runtime->get();
  const int rank = (*runtime)->world_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new frugal::mpitest::FailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;

  // Agree on the outcome: rank 0 reports the ranks that failed; every rank exits alike.
  int any_failed = failed;
  {
    auto world = (*runtime)->World();
    if (!world.ok()) {
      any_failed = 1;
    } else {
      frugal::Transport& t = **world;
      const frugal::Duration timeout = std::chrono::seconds(30);
      const int tag = 1;
      std::byte flag{static_cast<unsigned char>(failed)};
      if (rank == 0) {
        std::string failed_ranks = failed ? "0" : "";
        for (int r = 1; r < t.size(); ++r) {
          std::byte peer_flag{1};
          frugal::Status s = frugal::Recv(t, r, tag, {&peer_flag, 1}, timeout);
          if (!s.ok() || peer_flag != std::byte{0}) {
            failed_ranks += (failed_ranks.empty() ? "" : ", ") + std::to_string(r);
            any_failed = 1;
          }
        }
        for (int r = 1; r < t.size(); ++r) {
          std::byte verdict{static_cast<unsigned char>(any_failed)};
          (void)frugal::Send(t, r, tag, {&verdict, 1}, timeout);
        }
        if (any_failed)
          std::fprintf(stderr, "tier-2 tests failed on ranks: %s\n", failed_ranks.c_str());
      } else {
        (void)frugal::Send(t, 0, tag, {&flag, 1}, timeout);
        std::byte verdict{1};
        frugal::Status s = frugal::Recv(t, 0, tag, {&verdict, 1}, timeout);
        any_failed = (!s.ok() || verdict != std::byte{0}) ? 1 : failed;
      }
    }
  }
  frugal::mpitest::runtime_instance = nullptr;
  return any_failed;
}
