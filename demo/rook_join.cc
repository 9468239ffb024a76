#include "demo/rook_join.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "tests/rook/kurl_rook_objects.h"

namespace ekco::demo {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

// The Rook custom resource's spec (null when it is missing).
json rookSpec(kubesim::Server& api, const std::string& plural, const std::string& name) {
  auto o = api.get(plural + ".ceph.rook.io", "rook-ceph", name);
  return o ? (*o).value("spec", json()) : json();
}

std::vector<std::string> storageNodes(kubesim::Server& api) {
  std::vector<std::string> out;
  for (const json& n :
       rookSpec(api, "cephclusters", "rook-ceph")["storage"].value("nodes", json::array())) {
    out.push_back(n.value("name", ""));
  }
  return out;
}

struct RookState {
  int pool = 0;  // CephBlockPool replicapool
  int fs = 0;    // CephFilesystem rook-shared-fs metadata pool
  int mons = 0;
  int mgrs = 0;
  std::int64_t builtin = -1;  // device_health_metrics, Ceph 16's built-in pool (-1: none yet)
  bool operator==(const RookState&) const = default;
  std::string text() const {
    return fmt::format(
        "CephBlockPool replicapool size {}, CephFilesystem rook-shared-fs size {}, mons {}, "
        "mgrs {}, device_health_metrics size {} (`ceph osd pool get`)",
        pool, fs, mons, mgrs, builtin);
  }
};

RookState rookState(kubesim::Server& api, testing::CephFixture& ceph) {
  const json cluster = rookSpec(api, "cephclusters", "rook-ceph");
  RookState s;
  s.pool = rookSpec(api, "cephblockpools", "replicapool")["replicated"].value("size", 0);
  s.fs = rookSpec(api, "cephfilesystems", "rook-shared-fs")["metadataPool"]["replicated"].value(
      "size", 0);
  s.mons = cluster["mon"].value("count", 0);
  s.mgrs = cluster["mgr"].value("count", 0);
  auto out = ceph.ceph({"osd", "pool", "get", "device_health_metrics", "size", "-f", "json"});
  s.builtin = out ? json::parse(*out, nullptr, false).value("size", -1) : -1;
  return s;
}

double secondsSince(Steady::time_point t) {
  return std::chrono::duration<double>(Steady::now() - t).count();
}

}  // namespace

std::shared_ptr<testing::CephFixture> startRookCeph(
    const std::string& dir, const std::vector<std::pair<int, std::string>>& osds,
    const std::function<void(const std::string&)>& say) {
  if (!testing::CephFixture::available()) {
    say("Ceph is not installed (scripts/setup installs it): running without Rook/Ceph");
    return nullptr;
  }
  auto started = testing::CephFixture::start(dir);
  if (!started) bench::fail("ceph: " + started.error().message());
  std::shared_ptr<testing::CephFixture> ceph = std::move(*started);
  std::string listed;
  for (const auto& [id, host] : osds) {
    if (auto added = ceph->addOsd(id, host); !added)
      bench::fail("ceph: " + added.error().message());
    listed += fmt::format("{}osd.{} on {}", listed.empty() ? "" : ", ", id, host);
  }
  if (auto up = ceph->waitForUpOsds(static_cast<int>(osds.size()), seconds(60)); !up) {
    bench::fail("ceph: " + up.error().message());
  }
  say("Ceph 16: 1 mon, 1 mgr and memstore OSDs " + listed +
      " (real daemons on 127.0.0.1; Rook's `rook-ceph-tools` pod runs the real `ceph` CLI)");
  return ceph;
}

std::vector<json> rookObjects(const std::vector<std::string>& storage_nodes,
                              const std::filesystem::path& source) {
  std::vector<json> objects = rook_testing::kurlRookObjects(
      {.storage_nodes = storage_nodes, .pool_size = 2, .mons = 1, .mgrs = 2});
  auto rbac = kubesim::loadManifestDir((source / "deploy-rook-ceph").string());
  if (!rbac) bench::fail(rbac.error().message());
  objects.insert(objects.end(), rbac->begin(), rbac->end());
  return objects;
}

void runRookJoin(const RookJoin& r) {
  // The leader sized everything for the two hosts with an OSD as soon as it led.
  const RookState two = {.pool = 2, .fs = 2, .mons = 1, .mgrs = 2, .builtin = 2};
  bench::eventually([&] { return rookState(r.api, r.ceph) == two; }, seconds(20));
  r.say(fmt::format("storage nodes: {}; {}", fmt::join(storageNodes(r.api), " "),
                    rookState(r.api, r.ceph).text()));

  const auto joined_at = Steady::now();
  r.join();
  r.say(fmt::format("kubeadm join: Node {} ({}) is Ready and its ekco agent started", r.node,
                    r.node_ip));
  auto has_joining = [&] {
    const auto nodes = storageNodes(r.api);
    return std::find(nodes.begin(), nodes.end(), r.node) != nodes.end();
  };
  if (!bench::eventually(has_joining, seconds(20))) {
    r.problem("the leader did not add " + r.node + " to CephCluster rook-ceph spec.storage.nodes");
    return;
  }
  r.say(fmt::format(
      "the leader appended {} to CephCluster rook-ceph spec.storage.nodes {:.1f} s after it "
      "joined: {}",
      r.node, secondsSince(joined_at), fmt::join(storageNodes(r.api), " ")));

  // What Rook's operator does with a new storage node: prepare its disk and start an OSD.
  if (auto added = r.ceph.addOsd(r.osd, r.node); !added) {
    r.problem("ceph: " + added.error().message());
    return;
  }
  if (auto up = r.ceph.waitForUpOsds(3, seconds(60)); !up) {
    r.problem("ceph: " + up.error().message());
    return;
  }
  const auto osd_up = Steady::now();
  r.say(fmt::format(
      "Rook (played by the demo) started osd.{} on {}: `ceph osd tree` now has 3 hosts with an "
      "up OSD",
      r.osd, r.node));
  const RookState three = {.pool = 3, .fs = 3, .mons = 3, .mgrs = 2, .builtin = 3};
  RookState last = rookState(r.api, r.ceph);
  const auto deadline = Steady::now() + seconds(20);
  while (last != three && Steady::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
    RookState now = rookState(r.api, r.ceph);
    if (now != last) {
      r.say(fmt::format("{:.1f} s after osd.{} came up: {}", secondsSince(osd_up), r.osd,
                        now.text()));
      last = now;
    }
  }
  if (last != three) r.problem("Rook/Ceph not raised for 3 hosts: " + last.text());
}

}  // namespace ekco::demo
