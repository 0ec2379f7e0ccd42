// The emulated network for real: shaping of both NIC directions measured with bulk TCP
// transfers, per-host hostnames through mpirun, removal on exit, on a signal and after a kill.
// Needs root and network namespaces; skips otherwise.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "child_process.h"
#include "emulate_job.h"
#include "emulate_state.h"
#include "emulated_network.h"
#include "frugal/logging.h"
#include "tcp_allowance.h"

namespace frugal::apps {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

#define SKIP_WITHOUT_EMULATION()                                                \
  do {                                                                          \
    Status support = CheckEmulationSupport();                                   \
    if (!support.ok()) GTEST_SKIP() << support.message();                       \
    if (!fs::exists("/run/netns") && ::system("ip netns list >/dev/null") != 0) \
      GTEST_SKIP() << "ip netns unusable";                                      \
  } while (false)

Logger Quiet() { return Logger(LogLevel::kError); }

// The first line of /proc/sys/net/ipv4/NAME (empty when unreadable).
std::string Ipv4Sysctl(const std::string& name) {
  const StatusOr<std::string> line = ReadIpv4Sysctl(name);
  return line.ok() ? *line : std::string();
}

// The narrowest allowed list a machine whose default is `machine` can have: reno and it.
std::string NarrowestAllowedList(const std::string& machine) {
  return machine == "reno" ? "reno" : "reno " + machine;
}

#define SKIP_WITHOUT_EMULATED_MPIRUN()                                                  \
  do {                                                                                  \
    SKIP_WITHOUT_EMULATION();                                                           \
    if (RunCommand({"mpirun", "--version"}).status().code() == StatusCode::kNotFound) { \
      GTEST_SKIP() << "no mpirun";                                                      \
    }                                                                                   \
  } while (false)

// A job of `np` ranks on the emulated hosts of `spec`, each running the shell `script`, allowed
// to run as root.
EmulatedJob ShellJob(std::string_view spec, int np, std::string script) {
  EmulatedJob job;
  job.spec = *ParseEmulateSpec(spec);
  job.np = np;
  job.command = {"sh", "-c", std::move(script)};
  job.timeout = std::chrono::seconds(120);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  return job;
}

std::vector<std::string> NamespacesOf(const std::string& tag) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/run/netns", ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(tag + "-", 0) == 0) names.push_back(n);
  }
  return names;
}

// Enters a network namespace in a forked child.
void EnterNamespace(const std::string& name) {
  int fd = ::open(EmulatedNetwork::NamespacePath(name).c_str(), O_RDONLY);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) ::_exit(90);
  ::close(fd);
}

// Forks a receiver in `ns` listening on address:port; it accepts `senders` connections, drains
// them and writes (bytes, seconds from first to last byte) to the returned pipe.
struct Receiver {
  pid_t pid;
  int result_fd;
};

Receiver StartReceiver(const std::string& ns, const std::string& address, int port, int senders) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  int ready[2];
  if (::pipe(ready) != 0) std::abort();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::close(ready[0]);
    EnterNamespace(ns);
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, address.c_str(), &addr.sin_addr);
    if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) ::_exit(91);
    if (::listen(s, 8) != 0) ::_exit(92);
    char c = 1;
    if (::write(ready[1], &c, 1) != 1) ::_exit(93);
    std::vector<int> conns;
    for (int i = 0; i < senders; ++i) {
      int conn = ::accept(s, nullptr, nullptr);
      if (conn < 0) ::_exit(94);
      conns.push_back(conn);
    }
    std::vector<pollfd> pfds;
    for (int conn : conns) pfds.push_back({conn, POLLIN, 0});
    std::vector<char> buffer(1 << 20);
    double bytes = 0;
    Clock::time_point first{}, last{};
    int open = senders;
    while (open > 0) {
      if (::poll(pfds.data(), pfds.size(), 30000) <= 0) ::_exit(95);
      for (auto& p : pfds) {
        if (p.fd < 0 || !(p.revents & (POLLIN | POLLHUP))) continue;
        ssize_t n = ::read(p.fd, buffer.data(), buffer.size());
        if (n > 0) {
          if (bytes == 0) first = Clock::now();
          bytes += static_cast<double>(n);
          last = Clock::now();
        } else {
          ::close(p.fd);
          p.fd = -1;
          --open;
        }
      }
    }
    double result[2] = {bytes, std::chrono::duration<double>(last - first).count()};
    if (::write(fds[1], result, sizeof(result)) != sizeof(result)) ::_exit(96);
    ::_exit(0);
  }
  ::close(fds[1]);
  ::close(ready[1]);
  char c;
  pollfd p{ready[0], POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1 || ::read(ready[0], &c, 1) != 1) std::abort();
  ::close(ready[0]);
  return {pid, fds[0]};
}

