// pod-image-overrides (leader): the decision as a table, and passes against the fake API —
// create-only CA, a lost CA race, drift repaired, removal when the overrides go, dry run,
// fencing, an unreadable CA left alone.
#include "agent/features/webhook/webhook_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/features/webhook/webhook_objects.h"
#include "kube/transport/kubeconfig.h"
#include "pki/issue.h"
#include "tests/fakes/fake_kube.h"

namespace ekco::agent {
namespace {

using kube::testing::FakeKube;
using kube::testing::Verb;
using nlohmann::json;
using ::testing::HasSubstr;
using webhook::kMutatingWebhookConfigurations;

const std::string kCa = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";

TEST(WebhookConfigurationStep, FollowsWhetherOverridesAreConfiguredAndWhatIsThere) {
  const json want = webhook::desiredConfiguration("kurl", kCa);
  json defaulted = want;  // as the API stores it: defaults added, nothing of ours changed
  defaulted["metadata"]["resourceVersion"] = "7";
  defaulted["metadata"]["uid"] = "u";
  defaulted["webhooks"][0]["objectSelector"] = json::object();
  defaulted["webhooks"][0]["clientConfig"]["service"]["port"] = 443;
  json other_ca = want;
  other_ca["webhooks"][0]["clientConfig"]["caBundle"] = "b3RoZXI=";
  json fail_closed = want;
  fail_closed["webhooks"][0]["failurePolicy"] = "Fail";
  json old_exclusion = want;  // an older ekco's: kube-system and kurl left out
  old_exclusion["webhooks"][0]["namespaceSelector"] = {{"matchExpressions",
                                                        {{{"key", "kubernetes.io/metadata.name"},
                                                          {"operator", "NotIn"},
                                                          {"values", {"kube-system", "kurl"}}}}}};
  json object_selector = defaulted;
  object_selector["webhooks"][0]["objectSelector"] = {{"matchLabels", {{"a", "b"}}}};
  json ekco_era = want;  // EKCO's: no namespace selector, path the same, no labels
  ekco_era["webhooks"][0].erase("namespaceSelector");
  ekco_era["metadata"].erase("labels");
  json two_hooks = want;
  two_hooks["webhooks"].push_back(want["webhooks"][0]);

  struct Case {
    const char* name;
    bool wanted;
    std::optional<json> have;
    WebhookStep step;
  };
  const Case cases[] = {
      {"wanted, absent", true, std::nullopt, WebhookStep::kCreate},
      {"wanted, as written", true, want, WebhookStep::kNone},
      {"wanted, as the API defaulted it", true, defaulted, WebhookStep::kNone},
      {"wanted, another CA", true, other_ca, WebhookStep::kUpdate},
      {"wanted, failurePolicy edited", true, fail_closed, WebhookStep::kUpdate},
      {"wanted, an older ekco's namespace exclusion", true, old_exclusion, WebhookStep::kUpdate},
      {"wanted, an object selector added", true, object_selector, WebhookStep::kUpdate},
      {"wanted, EKCO's configuration", true, ekco_era, WebhookStep::kUpdate},
      {"wanted, a second webhook added", true, two_hooks, WebhookStep::kUpdate},
      {"unwanted, present", false, defaulted, WebhookStep::kDelete},
      {"unwanted, absent", false, std::nullopt, WebhookStep::kNone},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(configurationStep(c.wanted, c.have, c.wanted ? want : json()), c.step) << c.name;
  }
}

TEST(WebhookServiceStep, CreatesFixesSelectorAndPortsAndNeverDeletes) {
  const json want = webhook::desiredService("kurl", 6445);
  json defaulted = want;
  defaulted["spec"]["clusterIP"] = "10.96.0.12";
  defaulted["spec"]["sessionAffinity"] = "None";
  json ekco_era = want;
  ekco_era["spec"]["selector"] = {{"app", "ekc-operator"}};
  ekco_era["spec"]["ports"][0]["targetPort"] = 443;
  EXPECT_EQ(serviceStep(true, std::nullopt, want), WebhookStep::kCreate);
  EXPECT_EQ(serviceStep(true, defaulted, want), WebhookStep::kNone);
  EXPECT_EQ(serviceStep(true, ekco_era, want), WebhookStep::kUpdate);
  EXPECT_EQ(serviceStep(false, ekco_era, want), WebhookStep::kNone);
  json extra_label = defaulted;  // a selector that also wants another label selects nothing
  extra_label["spec"]["selector"]["tier"] = "x";
  EXPECT_EQ(serviceStep(true, extra_label, want), WebhookStep::kUpdate);
  // Backed by nodes: no selector, and one left over is drift.
  const json bare = webhook::desiredService("kurl", 6445, /*selector=*/false);
  EXPECT_FALSE(bare["spec"].contains("selector"));
  EXPECT_EQ(serviceStep(true, defaulted, bare), WebhookStep::kUpdate);
  json bare_defaulted = bare;
  bare_defaulted["spec"]["clusterIP"] = "10.96.0.12";
  EXPECT_EQ(serviceStep(true, bare_defaulted, bare), WebhookStep::kNone);
  bare_defaulted["spec"]["selector"] = json::object();
  EXPECT_EQ(serviceStep(true, bare_defaulted, bare), WebhookStep::kNone);
}

TEST(WebhookEndpointsStep, ComparesEndpointsPortsAndLabelsAndReadsADroppedListAsEmpty) {
  const std::vector<webhook::ServingAgent> two = {{.node = "cp-2", .address = "10.0.0.2"},
                                                  {.node = "cp-1", .address = "10.0.0.1"}};
  const json slice = webhook::desiredEndpointSlice("kurl", false, two, 6445);
  ASSERT_EQ(slice["endpoints"].size(), 2U);
  EXPECT_EQ(slice["endpoints"][0]["nodeName"], "cp-1");  // sorted by node
  EXPECT_EQ(slice["addressType"], "IPv4");
  EXPECT_EQ(slice["metadata"]["labels"]["kubernetes.io/service-name"], "ekco");
  EXPECT_EQ(slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"], "ekco.kurl.sh");
  json stored = slice;
  stored["metadata"]["resourceVersion"] = "4";
  stored["endpoints"][0]["zone"] = "a";  // what the API or others add is no difference
  EXPECT_EQ(endpointsStep(true, std::nullopt, slice), WebhookStep::kCreate);
  EXPECT_EQ(endpointsStep(true, stored, slice), WebhookStep::kNone);
  EXPECT_EQ(endpointsStep(false, stored, slice), WebhookStep::kDelete);
  EXPECT_EQ(endpointsStep(false, std::nullopt, slice), WebhookStep::kNone);
  const json one = webhook::desiredEndpointSlice("kurl", false, {two[0]}, 6445);
  EXPECT_EQ(endpointsStep(true, stored, one), WebhookStep::kUpdate);
  // An IPv6 agent goes to the other slice.
  EXPECT_TRUE(webhook::desiredEndpointSlice("kurl", true, two, 6445)["endpoints"].empty());
  // Nobody serves: the API stores `endpoints: null` (or drops it): the same as [].
  const json none = webhook::desiredEndpointSlice("kurl", false, {}, 6445);
  json dropped = none;
  dropped["endpoints"] = nullptr;
  EXPECT_EQ(endpointsStep(true, dropped, none), WebhookStep::kNone);
  dropped.erase("endpoints");
  EXPECT_EQ(endpointsStep(true, dropped, none), WebhookStep::kNone);

  // The Endpoints: sorted by address, skip-mirror, and no subset when nobody serves.
  const json endpoints = webhook::desiredEndpoints("kurl", two, 6445);
  EXPECT_EQ(endpoints["subsets"][0]["addresses"][0],
            json({{"ip", "10.0.0.1"}, {"nodeName", "cp-1"}}));
  EXPECT_EQ(endpoints["subsets"][0]["ports"][0]["port"], 6445);
  EXPECT_EQ(endpoints["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"], "true");
  const json empty = webhook::desiredEndpoints("kurl", {}, 6445);
  EXPECT_TRUE(empty["subsets"].empty());
  json stored_empty = empty;
  stored_empty.erase("subsets");
  EXPECT_EQ(endpointsStep(true, stored_empty, empty), WebhookStep::kNone);
  EXPECT_EQ(endpointsStep(true, stored_empty, endpoints), WebhookStep::kUpdate);
}

// The decision alone (planWebhook): what a pass changes, from what it saw.
TEST(PlanWebhook, DecidesFromTheViewAlone) {
  const WebhookConfigOptions on{.ns = "kurl", .enabled = true, .target_port = 6445};
  const WebhookConfigOptions off{.ns = "kurl", .enabled = false};
  const webhook::CaPair ca{.cert_pem = kCa, .key_pem = "key"};
  json service = webhook::desiredService("kurl", 6445);
  service["metadata"]["resourceVersion"] = "3";
  json configuration = webhook::desiredConfiguration("kurl", kCa);
  configuration["metadata"]["resourceVersion"] = "7";

  // Nothing there yet: the Service, then the configuration, created.
  const WebhookPlan fresh = planWebhook({.ca = ca}, on);
  ASSERT_EQ(fresh.changes.size(), 2U);
  EXPECT_EQ(fresh.changes[0].object, WebhookObject::kService);
  EXPECT_EQ(fresh.changes[0].step, WebhookStep::kCreate);
  EXPECT_EQ(fresh.changes[0].what,
            "create the Service kurl/ekco (port 443 -> 6445, selecting the DaemonSet's pods)");
  EXPECT_EQ(fresh.changes[1].object, WebhookObject::kConfiguration);
  EXPECT_EQ(fresh.changes[1].step, WebhookStep::kCreate);
  EXPECT_EQ(fresh.changes[1].want, webhook::desiredConfiguration("kurl", kCa));

  // Everything as written: nothing to do, and /status says so.
  const WebhookPlan rest =
      planWebhook({.ca = ca, .service = service, .configuration = configuration}, on);
  EXPECT_TRUE(rest.changes.empty());
  EXPECT_EQ(rest.status["service"]["step"], "none");
  EXPECT_EQ(rest.status["configuration"]["step"], "none");

  // The Service's ports edited: fixed at the version read.
  json edited = service;
  edited["spec"]["ports"][0]["targetPort"] = 9999;
  const WebhookPlan fix =
      planWebhook({.ca = ca, .service = edited, .configuration = configuration}, on);
  ASSERT_EQ(fix.changes.size(), 1U);
  EXPECT_EQ(fix.changes[0].step, WebhookStep::kUpdate);
  EXPECT_EQ(fix.changes[0].resource_version, "3");
  EXPECT_THAT(fix.changes[0].what, HasSubstr("fix the Service kurl/ekco"));

  // Another CA in the Secret than in the configuration: updated at the version read.
  const webhook::CaPair other{
      .cert_pem = "-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n", .key_pem = "key"};
  const WebhookPlan rotate =
      planWebhook({.ca = other, .service = service, .configuration = configuration}, on);
  ASSERT_EQ(rotate.changes.size(), 1U);
  EXPECT_EQ(rotate.changes[0].object, WebhookObject::kConfiguration);
  EXPECT_EQ(rotate.changes[0].step, WebhookStep::kUpdate);
  EXPECT_EQ(rotate.changes[0].resource_version, "7");

  // No overrides: the configuration deleted at the version read; the Service is not looked at.
  const WebhookPlan gone = planWebhook({.configuration = configuration}, off);
  ASSERT_EQ(gone.changes.size(), 1U);
  EXPECT_EQ(gone.changes[0].step, WebhookStep::kDelete);
  EXPECT_EQ(gone.changes[0].resource_version, "7");
  EXPECT_FALSE(gone.status.contains("service"));
  EXPECT_TRUE(planWebhook({}, off).changes.empty());

  // A dry run before the CA exists: the Service only (the caBundle is not known yet).
  const WebhookPlan early = planWebhook({}, on);
  ASSERT_EQ(early.changes.size(), 1U);
  EXPECT_EQ(early.changes[0].object, WebhookObject::kService);
  EXPECT_FALSE(early.status.contains("configuration"));
}

// Backed by nodes (agents from the packages): the serving agents listed, one slice per family,
// the Endpoints beside them, the Service's selector removed and the controller's slices gone.
TEST(PlanWebhook, BackedByNodesListsOnlyTheServingAgents) {
  const WebhookConfigOptions on{
      .ns = "kurl", .enabled = true, .target_port = 6445, .backing = WebhookBacking::kNodes};
  const webhook::CaPair ca{.cert_pem = kCa, .key_pem = "key"};
  json service = webhook::desiredService("kurl", 6445);  // as the DaemonSet had it
  service["metadata"]["resourceVersion"] = "3";
  json configuration = webhook::desiredConfiguration("kurl", kCa);
  const json theirs = {
      {"metadata",
       {{"name", "ekco-x7k2p"},
        {"resourceVersion", "5"},
        {"labels",
         {{"kubernetes.io/service-name", "ekco"},
          {"endpointslice.kubernetes.io/managed-by", "endpointslice-controller.k8s.io"}}}}}};
  WebhookView view{.ca = ca,
                   .service = service,
                   .configuration = configuration,
                   .slices = {theirs},
                   .nodes = {{.name = "cp-1", .address = "10.0.0.1", .serving = true},
                             {.name = "cp-2", .address = "10.0.0.2", .why = "connect: refused"},
                             {.name = "cp-3", .address = "fd00::3", .serving = true}}};
  const WebhookPlan plan = planWebhook(view, on);
  std::vector<std::string> whats;
  for (const WebhookChange& c : plan.changes) whats.push_back(c.what);
  const std::string who =
      "serving: cp-1 10.0.0.1, cp-3 fd00::3; not serving: cp-2 (connect: refused)";
  EXPECT_THAT(
      whats,
      ::testing::ElementsAre(
          "fix the Service kurl/ekco (port 443 -> 6445, no selector: ekco lists the serving "
          "agents)",
          "delete the EndpointSlice kurl/ekco-x7k2p (made for the Service's former selector)",
          "create the EndpointSlice kurl/ekco-webhook-ipv4 (" + who + ")",
          "create the EndpointSlice kurl/ekco-webhook-ipv6 (" + who + ")",
          "create the Endpoints kurl/ekco (" + who + ")"));
  EXPECT_THAT(plan.changes[0].want.dump(), HasSubstr(R"({"op":"remove","path":"/spec/selector"})"));
  EXPECT_EQ(plan.changes[1].resource_version, "5");
  EXPECT_EQ(plan.changes[2].want["endpoints"].size(), 1U);
  EXPECT_EQ(plan.changes[2].want["endpoints"][0]["addresses"][0], "10.0.0.1");
  EXPECT_EQ(plan.changes[3].want["endpoints"][0]["addresses"][0], "fd00::3");
  EXPECT_EQ(plan.changes[4].want["subsets"][0]["addresses"].size(), 2U);
  EXPECT_EQ(plan.status["endpoints"]["backing"], "nodes");
  EXPECT_EQ(plan.status["endpoints"]["nodes"][1]["why"], "connect: refused");

  // Written: nothing more to do. cp-3 stops serving: out of both lists, its slice deleted.
  view.service = webhook::desiredService("kurl", 6445, false);
  view.slices = {plan.changes[2].want, plan.changes[3].want};
  view.endpoints = plan.changes[4].want;
  EXPECT_TRUE(planWebhook(view, on).changes.empty());
  view.nodes[2] = {.name = "cp-3", .address = "fd00::3", .why = "TLS: handshake timed out"};
  whats.clear();
  for (const WebhookChange& c : planWebhook(view, on).changes) whats.push_back(c.what);
  EXPECT_THAT(whats, ::testing::ElementsAre(
                         "delete the EndpointSlice kurl/ekco-webhook-ipv6 (no IPv6 agent serves)",
                         ::testing::StartsWith("update the Endpoints kurl/ekco (serving: cp-1 "
                                               "10.0.0.1; not serving: cp-2 (connect: refused), "
                                               "cp-3 (TLS: handshake timed out))")));

  // Backed by the DaemonSet's pods again: ekco's slices go, the controller's stay.
  const WebhookConfigOptions pods{.ns = "kurl", .enabled = true, .target_port = 6445};
  view.service = webhook::desiredService("kurl", 6445);
  view.slices = {theirs, plan.changes[2].want};
  whats.clear();
  for (const WebhookChange& c : planWebhook(view, pods).changes) whats.push_back(c.what);
  EXPECT_THAT(whats, ::testing::ElementsAre("delete the EndpointSlice kurl/ekco-webhook-ipv4 (the "
                                            "DaemonSet's pods back the Service)"));
}

TEST(WebhookObjects, TheConfigurationIsWhatTheIssueAsksFor) {
  const json c = webhook::desiredConfiguration("kurl", kCa);
  ASSERT_EQ(c["webhooks"].size(), 1u);
  const json& h = c["webhooks"][0];
  EXPECT_EQ(c["metadata"]["name"], "pod-image-overrides.kurl.sh");
  EXPECT_EQ(h["clientConfig"]["service"], json({{"namespace", "kurl"},
                                                {"name", "ekco"},
                                                {"path", "/pod-image-overrides"},
                                                {"port", 443}}));
  EXPECT_EQ(*kube::base64Decode(h["clientConfig"]["caBundle"].get<std::string>()), kCa);
  EXPECT_EQ(h["rules"][0]["operations"], json({"CREATE", "UPDATE"}));
  EXPECT_EQ(h["rules"][0]["resources"], json({"pods"}));
  EXPECT_EQ(h["failurePolicy"], "Ignore");
  EXPECT_EQ(h["sideEffects"], "None");
  EXPECT_EQ(h["timeoutSeconds"], 10);
  EXPECT_EQ(h["matchPolicy"], "Equivalent");
  EXPECT_EQ(h["admissionReviewVersions"], json({"v1"}));
  // Every namespace, as EKCO: kube-proxy's and coredns' images can be overridden too.
  EXPECT_FALSE(h.contains("namespaceSelector"));
  const json some = webhook::desiredConfiguration("kurl", kCa, {"rook-ceph", "openebs"});
  EXPECT_EQ(some["webhooks"][0]["namespaceSelector"]["matchExpressions"][0],
            json({{"key", "kubernetes.io/metadata.name"},
                  {"operator", "NotIn"},
                  {"values", {"rook-ceph", "openebs"}}}));
}

class WebhookConfigTest : public ::testing::Test {
 protected:
  WebhookConfigController controller(bool enabled, bool dry_run = false) {
    return WebhookConfigController(
        kube_, clock_,
        {.ns = "kurl",
         .enabled = enabled,
         .target_port = 6445,
         .effects = {
             .dry_run = dry_run,
             .is_leader_fresh = [this] { return fresh_; },
             .record_event = [this](const kube::EventSpec& e) { events_.push_back(e.reason); },
             .count_action = [this](std::string_view kind) { actions_.emplace_back(kind); }}});
  }
  std::optional<json> configuration() const {
    return kube_.object(kMutatingWebhookConfigurations, "", "pod-image-overrides.kurl.sh");
  }
  std::optional<json> secret() const {
    return kube_.object(kube::resources::kSecrets, "kurl", "ekco-webhook-ca");
  }
  std::string caBundle() const {
    return *kube::base64Decode(
        (*configuration())["webhooks"][0]["clientConfig"]["caBundle"].get<std::string>());
  }
  json caSecretWith(const pki::KeyPair& ca) {
    return webhook::caSecret("kurl", {.cert_pem = ca.cert_pem, .key_pem = ca.key_pem});
  }

  FakeKube kube_;
  base::SystemClock clock_;
  bool fresh_ = true;
  std::vector<std::string> events_;
  std::vector<std::string> actions_;
};

TEST_F(WebhookConfigTest, CreatesTheCaTheServiceAndTheConfigurationThenRestsUntilDrift) {
  auto c = controller(true);
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "changed");
  ASSERT_TRUE(secret());
  auto ca = webhook::caFromSecret(*secret());
  ASSERT_TRUE(ca) << ca.error().message();
  ASSERT_TRUE(configuration());
  EXPECT_EQ(caBundle(), ca->cert_pem);
  auto service = kube_.object(kube::resources::kServices, "kurl", "ekco");
  ASSERT_TRUE(service);
  EXPECT_EQ((*service)["spec"]["ports"][0]["targetPort"], 6445);
  EXPECT_EQ((*service)["spec"]["selector"], json({{"app.kubernetes.io/name", "ekco"}}));
  EXPECT_EQ(events_, (std::vector<std::string>{"WebhookCACreated", "WebhookServiceCreated",
                                               "WebhookConfigurationCreated"}));

  r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->summary, "webhook configured");
  EXPECT_EQ(kube_.count(Verb::kCreate), 3);
  EXPECT_EQ(kube_.count(Verb::kUpdate), 0);

