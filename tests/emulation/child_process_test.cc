// The child-process helpers of the command line (child_process.h): captured commands with a
// deadline, supervised children with held signals, and RunSupervised.
#include "child_process.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <future>
#include <string>
#include <thread>

namespace frugal::apps {
namespace {

using ::testing::HasSubstr;

TEST(RunCommand, CapturesOutputAndExitCode) {
  auto r = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_THAT(r->output, HasSubstr("out"));
  EXPECT_THAT(r->output, HasSubstr("err"));
  Status s = RunChecked({"sh", "-c", "echo 'no such device' >&2; exit 1"});
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("no such device"));
}

TEST(RunCommand, MissingProgramIsNotFound) {
  auto r = RunCommand({"frugal-no-such-program-xyz"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(RunCommand, TimesOutAndKills) {
  auto start = std::chrono::steady_clock::now();
  RunCommandOptions options;
  options.timeout = std::chrono::milliseconds(200);
  auto r = RunCommand({"sleep", "30"}, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(ShellQuote, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(ShellQuote({"ip", "-n", "frg-1-0-c", "link"}), "ip -n frg-1-0-c link");
  EXPECT_EQ(ShellQuote({"sh", "-c", "echo it's"}), "sh -c 'echo it'\\''s'");
}

TEST(Child, SuperviseForwardsAHeldSignalAndReportsIt) {
  HeldSignals held;
  auto child = Child::Spawn({"sleep", "30"}, {});
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  // A SIGTERM to ourselves stays pending until Supervise takes it and forwards it.
  ::kill(::getpid(), SIGTERM);
  auto start = std::chrono::steady_clock::now();
  Status s = child->Supervise(held, start + std::chrono::seconds(20));
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(held.received(), SIGTERM);
  EXPECT_EQ(child->result().term_signal, SIGTERM);
  EXPECT_EQ(ShellExitCode(child->result()), 128 + SIGTERM);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Child, SuperviseEndsAChildAtItsDeadline) {
  HeldSignals held;
  auto child = Child::Spawn({"sleep", "30"}, {});
  ASSERT_TRUE(child.ok());
  auto start = std::chrono::steady_clock::now();
  Status s = child->Supervise(held, start + std::chrono::milliseconds(300));
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_FALSE(child->running());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Child, PassesExtraEnvironment) {
  HeldSignals held;
  SpawnOptions options;
  options.extra_env = {{"FRUGAL_TEST_VALUE", "42"}, {"HOME", "/nonexistent-home"}};
  auto child = Child::Spawn(
      {"sh", "-c", "test \"$FRUGAL_TEST_VALUE\" = 42 && test \"$HOME\" = /nonexistent-home"},
      options);
  ASSERT_TRUE(child.ok());
  ASSERT_TRUE(
      child->Supervise(held, std::chrono::steady_clock::now() + std::chrono::seconds(10)).ok());
  EXPECT_EQ(child->result().exit_code, 0);
}

TEST(Child, ReportsTheExitCode) {
  HeldSignals held;
  auto child = Child::Spawn({"sh", "-c", "exit 7"}, {});
  ASSERT_TRUE(child.ok());
  ASSERT_TRUE(
      child->Supervise(held, std::chrono::steady_clock::now() + std::chrono::seconds(10)).ok());
  EXPECT_EQ(child->result().exit_code, 7);
  EXPECT_FALSE(held.received().has_value());
}

// Kills every child of this process (listed by /proc/self/task/*/children).
void KillOurChildren() {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return;
  while (dirent* task = readdir(tasks)) {
    std::ifstream children(std::string("/proc/self/task/") + task->d_name + "/children");
    for (pid_t pid; children >> pid;) kill(pid, SIGKILL);
  }
  closedir(tasks);
}

// Another thread takes the environment's lock over and over (unsetenv of a variable that is not
// set changes nothing). A child that calls setenv after fork can inherit the lock held and wait
// forever; one that builds its environment before fork cannot.
TEST(RunSupervised, ExtraEnvironmentWhileAnotherThreadUsesTheEnvironment) {
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop) unsetenv("FRUGAL_TEST_NEVER_SET");
  });
  int hung = 0;
  for (int i = 0; i < 20; ++i) {
    auto run = std::async(std::launch::async, [&] {
      SpawnOptions options;
      options.extra_env = {{"FRUGAL_TEST_VALUE", "42"}};
      return RunSupervised({"sh", "-c", "test \"$FRUGAL_TEST_VALUE\" = 42"}, options,
                           std::chrono::seconds(10));
    });
    if (run.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ++hung;
      KillOurChildren();
    }
    auto code = run.get();
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    if (hung == 0) {
      EXPECT_EQ(*code, 0) << "the child did not see its environment";
    }
    if (hung > 0) break;
  }
  stop = true;
  churn.join();
  EXPECT_EQ(hung, 0) << "a child did not start within 20 s";
}

TEST(RunSupervised, ReturnsTheShellExitCode) {
  auto exited = RunSupervised({"sh", "-c", "exit 7"}, {}, std::chrono::seconds(10));
  ASSERT_TRUE(exited.ok()) << exited.status().ToString();
  EXPECT_EQ(*exited, 7);
  auto killed = RunSupervised({"sh", "-c", "kill -KILL $$"}, {}, std::chrono::seconds(10));
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  EXPECT_EQ(*killed, 128 + SIGKILL);
  auto missing = RunSupervised({"frugal-no-such-program"}, {}, std::chrono::seconds(10));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(RunSupervised, ForwardsATerminationSignalAndReportsIt) {
  // A SIGTERM to ourselves before the child starts stays held until Supervise forwards it.
  HeldSignals outer;
  ::kill(::getpid(), SIGTERM);
  auto start = std::chrono::steady_clock::now();
  auto code = RunSupervised({"sleep", "30"}, {}, std::chrono::seconds(10));
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 128 + SIGTERM);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace frugal::apps
