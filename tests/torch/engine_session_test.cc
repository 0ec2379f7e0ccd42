// EngineSession::Collective: a call that times out never runs later, when the frames it refers
// to are gone.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "frugal/inproc_transport.h"
#include "frugal_torch/engine_optimizer.h"
#include "torch/torch_test_util.h"

namespace frugal_torch {
namespace {

using frugal::Status;
using frugal::Transport;

TEST(EngineSession, ACollectiveThatTimedOutNeverRunsLater) {
  torch::set_num_threads(1);
  testing_torch::ExpectAllOk(frugal::RunRanks(1, [&](Transport& t) -> Status {
    auto reducer = testing_torch::Ring(t);
    torch::nn::Linear model(4, 3);
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
    FRUGAL_ASSIGN_OR_RETURN(
        std::unique_ptr<EngineSession> session,
        EngineSession::Start(t, *reducer, *model, sgd, OverlapOptions{},
                             std::chrono::milliseconds(300)));
    // The engine thread is kept busy by a first call for 1.5 s (it waits on a promise nobody
    // keeps), so that a second call queues behind it and its caller times out at 300 ms.
    std::promise<void> entered;
    std::promise<void> never;
    std::thread first([&] {
      (void)session->Collective("first", [&](Transport&) {
        entered.set_value();
        never.get_future().wait_for(std::chrono::milliseconds(1500));
        return Status::Ok();
      });
    });
    entered.get_future().wait();
    auto second_ran = std::make_shared<std::promise<void>>();
    std::future<void> second_ran_future = second_ran->get_future();
    const Status second = session->Collective("second", [second_ran](Transport&) {
      second_ran->set_value();
      return Status::Ok();
    });
    EXPECT_EQ(second.code(), frugal::StatusCode::kTimeout) << second.ToString();
    first.join();
    // Had the engine kept the second call, it would run it once the first returns (1.5 s).
    EXPECT_EQ(second_ran_future.wait_for(std::chrono::seconds(3)), std::future_status::timeout)
        << "the call that timed out ran after its caller had returned";
    EXPECT_FALSE(session->Collective("later", [](Transport&) { return Status::Ok(); }).ok());
    return Status::Ok();
  }));
}

}  // namespace
}  // namespace frugal_torch
