// The pod image overrides webhook's cluster objects against ekco-kubesim, as the ekco
// ServiceAccount with deploy/'s RBAC enforced (deploy/11-rbac-webhook.yaml): the leader's pass
// creates the CA Secret, the Service and the MutatingWebhookConfiguration, a node's pass serves
// with a certificate from that CA, and a TLS client that trusts only the configuration's caBundle
// verifies it — as kube-apiserver does when it calls the webhook. Drift is repaired, the
// configuration goes when the overrides do, and, least privilege both ways, no request is forbidden
// and every rule of the file is used.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agent/features/webhook/webhook_config.h"
#include "agent/features/webhook/webhook_objects.h"
#include "agent/features/webhook/webhook_serving.h"
#include "base/clock.h"
#include "base/os/process.h"
#include "hostfs/local_host_fs.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/process_support.h"
#include "tests/agent/sa_client.h"
#include "tests/agent/serve/tls_client.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr const char* kConfigurations =
    "mutatingwebhookconfigurations.admissionregistration.k8s.io";

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(EKCO_TESTDATA_DIR) + "/admission/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class WebhookSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(sa_.start(dir_.path(), {}, {"/deploy"}, clock_));
    server_ = &sa_.server();
    client_ = &sa_.client();
  }
  void TearDown() override { serving_.reset(); }

  WebhookConfigController leader(bool enabled) {
    return WebhookConfigController(*client_, clock_,
                                   {.ns = "kurl",
                                    .enabled = enabled,
                                    .target_port = 6445,
                                    .effects = {.is_leader_fresh = [] { return true; },
                                                .record_event =
                                                    [this](const kube::EventSpec& e) {
                                                      ASSERT_TRUE(client_->recordEvent(e));
                                                    }}});
  }
  std::string caBundle() const {
    auto c = server_->get(kConfigurations, "", "pod-image-overrides.kurl.sh");
    EXPECT_TRUE(c);
    if (!c) return {};
    return *kube::base64Decode((*c)["webhooks"][0]["clientConfig"]["caBundle"].get<std::string>());
  }

  testing::TempDir dir_{"ekco-webhook-sim"};
  base::SystemClock clock_;
  testing::ServiceAccountCluster sa_;
  kubesim::Server* server_ = nullptr;
  kube::RestClient* client_ = nullptr;
  std::unique_ptr<WebhookServingController> serving_;
};

TEST_F(WebhookSimTest, TheLeaderConfiguresAnAgentServesAndTheCaBundleVerifiesIt) {
  auto l = leader(true);
  auto r = l.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  auto configuration = server_->get(kConfigurations, "", "pod-image-overrides.kurl.sh");
  ASSERT_TRUE(configuration);
  // As stored by the API server.
  const json& hook = (*configuration)["webhooks"][0];
  EXPECT_EQ(hook["failurePolicy"], "Ignore");
  EXPECT_EQ(hook["clientConfig"]["service"]["path"], "/pod-image-overrides");
  auto service = server_->get("services", "kurl", "ekco");
  ASSERT_TRUE(service);
  EXPECT_EQ((*service)["spec"]["ports"][0]["targetPort"], 6445);
  ASSERT_TRUE(server_->get("secrets", "kurl", "ekco-webhook-ca"));
  r = l.reconcile();  // what the API defaulted is no drift
  ASSERT_TRUE(r);
  EXPECT_EQ(r->summary, "webhook configured");

  serving_ = std::make_unique<WebhookServingController>(
      *client_, clock_,
      WebhookServingOptions{.ns = "kurl",
                            .overrides = admission::parseImageOverrides(
                                {"projectcontour/contour:v1.18.0=myregistry.io/contour:fips"}),
                            .address = "127.0.0.1",
                            .port = 0});
  ASSERT_TRUE(serving_->reconcile());
  ekco::testing::TlsClient apiserver(serving_->port(), caBundle(), "ekco.kurl.svc");
  const auto answer = apiserver.post("/pod-image-overrides", fixture("pod-create-v1.json"));
  EXPECT_EQ(answer.status, 200);
  EXPECT_TRUE(json::parse(answer.body)["response"].contains("patch"));

  // Drift: an EKCO-era Service and a configuration with another caBundle are put back.
  json old_service = *service;
  old_service["spec"]["selector"] = {{"app", "ekc-operator"}};
  old_service["spec"]["ports"][0]["targetPort"] = 443;
  ASSERT_TRUE(server_->put(old_service));
  json old_configuration = *configuration;
  old_configuration["webhooks"][0]["clientConfig"]["caBundle"] = "b3RoZXI=";
  ASSERT_TRUE(server_->put(old_configuration));
  r = l.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*server_->get("services", "kurl", "ekco"))["spec"]["selector"],
            json({{"app.kubernetes.io/name", "ekco"}}));
  auto ca = webhook::caFromSecret(*server_->get("secrets", "kurl", "ekco-webhook-ca"));
  ASSERT_TRUE(ca) << ca.error().message();
  EXPECT_EQ(caBundle(), ca->cert_pem);

  // The overrides go: so does the configuration.
  auto off = leader(false);
  ASSERT_TRUE(off.reconcile());
  EXPECT_FALSE(server_->get(kConfigurations, "", "pod-image-overrides.kurl.sh"));

  // Least privilege, both ways, for the webhook's rules.
  std::set<std::string> used;
  for (const auto& rec : server_->requestLog()) {
    if (rec.user != testing::kEkcoServiceAccount || rec.resource.empty()) continue;
    EXPECT_TRUE(rec.allowed) << "forbidden: " << rec.verb << " " << rec.path;
    used.insert(rec.verb + " " + rec.api_group + "/" + rec.resource);
  }
  auto rbac = kubesim::parseObjects(
      testing::readWholeFile(EKCO_SOURCE_DIR + std::string("/deploy/11-rbac-webhook.yaml")));
  ASSERT_TRUE(rbac);
  for (const json& o : *rbac) {
    if (o["kind"] != "Role" && o["kind"] != "ClusterRole") continue;
    for (const json& rule : o["rules"]) {
      for (const json& g : rule["apiGroups"]) {
        for (const json& res : rule["resources"]) {
          for (const json& v : rule["verbs"]) {
            const std::string p =
                v.get<std::string>() + " " + g.get<std::string>() + "/" + res.get<std::string>();
            EXPECT_TRUE(used.contains(p)) << "granted but never used: " << p;
          }
        }
      }
    }
  }
}