  // Someone edits the caBundle: put back to the Secret's CA.
  json edited = *configuration();
  edited["webhooks"][0]["clientConfig"]["caBundle"] = "Ym9ndXM=";
  kube_.put(kMutatingWebhookConfigurations, edited);
  r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(caBundle(), ca->cert_pem);
  EXPECT_EQ(events_.back(), "WebhookConfigurationUpdated");
  EXPECT_EQ(c.status()["configuration"]["present"], true);
  EXPECT_THAT(c.status()["ca"]["subject"].get<std::string>(), HasSubstr("ekco-webhook-ca"));
}

TEST_F(WebhookConfigTest, AnExistingCaIsUsedAndNeverReplaced) {
  auto theirs = pki::createCa({.common_name = "ekco-webhook-ca", .now = clock_.wallNow()});
  ASSERT_TRUE(theirs);
  kube_.put(kube::resources::kSecrets, caSecretWith(*theirs));
  auto c = controller(true);
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(caBundle(), theirs->cert_pem);
  EXPECT_EQ(*kube::base64Decode((*secret())["data"]["tls.crt"].get<std::string>()),
            theirs->cert_pem);
}

TEST_F(WebhookConfigTest, ALostCreateRaceUsesTheWinnersCa) {
  // Another agent creates the Secret between this one's read and its create.
  auto theirs = pki::createCa({.common_name = "ekco-webhook-ca", .now = clock_.wallNow()});
  ASSERT_TRUE(theirs);
  kube_.afterNext(Verb::kGet, [&] { kube_.put(kube::resources::kSecrets, caSecretWith(*theirs)); });
  auto c = controller(true);
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(caBundle(), theirs->cert_pem);
  EXPECT_THAT(events_, ::testing::Not(::testing::Contains("WebhookCACreated")));
}

TEST_F(WebhookConfigTest, AnUnreadableCaSecretIsLeftAloneAndStopsThePass) {
  json broken = webhook::caSecret("kurl", {.cert_pem = "not pem", .key_pem = "k"});
  kube_.put(kube::resources::kSecrets, broken);
  auto c = controller(true);
  auto r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("left alone (delete the Secret for a new CA)"));
  EXPECT_EQ((*secret())["data"], broken["data"]);
  EXPECT_FALSE(configuration());
  EXPECT_EQ(kube_.count(Verb::kCreate), 0);
}