pid_t StartSender(const std::string& ns, const std::string& address, int port, size_t bytes) {
  pid_t pid = ::fork();
  if (pid == 0) {
    EnterNamespace(ns);
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, address.c_str(), &addr.sin_addr);
    if (::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) ::_exit(81);
    std::vector<char> chunk(1 << 20, 'x');
    size_t sent = 0;
    while (sent < bytes) {
      ssize_t n = ::write(s, chunk.data(), std::min(chunk.size(), bytes - sent));
      if (n <= 0) ::_exit(82);
      sent += static_cast<size_t>(n);
    }
    ::close(s);
    ::_exit(0);
  }
  return pid;
}

// Waits for a child with a deadline; returns its exit code (or -signal, or -1000 on timeout).
int WaitChild(pid_t pid, std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int status;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1000;
}

// Bits per second seen by the receiver.
double ReadRate(const Receiver& receiver) {
  double result[2] = {0, 0};
  pollfd p{receiver.result_fd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 60000), 1);
  EXPECT_EQ(::read(receiver.result_fd, result, sizeof(result)), (ssize_t)sizeof(result));
  ::close(receiver.result_fd);
  EXPECT_EQ(WaitChild(receiver.pid, std::chrono::seconds(10)), 0);
  return result[1] > 0 ? result[0] * 8 / result[1] : 0;
}

struct RateCase {
  const char* nic;
  size_t bytes;  // about one second of traffic
};

class BulkTransfer : public ::testing::TestWithParam<RateCase> {};

// One sender, one receiver: the sender's upstream bucket limits the transfer.
TEST_P(BulkTransfer, ReachesTheConfiguredRate) {
  SKIP_WITHOUT_EMULATION();
  std::uint64_t rate = *ParseRate(GetParam().nic);
  auto network = EmulatedNetwork::Create(2, rate, Quiet());
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  const auto& hosts = (*network)->hosts();
  Receiver receiver = StartReceiver(hosts[1].name, hosts[1].address, 5201, 1);
  pid_t sender = StartSender(hosts[0].name, hosts[1].address, 5201, GetParam().bytes);
  double measured = ReadRate(receiver);
  EXPECT_EQ(WaitChild(sender, std::chrono::seconds(30)), 0);
  double fraction = measured / static_cast<double>(rate);
  RecordProperty("fraction_of_nic", std::to_string(fraction));
  std::printf("%s: %.1f Mbit/s = %.3f of the NIC rate\n", GetParam().nic, measured / 1e6, fraction);
  // Alone on the machine the transfer reaches 0.95-0.96 of the rate; beside another test busy on
  // both cores 0.87 was seen (the sender is not always running when the bucket has tokens). The
  // bounds still catch a shaper set to the wrong rate or unit, and one that lets traffic through
  // faster than the NIC.
  EXPECT_GE(fraction, 0.80);
  EXPECT_LE(fraction, 1.05);
}

INSTANTIATE_TEST_SUITE_P(Nic, BulkTransfer,
                         ::testing::Values(RateCase{"100mbit", 12'500'000},
                                           RateCase{"1gbit", 110'000'000}),
                         [](const auto& info) { return std::string(info.param.nic); });

