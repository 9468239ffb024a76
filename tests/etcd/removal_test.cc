// planMemberRemoval and the URL helpers: tables of cluster states, no I/O.
#include "etcd/removal.h"

#include <gtest/gtest.h>

#include <random>

namespace ekco::etcd {
namespace {

Member member(std::uint64_t id, const std::string& name, const std::string& peer,
              bool learner = false) {
  Member m;
  m.id = id;
  m.name = name;
  m.peer_urls = {peer};
  m.client_urls = {peer.substr(0, peer.rfind(':')) + ":2379"};
  m.learner = learner;
  return m;
}

std::vector<Member> three() {
  return {member(0xa1, "node-a", "https://10.0.0.1:2380"),
          member(0xb2, "node-b", "https://10.0.0.2:2380"),
          member(0xc3, "node-c", "https://10.0.0.3:2380")};
}

TEST(MemberTest, FormatsIdsAsEtcdctlDoes) {
  EXPECT_EQ(formatMemberId(13144645163086586166ULL), "b66b2921ec552136");
  EXPECT_EQ(formatMemberId(0), "0");
  Member m;
  m.id = 0x8e9e05c52164694dULL;
  EXPECT_EQ(describeMember(m), "8e9e05c52164694d");
  m.name = "node-a";
  EXPECT_EQ(describeMember(m), "node-a (8e9e05c52164694d)");
}

TEST(MemberTest, ParsesUrls) {
  auto p = parseUrl("https://10.0.0.1:2380");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->scheme, "https");
  EXPECT_EQ(p->host, "10.0.0.1");
  EXPECT_EQ(p->port, 2380);
  p = parseUrl("HTTPS://[fd00::1]:2380/some/path");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->scheme, "https");
  EXPECT_EQ(p->host, "fd00::1");
  EXPECT_EQ(p->port, 2380);
  p = parseUrl("https://etcd-a");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->port, 443);
  p = parseUrl("http://[::1]");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->host, "::1");
  EXPECT_EQ(p->port, 80);
  for (const char* bad :
       {"", "10.0.0.1:2380", "https://", "https://:2380", "https://a:", "https://a:x",
        "https://a:70000", "https://[fd00::1", "unix://x", "https://[::1]x"}) {
    EXPECT_FALSE(parseUrl(bad)) << bad;
  }
}

TEST(MemberTest, ComparesHostsAsAddresses) {
  EXPECT_TRUE(sameHost("10.0.0.1", "10.0.0.1"));
  EXPECT_FALSE(sameHost("10.0.0.1", "10.0.0.11"));
  EXPECT_TRUE(sameHost("fd00::1", "FD00:0:0::1"));
  EXPECT_TRUE(sameHost("[fd00::1]", "fd00::1"));
  EXPECT_FALSE(sameHost("fd00::1", "fd00::2"));
  EXPECT_TRUE(sameHost("Etcd-A", "etcd-a"));
  EXPECT_EQ(urlFor("10.0.0.1", 2379), "https://10.0.0.1:2379");
  EXPECT_EQ(urlFor("fd00::1", 2380), "https://[fd00::1]:2380");
  EXPECT_EQ(urlFor("[fd00::1]", 2380), "https://[fd00::1]:2380");
}

TEST(PlanTest, DeadMemberOfThreeIsRemovable) {
  const auto plan =
      planMemberRemoval(three(), "10.0.0.3", {{0xa1, true}, {0xb2, true}, {0xc3, false}});
  ASSERT_TRUE(plan.member);
  EXPECT_EQ(plan.member->id, 0xc3u);
  EXPECT_TRUE(plan.safe) << plan.reason;
  EXPECT_EQ(plan.voting_members, 2);
  EXPECT_EQ(plan.healthy_remaining, 2);
  EXPECT_EQ(plan.quorum, 2);
  EXPECT_EQ(plan.reason,
            "etcd member node-c (c3) at https://10.0.0.3:2380 (voting member) is not healthy; 2 "
            "of the 2 remaining voting members are healthy (quorum 2)");
}

TEST(PlanTest, ThreeToTwoNeedsBothRemainingHealthy) {
  const auto plan =
      planMemberRemoval(three(), "10.0.0.3", {{0xa1, true}, {0xb2, false}, {0xc3, false}});
  ASSERT_TRUE(plan.member);
  EXPECT_FALSE(plan.safe);
  EXPECT_EQ(plan.voting_members, 2);
  EXPECT_EQ(plan.healthy_remaining, 1);
  EXPECT_EQ(plan.quorum, 2);
  EXPECT_EQ(plan.reason,
            "etcd member node-c (c3) at https://10.0.0.3:2380 is not healthy, but after removing "
            "it only 1 of the 2 remaining voting members would be healthy, fewer than their "
            "quorum of 2");
}