TEST_F(WebhookConfigTest, NoOverridesDeletesTheConfigurationButKeepsTheCaAndService) {
  ASSERT_TRUE(controller(true).reconcile());
  ASSERT_TRUE(configuration());
  auto off = controller(false);
  auto r = off.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(configuration());
  EXPECT_TRUE(secret());
  EXPECT_TRUE(kube_.object(kube::resources::kServices, "kurl", "ekco"));
  EXPECT_EQ(events_.back(), "WebhookConfigurationDeleted");
  r = off.reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->summary, "webhook not configured (no overrides)");
  EXPECT_EQ(kube_.count(Verb::kDelete), 1);
}

TEST_F(WebhookConfigTest, ADryRunPlansAndWritesNothing) {
  auto c = controller(true, /*dry_run=*/true);
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->plan, HasSubstr("would create the CA Secret kurl/ekco-webhook-ca"));
  EXPECT_THAT(r->plan, HasSubstr("would create the Service kurl/ekco (port 443 -> 6445, "));
  EXPECT_EQ(r->summary, "would change (dry run)");
  EXPECT_EQ(kube_.count(Verb::kCreate), 0);

  ASSERT_TRUE(controller(true).reconcile());  // a real pass
  json edited = *configuration();
  edited["webhooks"][0]["timeoutSeconds"] = 30;
  kube_.put(kMutatingWebhookConfigurations, edited);
  r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_THAT(r->plan, HasSubstr("would update the MutatingWebhookConfiguration"));
  EXPECT_EQ((*configuration())["webhooks"][0]["timeoutSeconds"], 30);
  auto off = controller(false, /*dry_run=*/true);
  r = off.reconcile();
  ASSERT_TRUE(r);
  EXPECT_THAT(r->plan, HasSubstr("would delete the MutatingWebhookConfiguration"));
  EXPECT_TRUE(configuration());
}

TEST_F(WebhookConfigTest, NothingIsWrittenWithoutAFreshLease) {
  fresh_ = false;
  auto c = controller(true);
  auto r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("leadership is not fresh"));
  EXPECT_EQ(kube_.count(Verb::kCreate), 0);
}

TEST_F(WebhookConfigTest, AConcurrentEditOfTheConfigurationIsLookedAtAgain) {
  ASSERT_TRUE(controller(true).reconcile());
  json edited = *configuration();
  edited["webhooks"][0]["failurePolicy"] = "Fail";
  kube_.put(kMutatingWebhookConfigurations, edited);
  // Between this pass's read and its update, someone writes again.
  kube_.afterNext(Verb::kGet, [] {});
  kube_.afterNext(Verb::kGet, [] {});
  kube_.afterNext(Verb::kGet, [&] { kube_.put(kMutatingWebhookConfigurations, edited); });
  auto c = controller(true);
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "an object changed meanwhile; looking again");
  EXPECT_EQ(r->requeue_after, std::chrono::milliseconds(1000));
  r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ((*configuration())["webhooks"][0]["failurePolicy"], "Ignore");
}

}  // namespace
}  // namespace ekco::agent