// mtu=BYTES: both ends of every host's veth carry it, and the buckets let frames of that size
// through at the NIC's rate (a bucket smaller than a frame would pass nothing).
TEST(EmulatedNetwork, JumboFramesPassAtTheRate) {
  SKIP_WITHOUT_EMULATION();
  const std::uint64_t rate = 100'000'000;
  int port = 5230;
  for (const int mtu : {9000, 65535}) {
    auto network = EmulatedNetwork::Create({rate, rate}, Quiet(), EmulatedLinks{.mtu = mtu});
    ASSERT_TRUE(network.ok()) << network.status().ToString();
    const auto& hosts = (*network)->hosts();
    for (const auto& host : hosts) {
      auto shown = RunCommand({"ip", "-n", host.name, "-o", "link", "show", "eth0"});
      ASSERT_TRUE(shown.ok()) << shown.status().ToString();
      EXPECT_EQ(shown->exit_code, 0) << shown->output;
      EXPECT_THAT(shown->output, HasSubstr("mtu " + std::to_string(mtu) + " ")) << host.name;
    }
    Receiver receiver = StartReceiver(hosts[1].name, hosts[1].address, port, 1);
    pid_t sender = StartSender(hosts[0].name, hosts[1].address, port, 12'500'000);
    const double fraction = ReadRate(receiver) / static_cast<double>(rate);
    EXPECT_EQ(WaitChild(sender, std::chrono::seconds(30)), 0);
    std::printf("mtu %d: %.3f of the NIC rate\n", mtu, fraction);
    EXPECT_GE(fraction, 0.80) << "mtu " << mtu;
    EXPECT_LE(fraction, 1.05) << "mtu " << mtu;
    ++port;
  }
}

