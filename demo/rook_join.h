// The demo's Rook/Ceph section: a node joins a cluster whose Rook storage runs on a real Ceph
// (tests/ceph), and the demo narrates what the leader's rook-ceph controller does about it.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tests/ceph/ceph_fixture.h"
#include "tests/kubesim/server/server.h"

namespace ekco::demo {

struct RookJoin {
  kubesim::Server& api;
  testing::CephFixture& ceph;
  std::string node;  // the joining node's name
  std::string node_ip;
  int osd = 0;  // the OSD Rook (played by the demo) starts on it
  std::function<void(const std::string&)> say;
  std::function<void(const std::string&)> problem;
  // Makes the node join: its Node Ready, its agent started.
  std::function<void()> join;
};

// A real Ceph (tests/ceph) in `dir` with an up OSD per (id, CRUSH host), said; null (and said)
// when Ceph is not installed. Any other failure ends the demo (bench::fail).
std::shared_ptr<testing::CephFixture> startRookCeph(
    const std::string& dir, const std::vector<std::pair<int, std::string>>& osds,
    const std::function<void(const std::string&)>& say);

// kURL's Rook add-on on `storage_nodes`, sized for two hosts with an OSD (pools of size 2, 1 mon,
// 2 mgrs), and ekco's RBAC for maintaining it (`source`/deploy-rook-ceph); the demo ends on an
// unreadable manifest.
std::vector<nlohmann::json> rookObjects(const std::vector<std::string>& storage_nodes,
                                        const std::filesystem::path& source);

// Waits for the two-host layout, joins the node, waits until the leader added it to the
// CephCluster's storage nodes, starts its OSD, and follows the pools, mons and the built-in pool
// as they are raised for three hosts; each step said, each miss a problem.
void runRookJoin(const RookJoin& r);

}  // namespace ekco::demo