TEST(PlanTest, TwoToOne) {
  std::vector<Member> two = {three()[0], three()[1]};
  auto plan = planMemberRemoval(two, "10.0.0.2", {{0xa1, true}, {0xb2, false}});
  EXPECT_TRUE(plan.safe) << plan.reason;
  EXPECT_EQ(plan.voting_members, 1);
  EXPECT_EQ(plan.healthy_remaining, 1);
  EXPECT_EQ(plan.quorum, 1);
  plan = planMemberRemoval(two, "10.0.0.2", {{0xa1, false}, {0xb2, false}});
  EXPECT_FALSE(plan.safe);
  EXPECT_EQ(plan.healthy_remaining, 0);
}

TEST(PlanTest, LastMemberIsNeverRemoved) {
  std::vector<Member> one = {three()[0]};
  const auto plan = planMemberRemoval(one, "10.0.0.1", {{0xa1, false}});
  ASSERT_TRUE(plan.member);
  EXPECT_FALSE(plan.safe);
  EXPECT_EQ(plan.voting_members, 0);
  EXPECT_NE(plan.reason.find("only voting member"), std::string::npos) << plan.reason;
}

TEST(PlanTest, FiveWithTwoUnhealthy) {
  std::vector<Member> five = three();
  five.push_back(member(0xd4, "node-d", "https://10.0.0.4:2380"));
  five.push_back(member(0xe5, "node-e", "https://10.0.0.5:2380"));
  std::map<std::uint64_t, bool> health = {
      {0xa1, true}, {0xb2, true}, {0xc3, true}, {0xd4, false}, {0xe5, false}};
  auto plan = planMemberRemoval(five, "10.0.0.5", health);
  EXPECT_TRUE(plan.safe) << plan.reason;
  EXPECT_EQ(plan.voting_members, 4);
  EXPECT_EQ(plan.healthy_remaining, 3);
  EXPECT_EQ(plan.quorum, 3);
  // Then the second dead one: 4 → 3 with 3 healthy.
  five.pop_back();
  plan = planMemberRemoval(five, "10.0.0.4", health);
  EXPECT_TRUE(plan.safe) << plan.reason;
  EXPECT_EQ(plan.quorum, 2);
  // Five with three unhealthy: the cluster has no quorum to spare.
  five.push_back(member(0xe5, "node-e", "https://10.0.0.5:2380"));
  health[0xc3] = false;
  plan = planMemberRemoval(five, "10.0.0.5", health);
  EXPECT_FALSE(plan.safe);
  EXPECT_EQ(plan.healthy_remaining, 2);
  EXPECT_EQ(plan.quorum, 3);
}

TEST(PlanTest, HealthyTargetIsRefused) {
  const auto plan =
      planMemberRemoval(three(), "10.0.0.2", {{0xa1, true}, {0xb2, true}, {0xc3, true}});
  ASSERT_TRUE(plan.member);
  EXPECT_EQ(plan.member->name, "node-b");
  EXPECT_FALSE(plan.safe);
  EXPECT_EQ(plan.reason,
            "etcd member node-b (b2) at https://10.0.0.2:2380 is healthy: a live member is never "
            "removed automatically");
}

TEST(PlanTest, UnknownTargetHealthIsRefusedAndUnknownOthersCountAsUnhealthy) {
  auto plan = planMemberRemoval(three(), "10.0.0.3", {{0xa1, true}, {0xb2, true}});
  EXPECT_FALSE(plan.safe);
  EXPECT_NE(plan.reason.find("health is unknown"), std::string::npos) << plan.reason;
  plan = planMemberRemoval(three(), "10.0.0.3", {{0xa1, true}, {0xc3, false}});
  EXPECT_FALSE(plan.safe);
  EXPECT_EQ(plan.healthy_remaining, 1);
}

TEST(PlanTest, NoMatch) {
  for (const char* ip : {"10.0.0.4", "10.0.0.30", "10.0.0"}) {
    const auto plan = planMemberRemoval(three(), ip, {});
    EXPECT_FALSE(plan.member) << ip;
    EXPECT_FALSE(plan.safe);
    EXPECT_EQ(plan.reason.rfind("no etcd member has peer URL https://", 0), 0u) << plan.reason;
  }
  // Same host, another port: not kubeadm's peer URL.
  std::vector<Member> members = {member(1, "a", "https://10.0.0.1:12380")};
  const auto plan = planMemberRemoval(members, "10.0.0.1", {{1, false}});
  EXPECT_FALSE(plan.member);
  EXPECT_EQ(plan.reason, "no etcd member has peer URL https://10.0.0.1:2380 (1 members: a (1))");
}

// Found by tests/fuzz/etcd_fuzz.cc: a member name (etcd's) and the node's address (its Node
// object's) went raw into the reason, which logs and Events show as one line.
TEST(PlanTest, TheReasonIsOneLineWhateverTheNamesAndAddressHold) {
  std::vector<Member> members = {member(1, "a\nb", "https://10.0.0.1:2380"),
                                 member(2, "c\x1b[2J", "https://10.0.0.2:2380")};
  auto plan = planMemberRemoval(members, "10.0.0.9\r\x7f", {});
  EXPECT_EQ(plan.reason,
            "no etcd member has peer URL https://10.0.0.9\\r\\x7f:2380 (2 members: a\\nb (1), "
            "c\\x1b[2J (2))");
  plan = planMemberRemoval(members, "10.0.0.1", {{1, false}, {2, true}});
  EXPECT_TRUE(plan.safe);
  EXPECT_EQ(
      plan.reason,
      "etcd member a\\nb (1) at https://10.0.0.1:2380 (voting member) is not healthy; 1 of the "
      "1 remaining voting members are healthy (quorum 1)");
}