// tcp=NAME: every namespace of the network (control and hosts) runs that congestion control,
// whatever the machine's own is, which stays as it was; a name the kernel does not know fails
// the creation with one line naming it, and leaves nothing behind. slow-start-after-idle=0|1
// likewise sets every namespace's tcp_slow_start_after_idle (1 unless told).
TEST(EmulatedNetwork, SetsTheCongestionControlOfEveryNamespace) {
  SKIP_WITHOUT_EMULATION();
  auto machine_tcp = [] { return Ipv4Sysctl("tcp_congestion_control"); };
  const std::string before = machine_tcp();
  ASSERT_FALSE(before.empty());
  // reno is built into every kernel; pick the other of reno and cubic than the machine's.
  const std::string wanted = before == "reno" ? "cubic" : "reno";
  // The sysctl `key` in every namespace of `network`, as sysctl -n shows it.
  auto expect_everywhere = [](EmulatedNetwork& network, const std::string& key,
                              const std::string& value) {
    std::vector<std::string> namespaces = {network.control_namespace()};
    for (const auto& host : network.hosts()) namespaces.push_back(host.name);
    for (const std::string& ns : namespaces) {
      RunCommandOptions in_ns;
      in_ns.netns_path = EmulatedNetwork::NamespacePath(ns);
      auto shown = RunCommand({"sysctl", "-n", key}, in_ns);
      ASSERT_TRUE(shown.ok()) << shown.status().ToString();
      EXPECT_EQ(shown->exit_code, 0) << shown->output;
      EXPECT_EQ(shown->output, value + "\n") << ns << " " << key;
    }
  };
  auto network =
      EmulatedNetwork::Create({100'000'000, 100'000'000}, Quiet(),
                              EmulatedLinks{.tcp = wanted, .slow_start_after_idle = false});
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  expect_everywhere(**network, "net.ipv4.tcp_congestion_control", wanted);
  expect_everywhere(**network, "net.ipv4.tcp_slow_start_after_idle", "0");
  EXPECT_EQ(machine_tcp(), before);
  ASSERT_TRUE((*network)->Destroy().ok());
  auto by_default = EmulatedNetwork::Create({100'000'000}, Quiet(), EmulatedLinks{});
  ASSERT_TRUE(by_default.ok()) << by_default.status().ToString();
  expect_everywhere(**by_default, "net.ipv4.tcp_slow_start_after_idle", "1");
  ASSERT_TRUE((*by_default)->Destroy().ok());

  auto refused = EmulatedNetwork::Create({100'000'000}, Quiet(), EmulatedLinks{.tcp = "nosuchcc"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("tcp=nosuchcc: the kernel refused it as TCP congestion control ("));
  EXPECT_THAT(refused.status().message(), HasSubstr("; available: "));
  EXPECT_THAT(refused.status().message(), HasSubstr("reno"));
  // This process's networks are frg-<pid>-<k>: none is left.
  EXPECT_THAT(NamespacesOf(fmt::format("frg-{}", ::getpid())), ::testing::IsEmpty());
  EXPECT_EQ(machine_tcp(), before);
}

// A congestion control the machine restricts to its own namespace (not in
// net.ipv4.tcp_allowed_congestion_control: the kernel refuses it to every other namespace) is
// taken by every namespace of the network all the same, and the machine's list is as it was
// afterwards. The test restricts one (the machine's list is put back at the end, under the
// emulation's lock as every change of it).
TEST(EmulatedNetwork, TakesACongestionControlTheMachineRestricts) {
  SKIP_WITHOUT_EMULATION();
  const auto read = Ipv4Sysctl;
  auto write_allowed = [](const std::string& list) {
    auto lock = StateLock::Acquire();
    ASSERT_TRUE(lock.ok()) << lock.status().ToString();
    Status written = SetAllowedCongestionControls(list);
    ASSERT_TRUE(written.ok()) << written.ToString();
  };
  const std::string machine = read("tcp_congestion_control");
  const std::string original = read("tcp_allowed_congestion_control");
  ASSERT_FALSE(original.empty());
  // A loaded congestion control other than reno (always allowed) and the machine's default.
  std::string restricted;
  for (const char* name : {"cubic", "bbr"}) {
    if (name != machine && ListsWord(read("tcp_available_congestion_control"), name)) {
      restricted = name;
      break;
    }
  }
  if (restricted.empty()) GTEST_SKIP() << "neither cubic nor bbr is loaded beside " << machine;
  const std::string narrowed = NarrowestAllowedList(machine);
  write_allowed(narrowed);
  auto network = EmulatedNetwork::Create({100'000'000, 100'000'000}, Quiet(),
                                         EmulatedLinks{.tcp = restricted});
  std::string after;
  {
    auto lock = StateLock::Acquire();
    ASSERT_TRUE(lock.ok()) << lock.status().ToString();
    after = read("tcp_allowed_congestion_control");
  }
  write_allowed(original);
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  std::vector<std::string> namespaces = {(*network)->control_namespace()};
  for (const auto& host : (*network)->hosts()) namespaces.push_back(host.name);
  for (const std::string& ns : namespaces) {
    RunCommandOptions in_ns;
    in_ns.netns_path = EmulatedNetwork::NamespacePath(ns);
    auto shown = RunCommand({"sysctl", "-n", "net.ipv4.tcp_congestion_control"}, in_ns);
    ASSERT_TRUE(shown.ok()) << shown.status().ToString();
    EXPECT_EQ(shown->output, restricted + "\n") << ns;
  }
  EXPECT_EQ(after, narrowed);
  EXPECT_EQ(read("tcp_congestion_control"), machine);
  ASSERT_TRUE((*network)->Destroy().ok());
}

// A run killed while the allowed list was widened leaves its record of the list as it was; the
// next network puts that list back and removes the record.
TEST(EmulatedNetwork, PutsBackTheAllowedListAKilledRunWidened) {
  SKIP_WITHOUT_EMULATION();
  const auto read = Ipv4Sysctl;
  const std::string machine = read("tcp_congestion_control");
  const std::string narrowed = NarrowestAllowedList(machine);
  const std::string extra = machine == "cubic" ? "bbr" : "cubic";
  if (!ListsWord(read("tcp_available_congestion_control"), extra)) {
    GTEST_SKIP() << extra << " is not loaded";
  }
  const fs::path record = fs::path(kEmulateStateRoot) / kAllowanceRecord;
  std::string original;
  {
    auto lock = StateLock::Acquire();
    ASSERT_TRUE(lock.ok()) << lock.status().ToString();
    original = read("tcp_allowed_congestion_control");
    ASSERT_TRUE(SetAllowedCongestionControls(narrowed + " " + extra).ok());
    fs::create_directories(kEmulateStateRoot);
    std::ofstream(record) << narrowed << "\n";
  }
  auto network = EmulatedNetwork::Create({100'000'000}, Quiet(), EmulatedLinks{.tcp = "reno"});
  std::string after;
  bool record_left = false;
  {
    auto lock = StateLock::Acquire();
    ASSERT_TRUE(lock.ok()) << lock.status().ToString();
    after = read("tcp_allowed_congestion_control");
    record_left = fs::exists(record);
    fs::remove(record);
    ASSERT_TRUE(SetAllowedCongestionControls(original).ok());
  }
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  EXPECT_EQ(after, narrowed);
  EXPECT_FALSE(record_left);
  ASSERT_TRUE((*network)->Destroy().ok());
}

// Two senders into one receiver: the receiver's downstream bucket (on the bridge side) must hold
// the sum to the NIC rate, not twice it.
TEST(EmulatedNetwork, DownstreamIsShapedToo) {
  SKIP_WITHOUT_EMULATION();
  const std::uint64_t rate = 200'000'000;
  auto network = EmulatedNetwork::Create(3, rate, Quiet());
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  const auto& hosts = (*network)->hosts();
  Receiver receiver = StartReceiver(hosts[2].name, hosts[2].address, 5202, 2);
  pid_t a = StartSender(hosts[0].name, hosts[2].address, 5202, 12'500'000);
  pid_t b = StartSender(hosts[1].name, hosts[2].address, 5202, 12'500'000);
  double measured = ReadRate(receiver);
  EXPECT_EQ(WaitChild(a, std::chrono::seconds(30)), 0);
  EXPECT_EQ(WaitChild(b, std::chrono::seconds(30)), 0);
  double fraction = measured / static_cast<double>(rate);
  std::printf("incast of 2 into a 200mbit NIC: %.1f Mbit/s = %.3f of the NIC rate\n",
              measured / 1e6, fraction);
  EXPECT_GE(fraction, 0.85);
  EXPECT_LE(fraction, 1.05);
}

// Hosts with rates of their own (--emulate nic.I=RATE): a transfer runs at the slower of the
// sender's upstream and the receiver's downstream rate.
TEST(EmulatedNetwork, EachHostHasItsOwnRate) {
  SKIP_WITHOUT_EMULATION();
  const std::vector<std::uint64_t> rates = {200'000'000, 50'000'000, 200'000'000};
  auto network = EmulatedNetwork::Create(rates, Quiet());
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  EXPECT_EQ((*network)->nic_bits_per_second(1), 50'000'000u);
  const auto& hosts = (*network)->hosts();
  struct Transfer {
    int from;
    int to;
    std::uint64_t expected;  // bits per second
  };
  int port = 5210;
  for (const Transfer& t :
       {Transfer{0, 1, 50'000'000}, Transfer{1, 2, 50'000'000}, Transfer{0, 2, 200'000'000}}) {
    Receiver receiver = StartReceiver(hosts[t.to].name, hosts[t.to].address, port, 1);
    // Two seconds of data at the expected rate: TCP's slow start weighs less than in one.
    pid_t sender = StartSender(hosts[t.from].name, hosts[t.to].address, port, t.expected / 4);
    const double measured = ReadRate(receiver);
    EXPECT_EQ(WaitChild(sender, std::chrono::seconds(30)), 0);
    const double fraction = measured / static_cast<double>(t.expected);
    std::printf("host %d -> host %d: %.1f Mbit/s = %.3f of the slower NIC\n", t.from, t.to,
                measured / 1e6, fraction);
    // A wrong bucket is off by 4x (50 against 200 Mbit/s); a loaded machine costs up to 15%.
    EXPECT_GE(fraction, 0.85) << t.from << " -> " << t.to;
    EXPECT_LE(fraction, 1.05) << t.from << " -> " << t.to;
    ++port;
  }
}

TEST(EmulatedNetwork, DestroyRemovesEverything) {
  SKIP_WITHOUT_EMULATION();
  auto network = EmulatedNetwork::Create(3, 100'000'000, Quiet());
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  std::string tag = (*network)->tag();
  fs::path state = (*network)->state_dir();
  EXPECT_EQ(NamespacesOf(tag).size(), 4u);  // control + 3 hosts
  EXPECT_TRUE(fs::exists(state / "owner"));
  ASSERT_TRUE((*network)->Destroy().ok());
  EXPECT_TRUE(NamespacesOf(tag).empty());
  EXPECT_FALSE(fs::exists(state));
  EXPECT_TRUE((*network)->Destroy().ok());  // idempotent
}

TEST(EmulatedNetwork, LeftOversOfAKilledRunAreRemoved) {
  SKIP_WITHOUT_EMULATION();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    auto network = EmulatedNetwork::Create(2, 100'000'000, Quiet());
    if (!network.ok()) ::_exit(1);
    // A process left running inside an emulated host, like an orphaned rank.
    SpawnOptions options;
    options.parent_death_signal = 0;
    options.netns_path = EmulatedNetwork::NamespacePath((*network)->hosts()[0].name);
    auto orphan = Child::Spawn({"sleep", "60"}, options);
    if (!orphan.ok()) ::_exit(2);
    std::string tag = (*network)->tag();
    if (::write(fds[1], tag.data(), tag.size()) != (ssize_t)tag.size()) ::_exit(3);
    ::close(fds[1]);
    ::pause();  // killed here, before any cleanup
    ::_exit(4);
  }
  ::close(fds[1]);
  char buffer[64] = {};
  pollfd p{fds[0], POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 30000), 1);
  ssize_t n = ::read(fds[0], buffer, sizeof(buffer) - 1);
  ::close(fds[0]);
  ASSERT_GT(n, 0);
  std::string tag(buffer, static_cast<size_t>(n));
  ::kill(pid, SIGKILL);
  EXPECT_EQ(WaitChild(pid, std::chrono::seconds(10)), -SIGKILL);
  ASSERT_EQ(NamespacesOf(tag).size(), 3u);
  auto removed = RemoveLeftovers(Quiet());
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_THAT(*removed, ::testing::Contains(tag));
  EXPECT_TRUE(NamespacesOf(tag).empty());
  EXPECT_FALSE(fs::exists(fs::path(kEmulateStateRoot) / tag));
}

