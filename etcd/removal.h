// The pure decision behind removing a dead node's etcd member: which member belongs to the
// node, and whether removing it is safe. No I/O; the purge controller gathers the member list
// and each member's health (EtcdClient) and acts on the plan.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "etcd/member.h"

namespace ekco::etcd {

// kubeadm's etcd peer port: a node's member advertises https://<node-ip>:2380.
inline constexpr int kPeerPort = 2380;
// kubeadm's etcd client port.
inline constexpr int kClientPort = 2379;

struct RemovalPlan {
  // The node's member, when exactly one member's peer URL names the node's IP and port 2380.
  std::optional<Member> member{};
  // One line for logs, `ekco purge-node --dry-run` and Events: why it is safe or not.
  std::string reason{};
  // Remove the member. Never true without `member`.
  bool safe = false;
  // The voting members (learners excluded) that remain after the removal, how many of them are
  // healthy, and the quorum of that remaining cluster (voting_members / 2 + 1).
  int voting_members = 0;
  int healthy_remaining = 0;
  int quorum = 0;
};

// Which member to remove for the node at `node_ip` ("10.0.0.3", "fd00::3" or "[fd00::3]") and
// whether that is safe. `healthy` maps member IDs to EtcdClient::memberHealthy's answer.
//
// The member is the one with a peer URL whose host is node_ip (IP spelling normalized) and port
// 2380; none or several is no plan (member unset). It is safe only when
//   - it is known to be unhealthy: a healthy member, or one missing from `healthy`, is refused
//     (a live member is never removed automatically);
//   - it is not the last voting member;
//   - the healthy voting members that remain are at least a quorum of the remaining voting
//     members (the rule of etcd's own strict reconfiguration check): 3→2 needs 2 healthy, 2→1
//     needs 1, 5→4 needs 3. Members missing from `healthy` count as unhealthy; learners neither
//     vote nor count.
RemovalPlan planMemberRemoval(const std::vector<Member>& members, const std::string& node_ip,
                              const std::map<std::uint64_t, bool>& healthy);

}  // namespace ekco::etcd