// End to end through the real kubectl: kubesim calls the webhook the leader configured, as
// kube-apiserver does (TLS verified against caBundle, AdmissionReview v1, the JSON patch
// applied), reaching the agent's server through the Service's Endpoints (kubesim accepts a
// loopback address there; tests/kubesim/README.md).
TEST_F(WebhookSimTest, KubectlRunIsMutatedThroughTheApiServersWebhookCallButNotInKubeSystem) {
  auto l = leader(true);
  ASSERT_TRUE(l.reconcile());
  serving_ = std::make_unique<WebhookServingController>(
      *client_, clock_,
      WebhookServingOptions{.ns = "kurl",
                            .overrides = admission::parseImageOverrides(
                                {"nginx:1.25=registry.local/nginx:1.25-fips"}),
                            .address = "127.0.0.1",
                            .port = 0});
  ASSERT_TRUE(serving_->reconcile());
  ASSERT_TRUE(server_->put({{"apiVersion", "v1"},
                            {"kind", "Endpoints"},
                            {"metadata", {{"name", "ekco"}, {"namespace", "kurl"}}},
                            {"subsets",
                             {{{"addresses", {{{"ip", "127.0.0.1"}}}},
                               {"ports", {{{"name", "https"}, {"port", serving_->port()}}}}}}}}));
  base::BoostProcessRunner runner(clock_);
  auto kubectl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"kubectl", "--kubeconfig", server_->kubeconfigPath()});
    auto r = runner.run({.argv = args, .timeout = std::chrono::seconds(60)});
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : base::ProcessResult{};
  };
  auto run = kubectl({"run", "web", "--image=nginx:1.25", "--restart=Never"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_data;
  auto image = kubectl({"get", "pod", "web", "-o", "jsonpath={.spec.containers[0].image}"});
  ASSERT_EQ(image.exit_code, 0) << image.stderr_data;
  EXPECT_EQ(image.stdout_data, "registry.local/nginx:1.25-fips");
  // Another image is left alone; kube-system is never sent to the webhook.
  ASSERT_EQ(kubectl({"run", "other", "--image=nginx:1.26", "--restart=Never"}).exit_code, 0);
  EXPECT_EQ(
      kubectl({"get", "pod", "other", "-o", "jsonpath={.spec.containers[0].image}"}).stdout_data,
      "nginx:1.26");
  ASSERT_EQ(kubectl({"run", "sys", "-n", "kube-system", "--image=nginx:1.25", "--restart=Never"})
                .exit_code,
            0);
  EXPECT_EQ(kubectl({"get", "pod", "sys", "-n", "kube-system", "-o",
                     "jsonpath={.spec.containers[0].image}"})
                .stdout_data,
            "nginx:1.25");
}

}  // namespace
}  // namespace ekco::agent