TEST(EmulatedNetwork, LiveRunsAreLeftAlone) {
  SKIP_WITHOUT_EMULATION();
  auto network = EmulatedNetwork::Create(1, 100'000'000, Quiet());
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  auto removed = RemoveLeftovers(Quiet());
  ASSERT_TRUE(removed.ok());
  EXPECT_THAT(*removed, ::testing::Not(::testing::Contains((*network)->tag())));
  EXPECT_EQ(NamespacesOf((*network)->tag()).size(), 2u);
}

fs::path TempDir(const std::string& name) {
  fs::path dir =
      fs::temp_directory_path() / fmt::format("frugal-emulation-test-{}-{}", name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// mpirun through the rsh agent: every rank runs on its emulated host, with its hostname.
TEST(RunEmulatedJob, RanksRunOnTheirEmulatedHosts) {
  SKIP_WITHOUT_EMULATED_MPIRUN();
  fs::path dir = TempDir("hosts");
  EmulatedJob job =
      ShellJob("hosts=2,nic=100mbit", 4,
               fmt::format("echo $(hostname) $(ip -4 -o addr show dev eth0 | awk '{{print $4}}') "
                           "$(getent hosts $(hostname) | awk '{{print $1}}') "
                           "> {0}/rank.$OMPI_COMM_WORLD_RANK; "
                           "cat /proc/sys/kernel/random/boot_id > {0}/boot.$OMPI_COMM_WORLD_RANK",
                           dir.string()));
  auto code = RunEmulatedJob(job, Quiet());
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0);
  std::map<int, std::string> lines;
  for (int r = 0; r < 4; ++r) {
    std::ifstream in(dir / fmt::format("rank.{}", r));
    std::getline(in, lines[r]);
  }
  // Ranks 0,1 on host 0 and 2,3 on host 1, each named after its namespace, with its name
  // resolving to its emulated address.
  EXPECT_THAT(lines[0],
              ::testing::MatchesRegex("frg-[0-9]+-[0-9]+-h0 10\\.213\\.0\\.1/24 10\\.213\\.0\\.1"));
  EXPECT_EQ(lines[0], lines[1]);
  EXPECT_THAT(lines[2],
              ::testing::MatchesRegex("frg-[0-9]+-[0-9]+-h1 10\\.213\\.0\\.2/24 10\\.213\\.0\\.2"));
  EXPECT_EQ(lines[2], lines[3]);
  // Emulated hosts share the machine's kernel: the MPI transport counts the ranks that share its
  // cores by the kernel's boot id, which every emulated host sees unchanged.
  std::string boot_id;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot_id);
  ASSERT_FALSE(boot_id.empty());
  for (int r = 0; r < 4; ++r) {
    std::string seen;
    std::getline(std::ifstream(dir / fmt::format("boot.{}", r)), seen);
    EXPECT_EQ(seen, boot_id) << "rank " << r;
  }
  fs::remove_all(dir);
}

