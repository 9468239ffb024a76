// Purge step 1 (Rook) against the in-process test API server: the CephCluster entry, every OSD
// Deployment on the host, the ceph commands through pods/exec (kubesim's exec log), resuming,
// dry run.
#include "rook/purge_node.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "tests/agent/cli_support.h"
#include "tests/kubesim/server/server.h"

namespace ekco::rook {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Cmd = std::vector<std::string>;

json osdDeployment(const std::string& name, const std::string& id, const std::string& host) {
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata",
           {{"name", name},
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

json cephCluster() {
  return {{"apiVersion", "ceph.rook.io/v1"},
          {"kind", "CephCluster"},
          {"metadata", {{"name", "rook-ceph"}, {"namespace", "rook-ceph"}}},
          {"spec",
           {{"storage",
             {{"useAllNodes", false},
              {"nodes",
               {{{"name", "node-a"}}, {{"name", "node-b"}, {"devices", {{{"name", "sdb"}}}}}}}}}}}};
}

json toolsPod() {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "rook-ceph-tools-7d9f"},
            {"namespace", "rook-ceph"},
            {"labels", {{"app", "rook-ceph-tools"}}}}},
          {"spec",
           {{"nodeName", "node-a"},
            {"containers", {{{"name", "rook-ceph-tools"}, {"image", "ceph"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

class PurgeRookTest : public ::testing::Test {
 protected:
  void start(std::vector<json> objects, std::vector<kubesim::ExecReply> script = {}) {
    auto server = kubesim::Server::start(
        {.out_dir = dir_.path(), .objects = std::move(objects), .exec_script = std::move(script)});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    kube::Connection conn{.server = server_->url(),
                          .ca_pem = server_->caPem(),
                          .client_cert_pem = server_->clientCertPem(),
                          .client_key_pem = server_->clientKeyPem()};
    auto transport = kube::CurlTransport::create(conn, nullptr, clock_, {});
    ASSERT_TRUE(transport) << transport.error().message();
    transport_ = std::move(*transport);
    client_ = std::make_unique<kube::RestClient>(*transport_, clock_, kube::RestClientOptions{});
    exec_ = std::make_unique<kube::WebSocketExecutor>(conn);
  }
  std::vector<Cmd> commands() {
    std::vector<Cmd> out;
    for (const auto& r : server_->execLog()) {
      EXPECT_EQ(r.pod, "rook-ceph-tools-7d9f");
      out.push_back(r.command);
    }
    return out;
  }
  json storageNodes() {
    return (*server_->get("cephclusters.ceph.rook.io", "rook-ceph",
                          "rook-ceph"))["spec"]["storage"]["nodes"];
  }

  agent::testing::TempDir dir_{"ekco-rook"};
  base::SystemClock clock_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<kube::CurlTransport> transport_;
  std::unique_ptr<kube::RestClient> client_;
  std::unique_ptr<kube::WebSocketExecutor> exec_;
};

TEST(OsdDeploymentsOnHost, EveryOsdOfTheHostWithAnyNumberOfDigits) {
  const json list = {{"items",
                      {osdDeployment("rook-ceph-osd-12", "12", "node-b"),
                       osdDeployment("rook-ceph-osd-3", "3", "node-b"),
                       osdDeployment("rook-ceph-osd-0", "0", "node-a")}}};
  auto got = osdDeploymentsOnHost(list, "node-b");
  ASSERT_TRUE(got);
  EXPECT_EQ(*got,
            (std::vector<OsdDeployment>{{"rook-ceph-osd-12", "12"}, {"rook-ceph-osd-3", "3"}}));
  EXPECT_TRUE(osdDeploymentsOnHost(list, "node-c")->empty());
  auto bad =
      osdDeploymentsOnHost({{"items", {osdDeployment("x", "3; rm -rf /", "node-b")}}}, "node-b");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), base::ErrorCode::kParse);
  EXPECT_THAT(bad.error().message(), HasSubstr("Deployment x"));
}

TEST(StorageNodesPatch, RemovesOnlyThatNodeAndTestsTheOldList) {
  auto patch = storageNodesPatch(cephCluster(), "node-b");
  ASSERT_TRUE(patch);
  EXPECT_EQ((*patch)[0]["op"], "test");
  EXPECT_EQ((*patch)[1]["value"], json::array({{{"name", "node-a"}}}));
  EXPECT_FALSE(storageNodesPatch(cephCluster(), "node-c"));
  json all = cephCluster();
  all["spec"]["storage"]["useAllNodes"] = true;
  EXPECT_FALSE(storageNodesPatch(all, "node-b"));
  EXPECT_FALSE(storageNodesPatch(json::object(), "node-b"));
}

TEST_F(PurgeRookTest, PurgesEveryOsdOfTheHostInAResumableOrder) {
  start({cephCluster(), toolsPod(), osdDeployment("rook-ceph-osd-3", "3", "node-b"),
         osdDeployment("rook-ceph-osd-12", "12", "node-b"),
         osdDeployment("rook-ceph-osd-0", "0", "node-a")});
  auto r = purgeNode(*client_, *exec_, "node-b", "node-b");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(storageNodes(), json::array({{{"name", "node-a"}}}));
  EXPECT_FALSE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-3"));
  EXPECT_FALSE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-12"));
  EXPECT_TRUE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-0"));
  EXPECT_THAT(commands(), ElementsAre(Cmd{"ceph", "osd", "down", "12"},
                                      Cmd{"ceph", "osd", "purge", "12", "--yes-i-really-mean-it"},
                                      Cmd{"ceph", "osd", "down", "3"},
                                      Cmd{"ceph", "osd", "purge", "3", "--yes-i-really-mean-it"},
                                      Cmd{"ceph", "osd", "crush", "rm", "node-b"}));

  // A new leader resuming the purge: nothing is repeated but the host removal (a no-op in ceph).
  auto again = purgeNode(*client_, *exec_, "node-b", "node-b");
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_TRUE(again->osds.empty());
  EXPECT_EQ(commands().size(), 6U);
  EXPECT_EQ(commands().back(), (Cmd{"ceph", "osd", "crush", "rm", "node-b"}));
}

TEST_F(PurgeRookTest, DryRunChangesNothingAndListsThePlan) {
  start({cephCluster(), toolsPod(), osdDeployment("rook-ceph-osd-3", "3", "node-b")});
  auto r = purgeNode(*client_, *exec_, "node-b", "node-b", {.dry_run = true});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(storageNodes().size(), 2U);
  EXPECT_TRUE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-3"));
  EXPECT_TRUE(server_->execLog().empty());
  EXPECT_THAT(
      r->actions,
      ElementsAre("would remove node-b from CephCluster rook-ceph/rook-ceph spec.storage.nodes",
                  "would run `ceph osd down 3`",
                  "would run `ceph osd purge 3 --yes-i-really-mean-it`",
                  "would delete Deployment rook-ceph/rook-ceph-osd-3 (osd.3)",
                  "would run `ceph osd crush rm node-b`"));
}

TEST_F(PurgeRookTest, AFailedPurgeStopsBeforeTheDeploymentIsDeleted) {
  start({cephCluster(), toolsPod(), osdDeployment("rook-ceph-osd-3", "3", "node-b")},
        {{.command_prefix = {"ceph", "osd", "purge"},
          .stderr_data = "Error EBUSY: osd.3 is up\n",
          .exit_code = 16}});
  auto r = purgeNode(*client_, *exec_, "node-b", "node-b");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("`ceph osd purge 3 --yes-i-really-mean-it` in "
                                             "rook-ceph-tools-7d9f exited 16: Error EBUSY"));
  // The Deployment still says which OSD it was, so a retry can finish the job.
  EXPECT_TRUE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-3"));
}

TEST_F(PurgeRookTest, WithoutRookThereIsNothingToDo) {
  start({});
  auto r = purgeNode(*client_, *exec_, "node-b", "node-b");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(r->rook_present);
}

TEST_F(PurgeRookTest, NoToolsPodIsAClearError) {
  start({cephCluster(), osdDeployment("rook-ceph-osd-3", "3", "node-b")});
  auto r = purgeNode(*client_, *exec_, "node-b", "node-b");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("no Running rook-ceph-tools"));
}

}  // namespace
}  // namespace ekco::rook
