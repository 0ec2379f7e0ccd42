// --emulate spec parsing, rate units, rank placement and the child-process helpers. No root
// needed.
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

#include "child_process.h"
#include "emulate.h"

namespace frugal::apps {
namespace {

using ::testing::HasSubstr;

TEST(ParseRate, UnitsAreTcsDecimalBitsPerSecond) {
  EXPECT_EQ(*ParseRate("100mbit"), 100'000'000u);
  EXPECT_EQ(*ParseRate("1gbit"), 1'000'000'000u);
  EXPECT_EQ(*ParseRate("2.5Gbit"), 2'500'000'000u);
  EXPECT_EQ(*ParseRate("1500kbit"), 1'500'000u);
  EXPECT_EQ(*ParseRate("5000000bit"), 5'000'000u);
}

TEST(ParseRate, RejectsNonRatesAndOutOfRange) {
  for (const char* bad : {"", "100", "mbit", "100mbps", "100MB", "1.2.3gbit", "-5mbit", "1e9bit",
                          "10kbit", "200gbit", ".mbit"}) {
    auto r = ParseRate(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

TEST(FormatRate, RoundTrips) {
  for (std::uint64_t rate : {1'000'000ull, 100'000'000ull, 1'000'000'000ull, 2'500'000'000ull,
                             750'000'000ull, 12'345'000ull}) {
    std::string text = FormatRate(rate);
    auto back = ParseRate(text);
    ASSERT_TRUE(back.ok()) << text;
    EXPECT_EQ(*back, rate) << text;
  }
  EXPECT_EQ(FormatRate(100'000'000), "100mbit");
  EXPECT_EQ(FormatRate(1'000'000'000), "1gbit");
}

TEST(ParseEmulateSpec, AcceptsTheDocumentedForms) {
  auto spec = ParseEmulateSpec("hosts=4,nic=100mbit");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->hosts, 4);
  EXPECT_EQ(spec->nic_bits_per_second, 100'000'000u);
  EXPECT_EQ(spec->ranks_per_host, 0);

  spec = ParseEmulateSpec(" nic=1gbit , ranks-per-host=2, hosts=8 ");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->hosts, 8);
  EXPECT_EQ(spec->nic_bits_per_second, 1'000'000'000u);
  EXPECT_EQ(spec->ranks_per_host, 2);
}

TEST(ParseEmulateSpec, RejectsBadSpecsWithAClearMessage) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"", "empty"}, Case{"hosts=4", "nic=RATE is missing"},
        Case{"nic=1gbit", "hosts=H is missing"},
        Case{"hosts=4,nic=1gbit,latency=5ms", "unknown key 'latency'"},
        Case{"hosts=4,hosts=2,nic=1gbit", "given twice"}, Case{"hosts=0,nic=1gbit", "out of range"},
        Case{"hosts=65,nic=1gbit", "out of range"},
        Case{"hosts=four,nic=1gbit", "not a whole number"}, Case{"hosts=4,nic=fast", "not a rate"},
        Case{"hosts=4,nic=1gbit,ranks-per-host=0", "out of range"},
        Case{"hosts4,nic=1gbit", "not key=value"}}) {
    auto spec = ParseEmulateSpec(c.text);
    ASSERT_FALSE(spec.ok()) << c.text;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.says)) << c.text;
    EXPECT_THAT(spec.status().message(), HasSubstr("--emulate")) << c.text;
  }
}

TEST(RanksPerHost, SpreadsEvenlyOrRefuses) {
  EmulateSpec spec{.hosts = 4, .nic_bits_per_second = 100'000'000, .ranks_per_host = 0};
  EXPECT_EQ(*RanksPerHost(spec, 4), 1);
  EXPECT_EQ(*RanksPerHost(spec, 8), 2);
  EXPECT_EQ(RanksPerHost(spec, 6).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RanksPerHost(spec, 2).status().code(), StatusCode::kInvalidArgument);
  spec.ranks_per_host = 2;
  EXPECT_EQ(*RanksPerHost(spec, 8), 2);
  EXPECT_THAT(RanksPerHost(spec, 4).status().message(), HasSubstr("ranks-per-host=2"));
}

TEST(ValidateEmulateFlag, RefusesBadCombinationsBeforeAnythingRuns) {
  EXPECT_THAT(ValidateEmulateFlag("hosts=2,nic=1gbit", 0, false).status().message(),
              HasSubstr("needs --np"));
  EXPECT_THAT(ValidateEmulateFlag("hosts=2,nic=1gbit", 4, true).status().message(),
              HasSubstr("--hostfile"));
  EXPECT_EQ(ValidateEmulateFlag("hosts=3,nic=1gbit", 4, false).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateEmulateFlag("hosts=2,nic=1tbit", 4, false).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(TbfFor, BucketAndQueueGrowWithTheRate) {
  TbfParameters slow = TbfFor(10'000'000);
  EXPECT_EQ(slow.burst_bytes, 16u * 1024);
  EXPECT_EQ(slow.limit_bytes, 64u * 1024);
  TbfParameters fast = TbfFor(10'000'000'000);
  EXPECT_EQ(fast.burst_bytes, 1'250'000u);   // 1 ms at 10 gbit
  EXPECT_EQ(fast.limit_bytes, 25'000'000u);  // 20 ms
}

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
    if (hung == 0) EXPECT_EQ(*code, 0) << "the child did not see its environment";
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