// The last ranks alone (a parameter server's servers): 5 ranks on 3 hosts, the last on a host of
// its own, the others two by two.
TEST(RunEmulatedJob, TheLastRanksRunAloneOnTheirHosts) {
  SKIP_WITHOUT_EMULATED_MPIRUN();
  fs::path dir = TempDir("alone");
  EmulatedJob job = ShellJob("hosts=3,nic=100mbit", 5,
                             fmt::format("hostname > {}/rank.$OMPI_COMM_WORLD_RANK", dir.string()));
  job.alone = 1;
  auto code = RunEmulatedJob(job, Quiet());
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0);
  std::vector<std::string> host(5);
  for (int r = 0; r < 5; ++r) std::getline(std::ifstream(dir / fmt::format("rank.{}", r)), host[r]);
  for (int r = 0; r < 5; ++r) {
    EXPECT_THAT(host[r], ::testing::MatchesRegex(fmt::format("frg-[0-9]+-[0-9]+-h{}", r / 2)))
        << "rank " << r;
  }
  fs::remove_all(dir);
}

// SIGTERM during the job: the job is stopped, the network removed, exit code 128 + 15.
TEST(RunEmulatedJob, ASignalStopsTheJobAndRemovesTheNetwork) {
  SKIP_WITHOUT_EMULATED_MPIRUN();
  fs::path dir = TempDir("signal");
  pid_t pid = ::fork();
  if (pid == 0) {
    // Written under another name and renamed, so that the file appears with its content.
    const EmulatedJob job = ShellJob(
        "hosts=2,nic=100mbit", 2,
        fmt::format("hostname > {0}/tmp.$OMPI_COMM_WORLD_RANK && "
                    "mv {0}/tmp.$OMPI_COMM_WORLD_RANK {0}/started.$OMPI_COMM_WORLD_RANK; sleep 60",
                    dir.string()));
    auto code = RunEmulatedJob(job, Quiet());
    ::_exit(code.ok() ? *code : 1);
  }
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!(fs::exists(dir / "started.0") && fs::exists(dir / "started.1")) &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(fs::exists(dir / "started.1")) << "the job did not start";
  std::ifstream in(dir / "started.1");
  std::string host;
  in >> host;
  std::string tag = host.substr(0, host.rfind('-'));
  ASSERT_EQ(NamespacesOf(tag).size(), 3u);
  auto start = Clock::now();
  ::kill(pid, SIGTERM);
  EXPECT_EQ(WaitChild(pid, std::chrono::seconds(40)), 128 + SIGTERM);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
  EXPECT_TRUE(NamespacesOf(tag).empty());
  EXPECT_FALSE(fs::exists(fs::path(kEmulateStateRoot) / tag));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace frugal::apps
