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
#include "agent/features/webhook/webhook_probe.h"
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

  // No request of the ekco ServiceAccount was forbidden, and every rule of
  // deploy/11-rbac-webhook.yaml for one of `resources` was used.
  void expectLeastPrivilege(const std::set<std::string>& resources) {
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
            if (!resources.contains(res.get<std::string>())) continue;
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
  // `kubectl ARGS...` against kubesim.
  base::ProcessResult kubectl(std::vector<std::string> args) {
    base::BoostProcessRunner runner(clock_);
    args.insert(args.begin(), {"kubectl", "--kubeconfig", server_->kubeconfigPath()});
    auto r = runner.run({.argv = args, .timeout = std::chrono::seconds(60)});
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : base::ProcessResult{};
  }
  std::string imageOf(const std::string& ns, const std::string& pod) {
    return kubectl({"get", "pod", pod, "-n", ns, "-o", "jsonpath={.spec.containers[0].image}"})
        .stdout_data;
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

  // Least privilege, both ways, for the rules of the Service and the configuration (the
  // endpoints' in BackedByNodes... below).
  expectLeastPrivilege({"secrets", "services", "mutatingwebhookconfigurations"});
}

// End to end through the real kubectl: kubesim calls the webhook the leader configured, as
// kube-apiserver does (TLS verified against caBundle, AdmissionReview v1, the JSON patch
// applied), reaching the agent's server through the Service's Endpoints (kubesim accepts a
// loopback address there; tests/kubesim/README.md). Every namespace, as EKCO, kube-system too,
// but those pod_image_overrides_excluded_namespaces names.
TEST_F(WebhookSimTest, KubectlRunIsMutatedThroughTheApiServersWebhookCallInEveryNamespace) {
  WebhookConfigController l(*client_, clock_,
                            {.ns = "kurl",
                             .enabled = true,
                             .target_port = 6445,
                             .excluded_namespaces = {"rook-ceph"},
                             .effects = {.is_leader_fresh = [] { return true; }}});
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
  auto run = kubectl({"run", "web", "--image=nginx:1.25", "--restart=Never"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_data;
  EXPECT_EQ(imageOf("default", "web"), "registry.local/nginx:1.25-fips");
  // Another image is left alone; kube-system is rewritten too; an excluded namespace is not.
  ASSERT_EQ(kubectl({"run", "other", "--image=nginx:1.26", "--restart=Never"}).exit_code, 0);
  EXPECT_EQ(imageOf("default", "other"), "nginx:1.26");
  ASSERT_EQ(kubectl({"run", "sys", "-n", "kube-system", "--image=nginx:1.25", "--restart=Never"})
                .exit_code,
            0);
  EXPECT_EQ(imageOf("kube-system", "sys"), "registry.local/nginx:1.25-fips");
  ASSERT_EQ(kubectl({"create", "namespace", "rook-ceph"}).exit_code, 0);
  ASSERT_EQ(
      kubectl({"run", "osd", "-n", "rook-ceph", "--image=nginx:1.25", "--restart=Never"}).exit_code,
      0);
  EXPECT_EQ(imageOf("rook-ceph", "osd"), "nginx:1.25");
}

// Agents from the packages (issue 37 part 3): the Service has no selector and the leader lists
// the control-plane agents that answer its probe in an EndpointSlice and the Endpoints. Two
// agents on their own loopback addresses (their nodes' InternalIPs) serve; kubesim calls them
// through the slice, as kube-proxy would route the apiserver's call to the ClusterIP; an agent
// that stops is dropped at the next pass; with every agent stopped, `kubectl run` in
// kube-system still succeeds at once (failurePolicy Ignore, a refused connection); and going
// back to the DaemonSet's pods removes ekco's slice.
TEST_F(WebhookSimTest, BackedByNodesTheLeaderListsTheAgentsThatServeAndDropsAStoppedOne) {
  auto agent = [&](const std::string& address, int port) {
    auto s = std::make_unique<WebhookServingController>(
        *client_, clock_,
        WebhookServingOptions{
            .ns = "kurl",
            .overrides = admission::parseImageOverrides(
                {"registry.k8s.io/kube-proxy:v1.29.0=registry.local/kube-proxy:v1.29.0"}),
            .address = address,
            .port = port});
    EXPECT_TRUE(s->reconcile());
    return s;
  };
  // The nodes as the API has them: two primaries (kubeadm's role label; one with the pre-1.24
  // one too) and a worker, never probed: workers do not serve.
  auto node = [&](const std::string& name, const std::string& ip, json labels) {
    ASSERT_TRUE(
        server_->put({{"apiVersion", "v1"},
                      {"kind", "Node"},
                      {"metadata", {{"name", name}, {"labels", labels}}},
                      {"status", {{"addresses", {{{"type", "InternalIP"}, {"address", ip}}}}}}}));
  };
  node("cp-1", "127.0.3.1",
       {{"node-role.kubernetes.io/control-plane", ""}, {"node-role.kubernetes.io/master", ""}});
  node("cp-2", "127.0.3.2", {{"node-role.kubernetes.io/control-plane", ""}});
  node("worker-1", "127.0.3.9", json::object());
  auto leader = [&](WebhookBacking backing, int port) {
    return WebhookConfigController(
        *client_, clock_,
        {.ns = "kurl",
         .enabled = true,
         .target_port = port,
         .backing = backing,
         .probe = webhook::httpsProbe(clock_, WebhookConfigController::kProbeTimeout),
         .effects = {
             .is_leader_fresh = [] { return true; },
             .record_event =
                 [this](const kube::EventSpec& e) { ASSERT_TRUE(client_->recordEvent(e)); }}});
  };

  // First the DaemonSet's way (a Service with a selector), and the slice the cluster's
  // EndpointSlice controller made for it.
  ASSERT_TRUE(leader(WebhookBacking::kPods, 6445).reconcile());
  const json leftover = {
      {"apiVersion", "discovery.k8s.io/v1"},
      {"kind", "EndpointSlice"},
      {"metadata",
       {{"name", "ekco-x7k2p"},
        {"namespace", "kurl"},
        {"labels",
         {{"kubernetes.io/service-name", "ekco"},
          {"endpointslice.kubernetes.io/managed-by", "endpointslice-controller.k8s.io"}}}}},
      {"addressType", "IPv4"},
      {"endpoints", {{{"addresses", {"10.32.0.9"}}, {"conditions", {{"ready", true}}}}}},
      {"ports", {{{"name", "https"}, {"port", 6445}, {"protocol", "TCP"}}}}};
  ASSERT_TRUE(server_->put(leftover));

  // Two agents on the hosts, one port.
  auto cp1 = agent("127.0.3.1", 0);
  const int port = cp1->port();
  ASSERT_GT(port, 0);
  auto cp2 = agent("127.0.3.2", port);
  ASSERT_EQ(cp2->port(), port);

  auto l = leader(WebhookBacking::kNodes, port);
  auto r = l.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  auto service = server_->get("services", "kurl", "ekco");
  ASSERT_TRUE(service);
  EXPECT_FALSE((*service)["spec"].contains("selector")) << service->dump();
  EXPECT_FALSE(server_->get("endpointslices.discovery.k8s.io", "kurl", "ekco-x7k2p"));
  auto slice = server_->get("endpointslices.discovery.k8s.io", "kurl", "ekco-webhook-ipv4");
  ASSERT_TRUE(slice);
  ASSERT_EQ((*slice)["endpoints"].size(), 2U) << slice->dump();
  EXPECT_EQ((*slice)["endpoints"][0]["addresses"][0], "127.0.3.1");
  EXPECT_EQ((*slice)["endpoints"][1]["nodeName"], "cp-2");
  EXPECT_EQ((*slice)["ports"][0]["port"], port);
  auto endpoints = server_->get("endpoints", "kurl", "ekco");
  ASSERT_TRUE(endpoints);
  EXPECT_EQ((*endpoints)["subsets"][0]["addresses"].size(), 2U);
  EXPECT_EQ(l.status()["endpoints"]["nodes"].size(), 2U);
  r = l.reconcile();  // what the API stored is no difference
  ASSERT_TRUE(r);
  EXPECT_EQ(r->summary, "webhook configured");
  EXPECT_EQ(r->requeue_after, std::chrono::milliseconds(std::chrono::seconds(10)));

  // kube-proxy's image, in kube-system, through the apiserver's call: rewritten.
  auto run = kubectl({"run", "proxy", "-n", "kube-system",
                      "--image=registry.k8s.io/kube-proxy:v1.29.0", "--restart=Never"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_data;
  EXPECT_EQ(imageOf("kube-system", "proxy"), "registry.local/kube-proxy:v1.29.0");

  // cp-1's agent stops: out of the endpoints at the next pass, and cp-2 serves.
  cp1.reset();
  r = l.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  slice = server_->get("endpointslices.discovery.k8s.io", "kurl", "ekco-webhook-ipv4");
  ASSERT_EQ((*slice)["endpoints"].size(), 1U);
  EXPECT_EQ((*slice)["endpoints"][0]["nodeName"], "cp-2");
  EXPECT_EQ((*server_->get("endpoints", "kurl", "ekco"))["subsets"][0]["addresses"].size(), 1U);
  const json cp1_status = l.status()["endpoints"]["nodes"][0];
  EXPECT_EQ(cp1_status["serving"], false);
  EXPECT_FALSE(cp1_status["why"].get<std::string>().empty());
  run = kubectl({"run", "proxy2", "-n", "kube-system", "--image=registry.k8s.io/kube-proxy:v1.29.0",
                 "--restart=Never"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_data;
  EXPECT_EQ(imageOf("kube-system", "proxy2"), "registry.local/kube-proxy:v1.29.0");

  // Every agent stopped, the leader too (the slice still names cp-2): pods go through unchanged,
  // at once, far within the webhook's 10 s timeout.
  cp2.reset();
  const auto start = std::chrono::steady_clock::now();
  run = kubectl({"run", "proxy3", "-n", "kube-system", "--image=registry.k8s.io/kube-proxy:v1.29.0",
                 "--restart=Never"});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(run.exit_code, 0) << run.stderr_data;
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_EQ(imageOf("kube-system", "proxy3"), "registry.k8s.io/kube-proxy:v1.29.0");
  // A leader's pass then empties the endpoints; pods still go through.
  ASSERT_TRUE(l.reconcile());
  slice = server_->get("endpointslices.discovery.k8s.io", "kurl", "ekco-webhook-ipv4");
  EXPECT_TRUE((*slice)["endpoints"].is_null() || (*slice)["endpoints"].empty()) << slice->dump();
  ASSERT_EQ(kubectl({"run", "proxy4", "-n", "kube-system",
                     "--image=registry.k8s.io/kube-proxy:v1.29.0", "--restart=Never"})
                .exit_code,
            0);

  // Back to the DaemonSet: ekco's slice goes, the selector comes back.
  ASSERT_TRUE(leader(WebhookBacking::kPods, port).reconcile());
  EXPECT_FALSE(server_->get("endpointslices.discovery.k8s.io", "kurl", "ekco-webhook-ipv4"));
  EXPECT_TRUE((*server_->get("services", "kurl", "ekco"))["spec"].contains("selector"));

  expectLeastPrivilege({"endpointslices", "endpoints"});
}

}  // namespace
}  // namespace ekco::agent
