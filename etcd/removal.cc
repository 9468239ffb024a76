#include "etcd/removal.h"

#include <fmt/format.h>

#include "base/strings.h"

namespace ekco::etcd {

namespace {

bool peerUrlMatches(const std::string& url, const std::string& node_ip) {
  const auto parts = parseUrl(url);
  return parts && parts->port == kPeerPort && sameHost(parts->host, node_ip);
}

std::string joinDescriptions(const std::vector<Member>& members) {
  std::string out;
  for (const auto& m : members) {
    if (!out.empty()) out += ", ";
    out += describeMember(m);
  }
  return out;
}

}  // namespace

RemovalPlan planMemberRemoval(const std::vector<Member>& members, const std::string& node_ip,
                              const std::map<std::uint64_t, bool>& healthy) {
  RemovalPlan plan;
  // For the reason only, escaped: the node's address comes from its Node object and the reason
  // goes to logs and Events on one line.
  const std::string peer_url = base::escapeForMessage(urlFor(node_ip, kPeerPort));

  std::vector<Member> matches;
  for (const auto& m : members) {
    for (const auto& url : m.peer_urls) {
      if (peerUrlMatches(url, node_ip)) {
        matches.push_back(m);
        break;
      }
    }
  }
  if (matches.empty()) {
    plan.reason = fmt::format("no etcd member has peer URL {} ({} members: {})", peer_url,
                              members.size(), joinDescriptions(members));
    return plan;
  }
  if (matches.size() > 1) {
    plan.reason = fmt::format("{} etcd members have peer URL {} ({}): refusing to choose",
                              matches.size(), peer_url, joinDescriptions(matches));
    return plan;
  }
  const Member& target = matches.front();
  plan.member = target;
  const std::string who = "etcd member " + describeMember(target) + " at " + peer_url;

  for (const auto& m : members) {
    if (m.learner || m.id == target.id) continue;
    ++plan.voting_members;
    const auto it = healthy.find(m.id);
    if (it != healthy.end() && it->second) ++plan.healthy_remaining;
  }
  plan.quorum = plan.voting_members / 2 + 1;

  const auto target_health = healthy.find(target.id);
  if (target_health == healthy.end()) {
    plan.reason = who + ": its health is unknown; a live member is never removed automatically";
    return plan;
  }
  if (target_health->second) {
    plan.reason = who + " is healthy: a live member is never removed automatically";
    return plan;
  }
  if (plan.voting_members == 0) {
    plan.reason = who + " is the only voting member: removing it would leave no cluster";
    return plan;
  }
  const std::string kind = target.learner ? "learner" : "voting member";
  if (plan.healthy_remaining < plan.quorum) {
    plan.reason = fmt::format(
        "{} is not healthy, but after removing it only {} of the {} remaining voting members "
        "would be healthy, fewer than their quorum of {}",
        who, plan.healthy_remaining, plan.voting_members, plan.quorum);
    return plan;
  }
  plan.safe = true;
  plan.reason = fmt::format(
      "{} ({}) is not healthy; {} of the {} remaining voting members are healthy (quorum {})", who,
      kind, plan.healthy_remaining, plan.voting_members, plan.quorum);
  return plan;
}

}  // namespace ekco::etcd
