// Purge step 1 (Rook) on real Ceph output: ekco-kubesim's rook-ceph-tools pod runs the real
// `ceph` CLI against the Ceph fixture (tests/ceph), so `ceph osd down/purge` and `ceph osd crush
// rm` act on a real cluster whose dead host carries two OSDs with ids above 9 (EKCO's pattern
// matched one digit).
#include <gmock/gmock.h>

#include <gtest/gtest.h>
#include <algorithm>

#include "base/clock.h"
#include "base/os/process.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "rook/purge_node.h"
#include "tests/agent/cli_support.h"
#include "tests/ceph/ceph_fixture.h"

namespace ekco::rook {
namespace {

using nlohmann::json;

json osdDeployment(const std::string& id, const std::string& host) {
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata",
           {{"name", "rook-ceph-osd-" + id},
            {"namespace", "rook-ceph"},
            {"labels", {{"app", "rook-ceph-osd"}, {"ceph-osd-id", id}}}}},
          {"spec",
           {{"replicas", 1},
            {"selector", {{"matchLabels", {{"app", "rook-ceph-osd"}}}}},
            {"template",
             {{"metadata", {{"labels", {{"app", "rook-ceph-osd"}}}}},
              {"spec",
               {{"nodeSelector", {{"kubernetes.io/hostname", host}}},
                {"containers", {{{"name", "osd"}, {"image", "ceph"}}}}}}}}}}};
}

json objects(const std::string& kind, const json& metadata, const json& rest) {
  json o = rest;
  o["kind"] = kind;
  o["metadata"] = metadata;
  return o;
}

// OSD name -> status, host -> its children, from real `ceph osd tree -f json`.
std::map<std::string, std::string> tree(const testing::CephFixture& ceph) {
  std::map<std::string, std::string> out;
  auto text = ceph.ceph({"osd", "tree", "-f", "json"});
  EXPECT_TRUE(text) << text.error().message();
  if (!text) return out;
  const json parsed = json::parse(*text);
  for (const json& n : parsed["nodes"]) {
    if (n["type"] == "osd") out[n["name"]] = n["status"];
    if (n["type"] == "host") {
      std::vector<int> children = n["children"];
      std::sort(children.begin(), children.end());
      out[n["name"]] = json(children).dump();
    }
  }
  return out;
}

TEST(PurgeRookOnRealCeph, RemovesEveryOsdAboveNineAndTheHostBucket) {
  if (!testing::CephFixture::available()) GTEST_SKIP() << "Ceph is not installed (scripts/setup)";
  agent::testing::TempDir dir{"ekco-rook-ceph"};
  auto ceph = testing::CephFixture::start(dir.path() + "/ceph");
  ASSERT_TRUE(ceph) << ceph.error().message();
  ASSERT_TRUE((*ceph)->addOsd(0, "node-1"));
  ASSERT_TRUE((*ceph)->addOsd(11, "node-2"));
  ASSERT_TRUE((*ceph)->addOsd(12, "node-2"));
  ASSERT_TRUE((*ceph)->waitForUpOsds(3, std::chrono::seconds(60)));
  // node-2 dies: its OSDs' daemons are gone and they are down (still in).
  ASSERT_TRUE((*ceph)->stopOsd(11));
  ASSERT_TRUE((*ceph)->stopOsd(12));
  ASSERT_TRUE((*ceph)->waitForUpOsds(1, std::chrono::seconds(30)));
  EXPECT_EQ(tree(**ceph)["node-2"], "[11,12]");

  const json cluster = objects(
      "CephCluster", {{"name", "rook-ceph"}, {"namespace", "rook-ceph"}},
      {{"apiVersion", "ceph.rook.io/v1"},
       {"spec",
        {{"storage",
          {{"useAllNodes", false}, {"nodes", {{{"name", "node-1"}}, {{"name", "node-2"}}}}}}}}});
  const json tools =
      objects("Pod",
              {{"name", "rook-ceph-tools-5f8d"},
               {"namespace", "rook-ceph"},
               {"labels", {{"app", "rook-ceph-tools"}}}},
              {{"apiVersion", "v1"},
               {"spec", {{"containers", {{{"name", "rook-ceph-tools"}, {"image", "ceph"}}}}}},
               {"status", {{"phase", "Running"}}}});
  auto server = kubesim::Server::start(
      {.out_dir = dir.path(),
       .objects = {cluster, tools, osdDeployment("0", "node-1"), osdDeployment("11", "node-2"),
                   osdDeployment("12", "node-2")},
       .exec_script = {(*ceph)->toolsPodExec()}});
  ASSERT_TRUE(server) << server.error().message();
  kube::Connection conn{.server = (*server)->url(),
                        .ca_pem = (*server)->caPem(),
                        .client_cert_pem = (*server)->clientCertPem(),
                        .client_key_pem = (*server)->clientKeyPem()};
  base::SystemClock clock;
  auto transport = kube::CurlTransport::create(conn, nullptr, clock, {});
  ASSERT_TRUE(transport) << transport.error().message();
  kube::RestClient client(**transport, clock, kube::RestClientOptions{});
  kube::WebSocketExecutor exec(conn);

  auto purged = purgeNode(client, exec, "node-2", "node-2");
  ASSERT_TRUE(purged) << purged.error().message();
  auto after = tree(**ceph);
  EXPECT_EQ(after.count("osd.11"), 0u);
  EXPECT_EQ(after.count("osd.12"), 0u);
  EXPECT_EQ(after.count("node-2"), 0u);
  EXPECT_EQ(after["osd.0"], "up");
  EXPECT_EQ(after["node-1"], "[0]");
  EXPECT_FALSE((*server)->get("deployments.apps", "rook-ceph", "rook-ceph-osd-11"));
  EXPECT_FALSE((*server)->get("deployments.apps", "rook-ceph", "rook-ceph-osd-12"));
  EXPECT_TRUE((*server)->get("deployments.apps", "rook-ceph", "rook-ceph-osd-0"));

  // Resumed (a new leader, a crash): every command answers 0 on a cluster where it is done.
  auto again = purgeNode(client, exec, "node-2", "node-2");
  ASSERT_TRUE(again) << again.error().message();
  std::vector<std::string> commands;
  for (const auto& r : (*server)->execLog()) commands.push_back(base::formatArgv(r.command));
  EXPECT_THAT(commands,
              ::testing::ElementsAre("ceph osd down 11", "ceph osd purge 11 --yes-i-really-mean-it",
                                     "ceph osd down 12", "ceph osd purge 12 --yes-i-really-mean-it",
                                     "ceph osd crush rm node-2", "ceph osd crush rm node-2"));
}

}  // namespace
}  // namespace ekco::rook
