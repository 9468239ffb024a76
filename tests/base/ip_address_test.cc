#include "base/ip_address.h"

#include <gtest/gtest.h>

namespace ekco::base {
namespace {

IpAddress ip(std::string_view text) {
  auto parsed = parseIpAddress(text);
  EXPECT_TRUE(parsed) << text;
  return parsed.value_or(IpAddress{});
}

TEST(IpAddress, ParsesExactlyAnAddressAndShowsItCanonically) {
  EXPECT_EQ(ip("10.0.0.1").text(), "10.0.0.1");
  EXPECT_EQ(ip("fd00::0001").text(), "fd00::1");
  EXPECT_EQ(ip("FD00:0:0::1"), ip("fd00::1"));
  for (std::string_view bad : {"", "10.0.0", "10.0.0.1/32", "[fd00::1]", "fd00::1%eth0",
                               "10.0.0.1:6443", "node-a", " 10.0.0.1"}) {
    EXPECT_FALSE(parseIpAddress(bad)) << bad;
  }
}

TEST(IpAddress, AnIpv4MappedAddressUnmapsToItsIpv4Address) {
  EXPECT_TRUE(ip("::ffff:10.96.0.1").isV4Mapped());
  EXPECT_EQ(ip("::ffff:10.96.0.1").unmapped(), ip("10.96.0.1"));
  EXPECT_FALSE(ip("::10.96.0.1").isV4Mapped());
  EXPECT_FALSE(ip("10.96.0.1").isV4Mapped());
  EXPECT_EQ(ip("fd00::1").unmapped(), ip("fd00::1"));
}

TEST(IpPrefix, ContainsTheAddressesOfItsFamilyWithinItsLength) {
  auto p = parseIpPrefix("10.0.0.0/8");
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_TRUE(p->contains(ip("10.255.1.2")));
  EXPECT_FALSE(p->contains(ip("11.0.0.1")));
  EXPECT_FALSE(p->contains(ip("::ffff:10.0.0.1")));  // another family
  auto odd = parseIpPrefix("192.168.4.0/22");
  ASSERT_TRUE(odd);
  EXPECT_TRUE(odd->contains(ip("192.168.7.255")));
  EXPECT_FALSE(odd->contains(ip("192.168.8.0")));
  auto v6 = parseIpPrefix("fd00:10:96::/112");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(v6->contains(ip("fd00:10:96::ffff")));
  EXPECT_FALSE(v6->contains(ip("fd00:10:97::1")));
  auto all = parseIpPrefix("0.0.0.0/0");
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->contains(ip("203.0.113.9")));
  EXPECT_FALSE(all->contains(ip("fd00::1")));
}

TEST(IpPrefix, KnowsItsNetworkHostBitsAndNthAddress) {
  auto p = parseIpPrefix("10.96.0.0/12");
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->hasHostBits());
  EXPECT_EQ(p->nth(1).text(), "10.96.0.1");
  auto sloppy = parseIpPrefix("10.100.3.4/12");
  ASSERT_TRUE(sloppy);
  EXPECT_TRUE(sloppy->hasHostBits());
  EXPECT_EQ(sloppy->network().text(), "10.96.0.0");
  EXPECT_EQ(sloppy->nth(1).text(), "10.96.0.1");
  auto v6 = parseIpPrefix("fd00:10:96::/112");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->nth(1).text(), "fd00:10:96::1");
  auto carry = parseIpPrefix("10.0.0.255/32");
  ASSERT_TRUE(carry);
  EXPECT_EQ(carry->nth(1).text(), "10.0.1.0");
}

TEST(IpPrefix, RejectsAnythingButAddressSlashLengthInOneLine) {
  for (std::string_view bad : {"10.0.0.1", "10.0.0.0/", "10.0.0.0/33", "fd00::/129", "x/8",
                               "10.0.0.0/8/8", "10.0.0.0/-1", "10.0.0.0/ 8", "10.0.0.0/0008"}) {
    auto p = parseIpPrefix(bad);
    EXPECT_FALSE(p) << bad;
    if (!p) {
      EXPECT_EQ(p.error().message().find('\n'), std::string::npos);
    }
  }
  auto p = parseIpPrefix("10.0.0.0/33");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message(),
            "the prefix length in \"10.0.0.0/33\" is not a number from 0 to 32");
}

}  // namespace
}  // namespace ekco::base
