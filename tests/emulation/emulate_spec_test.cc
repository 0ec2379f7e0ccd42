// --emulate spec parsing, rate units, rank placement, run tags and the mpirun command line. No
// root needed.
#include "emulate_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "child_process.h"
#include "emulate_job.h"
#include "emulate_state.h"

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
  EXPECT_EQ(spec->links.mtu, 0);
  EXPECT_EQ(spec->links.tcp, "cubic");

  EXPECT_TRUE(spec->links.slow_start_after_idle);

  spec = ParseEmulateSpec("hosts=2,nic=100mbit,mtu=9000,tcp=bbr,slow-start-after-idle=0");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->links.mtu, 9000);
  EXPECT_EQ(spec->links.tcp, "bbr");
  EXPECT_FALSE(spec->links.slow_start_after_idle);
  spec = ParseEmulateSpec("hosts=2,nic=100mbit,slow-start-after-idle=1");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->links.slow_start_after_idle);
}

TEST(ParseEmulateSpec, HostsMayHaveTheirOwnRates) {
  auto spec = ParseEmulateSpec("hosts=4,nic=1gbit,nic.2=100mbit");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(NicRates(*spec),
            (std::vector<std::uint64_t>{1'000'000'000, 1'000'000'000, 100'000'000, 1'000'000'000}));
  EXPECT_EQ(FormatNicRates(*spec), "1gbit, host 2: 100mbit");
  spec = ParseEmulateSpec("nic.0=10mbit,hosts=2,nic=1gbit");  // any order
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(NicRates(*spec), (std::vector<std::uint64_t>{10'000'000, 1'000'000'000}));
  EXPECT_EQ(spec->nic_bits_per_second, 10'000'000u);  // host 0's
  spec = ParseEmulateSpec("hosts=3,nic=1gbit/100mbit/2.5gbit");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(NicRates(*spec),
            (std::vector<std::uint64_t>{1'000'000'000, 100'000'000, 2'500'000'000}));
  // One rate for all: no per-host list.
  spec = ParseEmulateSpec("hosts=3,nic=1gbit");
  EXPECT_TRUE(spec->host_nic_bits_per_second.empty());
  EXPECT_EQ(NicRates(*spec).size(), 3u);
  EXPECT_EQ(FormatNicRates(*spec), "1gbit");
}

TEST(ParseEmulateSpec, RejectsBadSpecsWithAClearMessage) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"", "empty"},
        Case{"hosts=4", "nic=RATE is missing"},
        Case{"nic=1gbit", "hosts=H is missing"},
        Case{"hosts=4,nic=1gbit,latency=5ms", "unknown key 'latency'"},
        Case{"hosts=4,hosts=2,nic=1gbit", "given twice"},
        Case{"hosts=0,nic=1gbit", "out of range"},
        Case{"hosts=65,nic=1gbit", "out of range"},
        Case{"hosts=four,nic=1gbit", "not a whole number"},
        Case{"hosts=4,nic=fast", "not a rate"},
        Case{"hosts=4,nic=1gbit,ranks-per-host=0", "out of range"},
        Case{"hosts=4,nic=1gbit,mtu=575", "out of range"},
        Case{"hosts=4,nic=1gbit,mtu=65536", "out of range"},
        Case{"hosts=4,nic=1gbit,mtu=jumbo", "not a whole number"},
        Case{"hosts=4,nic=1gbit,tcp=", "tcp='' is not a congestion control's name"},
        Case{"hosts=4,nic=1gbit,tcp=cubic;reboot", "is not a congestion control's name"},
        Case{"hosts=4,nic=1gbit,tcp=averyveryverylongname", "is not a congestion control's name"},
        Case{"hosts=4,nic=1gbit,tcp=reno,tcp=cubic", "given twice"},
        Case{"hosts=4,nic=1gbit,slow-start-after-idle=yes",
             "slow-start-after-idle='yes' is not 0 or 1"},
        Case{"hosts=4,nic=1gbit,slow-start-after-idle=", "slow-start-after-idle='' is not 0 or 1"},
        Case{"hosts4,nic=1gbit", "not key=value"},
        Case{"hosts=4,nic=1gbit,nic.4=10mbit", "nic.4 names host 4, but hosts are 0 to 3"},
        Case{"hosts=4,nic=1gbit,nic.1=10mbit,nic.1=20mbit", "given twice"},
        Case{"hosts=4,nic=1gbit,nic.x=10mbit", "not a whole number"},
        Case{"hosts=4,nic=1gbit,nic.1=slow", "not a rate"},
        Case{"hosts=4,nic=1gbit/10mbit", "nic lists 2 rates for 4 hosts"},
        Case{"hosts=2,nic=1gbit/", "not a rate"}}) {
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

TEST(RanksOfHosts, TheLastRanksAloneTheOthersEvenly) {
  using V = std::vector<int>;
  EmulateSpec spec{.hosts = 3, .nic_bits_per_second = 100'000'000, .ranks_per_host = 0};
  // 4 workers on 2 hosts, the server on the third.
  EXPECT_EQ(*RanksOfHosts(spec, 5, 1), (V{2, 2, 1}));
  // 2 workers on one host, 2 servers each on its own.
  EXPECT_EQ(*RanksOfHosts(spec, 4, 2), (V{2, 1, 1}));
  // As many hosts as ranks: one each; nothing alone: evenly.
  EXPECT_EQ(*RanksOfHosts(spec, 3, 1), (V{1, 1, 1}));
  EXPECT_EQ(*RanksOfHosts(spec, 6, 0), (V{2, 2, 2}));
  // 3 workers do not spread over 2 hosts; no host is left for the workers.
  EXPECT_THAT(RanksOfHosts(spec, 4, 1).status().message(),
              HasSubstr("the other 3 must spread evenly over the other 2 host(s)"));
  EXPECT_EQ(RanksOfHosts(spec, 6, 3).status().code(), StatusCode::kInvalidArgument);
  // ranks-per-host places every rank alike, the servers with the workers.
  spec.ranks_per_host = 2;
  EXPECT_EQ(*RanksOfHosts(spec, 6, 1), (V{2, 2, 2}));
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
  // 5 ranks do not spread over 3 hosts evenly (they do with the last one alone, 2/2/1); with
  // the last of 6 alone, 5 do not spread over 2.
  EXPECT_THAT(ValidateEmulateFlag("hosts=3,nic=1gbit", 5, false, 0).status().message(),
              HasSubstr("does not spread evenly"));
  EXPECT_THAT(ValidateEmulateFlag("hosts=3,nic=1gbit", 6, false, 1).status().message(),
              HasSubstr("the other 5 must spread evenly over the other 2 host(s)"));
}

TEST(TbfFor, BucketAndQueueGrowWithTheRate) {
  TbfParameters slow = TbfFor(10'000'000);
  EXPECT_EQ(slow.burst_bytes, 16u * 1024);
  EXPECT_EQ(slow.limit_bytes, 64u * 1024);
  TbfParameters fast = TbfFor(10'000'000'000);
  EXPECT_EQ(fast.burst_bytes, 1'250'000u);   // 1 ms at 10 gbit
  EXPECT_EQ(fast.limit_bytes, 25'000'000u);  // 20 ms
  // The bucket holds a whole frame of the MTU (with its Ethernet header), or no frame passes.
  EXPECT_EQ(TbfFor(10'000'000, 9000).burst_bytes, 16u * 1024);
  EXPECT_EQ(TbfFor(10'000'000, 65535).burst_bytes, 65535u + 18);
  EXPECT_EQ(TbfFor(10'000'000'000, 65535).burst_bytes, 1'250'000u);
  // The queue holds 16 frames of the MTU where 20 ms of traffic would hold fewer: 64 KB frames
  // below about 420 Mbit/s, 9000-byte frames below about 58 Mbit/s; 1500-byte frames never.
  EXPECT_EQ(TbfFor(100'000'000, 65535).limit_bytes, 16u * (65535 + 18));
  EXPECT_EQ(TbfFor(1'000'000'000, 65535).limit_bytes, 2'500'000u);  // 20 ms
  EXPECT_EQ(TbfFor(100'000'000, 9000).limit_bytes, 250'000u);       // 20 ms
  EXPECT_EQ(TbfFor(10'000'000, 9000).limit_bytes, 16u * (9000 + 18));
  EXPECT_EQ(TbfFor(100'000'000, 1500).limit_bytes, 250'000u);
  EXPECT_EQ(TbfFor(1'000'000, 1500).limit_bytes, 64u * 1024);
}

TEST(Tags, NameTheRunAndItsOwner) {
  EXPECT_EQ(TagOf("frg-123-0-h2"), "frg-123-0");
  EXPECT_EQ(TagOf("frg-123-4-c"), "frg-123-4");
  EXPECT_EQ(TagOf("frg-123-4"), "frg-123-4");
  EXPECT_EQ(PidOfTag("frg-123-4"), 123);
  for (const char* other :
       {"", "frg-", "frg-x-0-h1", "frg-1-y", "netns-1-0", "frg-12345678901-0"}) {
    EXPECT_EQ(TagOf(other), "") << other;
  }
  EXPECT_EQ(NamespacePath("frg-1-0-c"), "/run/netns/frg-1-0-c");
}

TEST(BuildMpirunCommand, BindsToTheEmulatedSubnetAndEndsWithTheCommand) {
  EmulatedJob job;
  job.np = 4;
  job.command = {"/bin/frugal", "train", "--np", "4"};
  job.mpirun_options = {"-x", "FRUGAL_SEED"};
  std::vector<std::string> cmd =
      BuildMpirunCommand(job, "/run/x/hostfile", "/run/x/agent.sh", {2, 2});
  const std::string line = ShellQuote(cmd);
  EXPECT_THAT(line, ::testing::StartsWith("mpirun --hostfile /run/x/hostfile -np 4 --map-by "
                                          "ppr:2:node --bind-to none --mca plm_rsh_agent "
                                          "/run/x/agent.sh"));
  EXPECT_THAT(line, HasSubstr("--mca btl_tcp_if_include 10.213.0.0/24"));
  EXPECT_THAT(line, HasSubstr("--mca oob_tcp_if_include 10.213.0.0/24"));
  EXPECT_THAT(line, ::testing::EndsWith("-x FRUGAL_SEED /bin/frugal train --np 4"));
  // Hosts with different numbers of ranks: the hostfile's slots, filled in host order.
  job.np = 5;
  EXPECT_THAT(ShellQuote(BuildMpirunCommand(job, "/h", "/a", {2, 2, 1})),
              ::testing::StartsWith("mpirun --hostfile /h -np 5 --map-by slot --bind-to none"));
}

}  // namespace
}  // namespace frugal::apps
