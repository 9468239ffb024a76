// Purge step 2: kubeadm-config's ClusterStatus (kubeadm < 1.22) and the remaining apiservers'
// addresses, against the in-process test API server.
#include "agent/features/purge/purge_kubeadm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "base/clock.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "tests/agent/cli_support.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kStatus = R"(apiEndpoints:
  cp-1:
    advertiseAddress: 10.0.0.1
    bindPort: 6443
  cp-2:
    advertiseAddress: 10.0.0.2
    bindPort: 6443
  cp-3:
    advertiseAddress: 10.0.0.3
    bindPort: 6443
apiVersion: kubeadm.k8s.io/v1beta2
kind: ClusterStatus
)";

TEST(RemoveApiEndpoint, RemovesTheNodeAndReportsTheOthers) {
  auto edit = removeApiEndpoint(kStatus, "cp-2");
  ASSERT_TRUE(edit) << edit.error().message();
  EXPECT_TRUE(edit->had_entry);
  EXPECT_EQ(edit->removed_address, "10.0.0.2");
  EXPECT_THAT(edit->remaining_addresses, ElementsAre("10.0.0.1", "10.0.0.3"));
  YAML::Node out = YAML::Load(edit->rewritten);
  EXPECT_FALSE(out["apiEndpoints"]["cp-2"]);
  EXPECT_EQ(out["apiEndpoints"]["cp-3"]["advertiseAddress"].as<std::string>(), "10.0.0.3");
  EXPECT_EQ(out["apiEndpoints"]["cp-3"]["bindPort"].as<int>(), 6443);
  EXPECT_EQ(out["kind"].as<std::string>(), "ClusterStatus");
  EXPECT_EQ(out["apiVersion"].as<std::string>(), "kubeadm.k8s.io/v1beta2");
  // Not listed: nothing to write.
  auto none = removeApiEndpoint(kStatus, "worker-1");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->had_entry);
  EXPECT_EQ(none->rewritten, "");
  EXPECT_EQ(none->remaining_addresses.size(), 3U);
}

TEST(RemoveApiEndpoint, RepairsEkcosLowerCaseDocument) {
  // ekco#107: an old EKCO wrote Go field names in lower case.
  const char* malformed = R"(apiendpoints:
  cp-1:
    advertiseaddress: 10.0.0.1
    bindport: 6443
  cp-2:
    advertiseaddress: 10.0.0.2
    bindport: 6443
typemeta:
  kind: ClusterStatus
)";
  auto edit = removeApiEndpoint(malformed, "cp-9");
  ASSERT_TRUE(edit) << edit.error().message();
  EXPECT_FALSE(edit->had_entry);
  YAML::Node out = YAML::Load(edit->rewritten);
  EXPECT_EQ(out["apiEndpoints"]["cp-2"]["advertiseAddress"].as<std::string>(), "10.0.0.2");
  EXPECT_FALSE(out["apiendpoints"]);
  auto removed = removeApiEndpoint(malformed, "cp-1");
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->removed_address, "10.0.0.1");
}

TEST(RemoveApiEndpoint, GarbageIsAParseError) {
  for (const char* bad :
       {"[unclosed", "- a list", "apiEndpoints: 7", "apiEndpoints:\n  cp-1:\n    bindPort: x\n"}) {
    auto edit = removeApiEndpoint(bad, "cp-1");
    ASSERT_FALSE(edit) << bad;
    EXPECT_EQ(edit.error().code(), base::ErrorCode::kParse) << bad;
    EXPECT_THAT(edit.error().message(), HasSubstr("ClusterStatus")) << bad;
  }
}

json kubeadmConfig(const std::string& status) {
  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "kubeadm-config"}, {"namespace", "kube-system"}}},
             {"data", {{"ClusterConfiguration", "kind: ClusterConfiguration\n"}}}};
  if (!status.empty()) cm["data"]["ClusterStatus"] = status;
  return cm;
}

json apiserverPod(const std::string& node, const std::string& endpoint) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "kube-apiserver-" + node},
            {"namespace", "kube-system"},
            {"labels", {{"component", "kube-apiserver"}, {"tier", "control-plane"}}},
            {"annotations",
             {{"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint", endpoint}}}}},
          {"spec",
           {{"nodeName", node}, {"containers", {{{"name", "kube-apiserver"}, {"image", "k"}}}}}}};
}

class KubeadmStepTest : public ::testing::Test {
 protected:
  void start(std::vector<json> objects) {
    auto server = kubesim::Server::start({.out_dir = dir_.path(), .objects = std::move(objects)});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    auto transport = kube::CurlTransport::create({.server = server_->url(),
                                                  .ca_pem = server_->caPem(),
                                                  .client_cert_pem = server_->clientCertPem(),
                                                  .client_key_pem = server_->clientKeyPem()},
                                                 nullptr, clock_, {});
    ASSERT_TRUE(transport);
    transport_ = std::move(*transport);
    client_ = std::make_unique<kube::RestClient>(*transport_, clock_, kube::RestClientOptions{});
  }
  std::string status() {
    return (*server_->get("configmaps", "kube-system", "kubeadm-config"))["data"].value(
        "ClusterStatus", "");
  }
  testing::TempDir dir_{"ekco-kubeadm"};
  base::SystemClock clock_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<kube::CurlTransport> transport_;
  std::unique_ptr<kube::RestClient> client_;
};

TEST_F(KubeadmStepTest, RemovesTheEntryOnceAndDryRunChangesNothing) {
  start({kubeadmConfig(kStatus)});
  auto dry = removeFromKubeadmConfig(*client_, "cp-2", /*dry_run=*/true);
  ASSERT_TRUE(dry) << dry.error().message();
  EXPECT_THAT(dry->actions, ElementsAre(HasSubstr("would remove cp-2 (10.0.0.2)")));
  EXPECT_EQ(status(), kStatus);
  auto r = removeFromKubeadmConfig(*client_, "cp-2", false);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->removed_address, "10.0.0.2");
  EXPECT_THAT(r->remaining_addresses, ElementsAre("10.0.0.1", "10.0.0.3"));
  EXPECT_THAT(status(), Not(HasSubstr("cp-2")));
  // Resumed: nothing left to do, the other members are still known.
  auto again = removeFromKubeadmConfig(*client_, "cp-2", false);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->actions.empty());
  EXPECT_THAT(again->remaining_addresses, ElementsAre("10.0.0.1", "10.0.0.3"));
}

TEST_F(KubeadmStepTest, NewKubeadmHasNoClusterStatusAndTheApiserverPodsTellTheAddresses) {
  start({kubeadmConfig(""), apiserverPod("cp-1", "10.0.0.1:6443"),
         apiserverPod("cp-2", "10.0.0.2:6443"), apiserverPod("cp-3", "[fd00::3]:6443")});
  auto r = removeFromKubeadmConfig(*client_, "cp-2", false);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->actions.empty());
  EXPECT_EQ(r->removed_address, "");
  auto addresses = apiserverAddresses(*client_, "cp-2");
  ASSERT_TRUE(addresses) << addresses.error().message();
  EXPECT_THAT(*addresses, ElementsAre("10.0.0.1", "fd00::3"));
}

}  // namespace
}  // namespace ekco::agent