TEST(PlanTest, TwoMatchesAreRefused) {
  auto members = three();
  members.push_back(member(0xd4, "", "https://10.0.0.3:2380"));  // added, never started
  const auto plan = planMemberRemoval(members, "10.0.0.3", {{0xc3, false}, {0xd4, false}});
  EXPECT_FALSE(plan.member);
  EXPECT_FALSE(plan.safe);
  EXPECT_EQ(plan.reason,
            "2 etcd members have peer URL https://10.0.0.3:2380 (node-c (c3), d4): refusing to "
            "choose");
}

TEST(PlanTest, MatchesIpv6AndAnyPeerUrl) {
  std::vector<Member> members = {member(1, "a", "https://[fd00::1]:2380"),
                                 member(2, "b", "https://[fd00::2]:2380"),
                                 member(3, "c", "https://[fd00::3]:2380")};
  members[2].peer_urls.insert(members[2].peer_urls.begin(), "https://10.0.0.3:2380");
  for (const char* ip : {"fd00::3", "[fd00::3]", "FD00:0::3", "10.0.0.3"}) {
    const auto plan = planMemberRemoval(members, ip, {{1, true}, {2, true}, {3, false}});
    ASSERT_TRUE(plan.member) << ip << ": " << plan.reason;
    EXPECT_EQ(plan.member->id, 3u);
    EXPECT_TRUE(plan.safe) << plan.reason;
  }
  const auto plan = planMemberRemoval(members, "fd00::30", {});
  EXPECT_FALSE(plan.member);
  EXPECT_NE(plan.reason.find("https://[fd00::30]:2380"), std::string::npos) << plan.reason;
}

TEST(PlanTest, LearnersDoNotVote) {
  auto members = three();
  members.push_back(member(0xd4, "node-d", "https://10.0.0.4:2380", /*learner=*/true));
  // Removing a dead voter: the learner's health does not help the quorum.
  auto plan = planMemberRemoval(members, "10.0.0.3",
                                {{0xa1, true}, {0xb2, false}, {0xc3, false}, {0xd4, true}});
  EXPECT_FALSE(plan.safe);
  EXPECT_EQ(plan.voting_members, 2);
  EXPECT_EQ(plan.healthy_remaining, 1);
  // Removing a dead learner leaves the three voters.
  plan = planMemberRemoval(members, "10.0.0.4",
                           {{0xa1, true}, {0xb2, true}, {0xc3, false}, {0xd4, false}});
  EXPECT_TRUE(plan.safe) << plan.reason;
  EXPECT_EQ(plan.voting_members, 3);
  EXPECT_EQ(plan.healthy_remaining, 2);
  EXPECT_EQ(plan.quorum, 2);
  EXPECT_NE(plan.reason.find("(learner)"), std::string::npos) << plan.reason;
  // A healthy learner is live too.
  plan = planMemberRemoval(members, "10.0.0.4", {{0xa1, true}, {0xb2, true}, {0xd4, true}});
  EXPECT_FALSE(plan.safe);
}

// Randomized states: a safe plan always names an unhealthy member and leaves a healthy quorum.
TEST(PlanTest, RandomStatesNeverUnsafe) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 7);
    std::vector<Member> members;
    std::map<std::uint64_t, bool> health;
    for (int i = 0; i < n; ++i) {
      const int host = 1 + static_cast<int>(rng() % 6);  // duplicates happen
      members.push_back(member(static_cast<std::uint64_t>(i + 1), "m" + std::to_string(i),
                               "https://10.0.0." + std::to_string(host) + ":2380", rng() % 5 == 0));
      if (rng() % 6 != 0) health[static_cast<std::uint64_t>(i + 1)] = rng() % 2 == 0;
    }
    const std::string ip = "10.0.0." + std::to_string(1 + rng() % 6);
    const auto plan = planMemberRemoval(members, ip, health);
    if (!plan.safe) continue;
    ASSERT_TRUE(plan.member);
    ASSERT_TRUE(health.count(plan.member->id));
    EXPECT_FALSE(health.at(plan.member->id));
    int voters = 0, healthy_voters = 0, matches = 0;
    for (const auto& m : members) {
      if (m.peer_urls[0] == "https://" + ip + ":2380") ++matches;
      if (m.learner || m.id == plan.member->id) continue;
      ++voters;
      if (health.count(m.id) && health.at(m.id)) ++healthy_voters;
    }
    EXPECT_EQ(matches, 1);
    EXPECT_GE(voters, 1);
    EXPECT_GE(healthy_voters, voters / 2 + 1);
  }
}

}  // namespace
}  // namespace ekco::etcd
