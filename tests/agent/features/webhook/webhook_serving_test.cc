// webhook-server (every node): the CA from the Secret, this agent's own serving certificate, the
// HTTPS server on loopback verified by a TLS client against that CA, renewal and a replaced CA
// swapped in without a restart (same port), dry run.
#include "agent/features/webhook/webhook_serving.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agent/features/webhook/webhook_objects.h"
#include "kube/transport/kubeconfig.h"
#include "pki/issue.h"
#include "tests/agent/serve/tls_client.h"
#include "tests/fakes/fake_kube.h"

namespace ekco::agent {
namespace {

using ekco::testing::TlsClient;
using kube::testing::FakeKube;
using nlohmann::json;
using ::testing::HasSubstr;

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(EKCO_TESTDATA_DIR) + "/admission/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class WebhookServingTest : public ::testing::Test {
 protected:
  std::unique_ptr<WebhookServingController> controller(bool dry_run = false) {
    return std::make_unique<WebhookServingController>(
        kube_, clock_,
        WebhookServingOptions{
            .ns = "kurl",
            .overrides = admission::parseImageOverrides(
                {"projectcontour/contour:v1.18.0=myregistry.io/contour:fips"}),
            .address = "127.0.0.1",
            .port = 0,
            .dry_run = dry_run,
            .count_action = [this](std::string_view kind) { actions_.emplace_back(kind); }});
  }
  pki::KeyPair putCa() {
    auto ca = pki::createCa({.common_name = "ekco-webhook-ca", .now = clock_.wallNow()});
    EXPECT_TRUE(ca);
    kube_.put(kube::resources::kSecrets,
              webhook::caSecret("kurl", {.cert_pem = ca->cert_pem, .key_pem = ca->key_pem}));
    return *ca;
  }
  // The patched images of one review through a verified connection.
  std::size_t patchedThrough(int port, const std::string& ca_pem) {
    TlsClient client(port, ca_pem, "ekco.kurl.svc");
    const auto answer = client.post("/pod-image-overrides", fixture("pod-create-v1.json"));
    EXPECT_EQ(answer.status, 200);
    const json response = json::parse(answer.body)["response"];
    if (!response.contains("patch")) return 0;
    return json::parse(*kube::base64Decode(response["patch"].get<std::string>())).size();
  }

  FakeKube kube_;
  // Real time minus 80 days: certificates made at this clock's now are valid in real time (the
  // TLS client checks against it) before and after advancing it 61 days.
  base::ManualClock clock_{base::SystemClock().wallNow() - std::chrono::hours(24 * 80)};
  std::vector<std::string> actions_;
};

TEST_F(WebhookServingTest, WaitsForTheLeadersCaWithoutListening) {
  auto c = controller();
  auto r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "waiting for the CA Secret kurl/ekco-webhook-ca (the leader creates it)");
  EXPECT_EQ(r->requeue_after, std::chrono::milliseconds(5000));
  EXPECT_EQ(c->port(), 0);
}

TEST_F(WebhookServingTest, ServesWithItsOwnCertificateFromTheSecretsCa) {
  const pki::KeyPair ca = putCa();
  auto c = controller();
  auto r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "serving with a new certificate (first certificate)");
  ASSERT_GT(c->port(), 0);
  EXPECT_EQ(patchedThrough(c->port(), ca.cert_pem), 3u);
  EXPECT_EQ(actions_, std::vector<std::string>{"pod_image_overridden"});
  const json status = c->status();
  EXPECT_EQ(status["pods_overridden"], 1);
  EXPECT_EQ(status["server"]["reviews"], 1);
  EXPECT_EQ(status["certificate"]["ca_secret"], "kurl/ekco-webhook-ca");
  // Another agent's certificate from the same CA is another key: both verify against the CA.
  auto other = controller();
  ASSERT_TRUE(other->reconcile());
  EXPECT_EQ(patchedThrough(other->port(), ca.cert_pem), 3u);
  // Nothing to do on the next pass.
  r = c->reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->summary, "serving");
  EXPECT_EQ(r->requeue_after, std::chrono::milliseconds(std::chrono::minutes(1)));
}

TEST_F(WebhookServingTest, RenewsTwoThirdsThroughOnTheSamePort) {
  const pki::KeyPair ca = putCa();
  auto c = controller();
  ASSERT_TRUE(c->reconcile());
  const int port = c->port();
  const std::string first = TlsClient(port, ca.cert_pem, "ekco.kurl.svc").peerSerial();
  const std::string renew_at = c->status()["certificate"]["renew_at"];
  clock_.advance(std::chrono::hours(24 * 59));
  auto r = c->reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->summary, "serving");
  clock_.advance(std::chrono::hours(24 * 2));
  r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "serving with a new certificate (renewal (two thirds of its life passed))");
  EXPECT_EQ(c->port(), port);
  EXPECT_NE(TlsClient(port, ca.cert_pem, "ekco.kurl.svc").peerSerial(), first);
  EXPECT_NE(c->status()["certificate"]["renew_at"], renew_at);
}

TEST_F(WebhookServingTest, AReplacedCaIsServedOnTheNextPass) {
  const pki::KeyPair old_ca = putCa();
  auto c = controller();
  ASSERT_TRUE(c->reconcile());
  const pki::KeyPair new_ca = putCa();
  auto r = c->reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->summary, "serving with a new certificate (the CA changed)");
  EXPECT_EQ(patchedThrough(c->port(), new_ca.cert_pem), 3u);
  EXPECT_ANY_THROW(TlsClient(c->port(), old_ca.cert_pem, "ekco.kurl.svc"));
}

TEST_F(WebhookServingTest, AnUnreadableCaIsAnError) {
  kube_.put(kube::resources::kSecrets,
            webhook::caSecret("kurl", {.cert_pem = "garbage", .key_pem = "garbage"}));
  auto c = controller();
  auto r = c->reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("Secret kurl/ekco-webhook-ca tls.crt"));
  EXPECT_EQ(c->port(), 0);
}

TEST_F(WebhookServingTest, ADryRunAnswersAllowedWithoutAPatch) {
  const pki::KeyPair ca = putCa();
  auto c = controller(/*dry_run=*/true);
  ASSERT_TRUE(c->reconcile());
  EXPECT_EQ(patchedThrough(c->port(), ca.cert_pem), 0u);
  EXPECT_TRUE(actions_.empty());
}

TEST_F(WebhookServingTest, MalformedReviewsAreCountedAndAnswered) {
  const pki::KeyPair ca = putCa();
  auto c = controller();
  ASSERT_TRUE(c->reconcile());
  TlsClient client(c->port(), ca.cert_pem, "ekco.kurl.svc");
  const auto answer = client.post("/pod-image-overrides", "[1,2");
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(json::parse(answer.body)["response"]["allowed"], true);
  EXPECT_EQ(c->status()["reviews_refused"], 1);
  EXPECT_THAT(c->status()["last_refusal"].get<std::string>(), HasSubstr("not JSON"));
}

}  // namespace
}  // namespace ekco::agent
