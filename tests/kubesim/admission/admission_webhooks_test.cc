// Which webhooks a request selects (rules, scope, selectors, service resolution) and the
// configuration's validation: the pure half of admission_webhooks.h.
#include "tests/kubesim/admission/admission_webhooks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace ekco::kubesim::webhooks {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;

ResourceInfo resource(const std::string& plural, const std::string& kind, bool namespaced) {
  ResourceInfo r;
  r.version = "v1";
  r.plural = plural;
  r.kind = kind;
  r.namespaced = namespaced;
  return r;
}

const ResourceInfo kPods = resource("pods", "Pod", true);
const ResourceInfo kNamespaces = resource("namespaces", "Namespace", false);
const ResourceInfo kNodes = resource("nodes", "Node", false);

json hook(const std::string& name, json rules, json extra = json::object()) {
  json h = {{"name", name},
            {"clientConfig", {{"url", "https://127.0.0.1:9443/m"}}},
            {"rules", std::move(rules)},
            {"sideEffects", "None"},
            {"admissionReviewVersions", {"v1"}}};
  h.update(extra);
  return h;
}

json rule(json resources, json operations = {"CREATE", "UPDATE"}, json groups = {""},
          json versions = {"v1"}) {
  return {{"operations", operations},
          {"apiGroups", groups},
          {"apiVersions", versions},
          {"resources", resources}};
}

class Select : public ::testing::Test {
 protected:
  // The webhooks hooks_ selects for a request on `r` in namespace "team", resolved against
  // stored_ (and `slices`, when given).
  std::vector<Target> targets(const ResourceInfo& r, const std::string& op, const std::string& sub,
                              const json& object, const json& ns_labels = json::object(),
                              const SliceLister& slices = {}) {
    json config = {{"webhooks", hooks_}};
    json ns = {{"metadata", {{"name", "team"}, {"labels", ns_labels}}}};
    Attributes attrs{.resource = &r,
                     .operation = op,
                     .subresource = sub,
                     .ns = r.namespaced ? "team" : "",
                     .name = "x",
                     .dry_run = false};
    auto lookup = [this](const std::string& key, const std::string& ns_name,
                         const std::string& name) -> const json* {
      auto it = stored_.find(key + "/" + ns_name + "/" + name);
      return it == stored_.end() ? nullptr : &it->second;
    };
    return select({&config}, attrs, r.namespaced ? &ns : nullptr, object, json(), lookup, slices);
  }
  std::vector<std::string> names(const ResourceInfo& r, const std::string& op,
                                 const std::string& sub, const json& object,
                                 const json& ns_labels = json::object()) {
    std::vector<std::string> out;
    for (const Target& t : targets(r, op, sub, object, ns_labels)) {
      out.push_back(t.name + (t.resolve_error.empty() ? "" : " ! " + t.resolve_error));
    }
    return out;
  }

  json hooks_ = json::array();
  std::map<std::string, json> stored_;
};

TEST_F(Select, RulesMatchOperationResourceSubresourceAndScope) {
  hooks_ = {hook("pods.a.test", {rule({"pods"})}),
            hook("status.a.test", {rule({"pods/status"})}),
            hook("all-subs.a.test", {rule({"pods/*"})}),
            hook("everything.a.test", {rule({"*/*"}, {"*"}, {"*"}, {"*"})}),
            hook("cluster.a.test", {rule({"*"}, {"*"}, {"*"}, {"*"})}),
            hook("apps.a.test", {rule({"pods"}, {"CREATE"}, {"apps"})}),
            hook("delete.a.test", {rule({"pods"}, {"DELETE"})})};
  hooks_[4]["rules"][0]["scope"] = "Cluster";
  // "pods/*" is ("pods", "*"), and "*" matches the empty subresource too (rules.go Matcher).
  EXPECT_THAT(names(kPods, "CREATE", "", json::object()),
              ElementsAre("pods.a.test", "all-subs.a.test", "everything.a.test"));
  EXPECT_THAT(names(kPods, "UPDATE", "status", json::object()),
              ElementsAre("status.a.test", "all-subs.a.test", "everything.a.test"));
  EXPECT_THAT(names(kNodes, "CREATE", "", json::object()),
              ElementsAre("everything.a.test", "cluster.a.test"));
}

TEST_F(Select, NamespaceAndObjectSelectors) {
  json not_system = {{"namespaceSelector",
                      {{"matchExpressions",
                        {{{"key", "kubernetes.io/metadata.name"},
                          {"operator", "NotIn"},
                          {"values", {"kube-system"}}}}}}}};
  json labelled = {{"objectSelector", {{"matchLabels", {{"app", "web"}}}}}};
  hooks_ = {hook("ns.a.test", {rule({"pods", "namespaces"})}, not_system),
            hook("obj.a.test", {rule({"pods"})}, labelled)};
  EXPECT_THAT(
      names(kPods, "CREATE", "", json::object(), {{"kubernetes.io/metadata.name", "kube-system"}}),
      ElementsAre());
  EXPECT_THAT(names(kPods, "CREATE", "", {{"metadata", {{"labels", {{"app", "web"}}}}}},
                    {{"kubernetes.io/metadata.name", "team"}}),
              ElementsAre("ns.a.test", "obj.a.test"));
  // A Namespace is matched by its own labels.
  EXPECT_THAT(names(kNamespaces, "CREATE", "",
                    {{"metadata", {{"labels", {{"kubernetes.io/metadata.name", "kube-system"}}}}}}),
              ElementsAre());
}

TEST_F(Select, AServiceResolvesThroughItsEndpointsByPortName) {
  hooks_ = {hook(
      "svc.a.test", {rule({"pods"})},
      {{"clientConfig", {{"service", {{"namespace", "web"}, {"name", "hook"}, {"port", 443}}}}}})};
  EXPECT_THAT(names(kPods, "CREATE", "", json::object()),
              ElementsAre("svc.a.test ! service \"hook\" not found"));
  stored_["/v1/services/web/hook"] = {{"spec", {{"ports", {{{"name", "https"}, {"port", 443}}}}}}};
  EXPECT_THAT(
      names(kPods, "CREATE", "", json::object()),
      ElementsAre("svc.a.test ! service \"web/hook\" has no endpoints for port 443 "
                  "(kubesim: create an EndpointSlice or Endpoints web/hook with the webhook "
                  "server's address)"));
  stored_["/v1/endpoints/web/hook"] = {{"subsets",
                                        {{{"addresses", {{{"ip", "127.0.0.1"}}}},
                                          {"ports", {{{"name", "https"}, {"port", 8443}}}}}}}};
  const auto resolved = targets(kPods, "CREATE", "", json::object());
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].host, "127.0.0.1");
  EXPECT_EQ(resolved[0].port, "8443");
  EXPECT_EQ(resolved[0].server_name, "hook.web.svc");
  EXPECT_EQ(resolved[0].url, "https://hook.web.svc:443?timeout=10s");
  EXPECT_EQ(resolved[0].target, "/?timeout=10s");
  EXPECT_TRUE(resolved[0].fail_closed);
}

// Where kube-proxy sends the call to the ClusterIP: a ready endpoint of the Service's
// EndpointSlices, before the Endpoints (the aggregator-routing resolver's source).
TEST_F(Select, AServiceResolvesThroughAReadyEndpointOfItsSlicesFirst) {
  hooks_ = {hook(
      "svc.a.test", {rule({"pods"})},
      {{"clientConfig", {{"service", {{"namespace", "web"}, {"name", "hook"}, {"port", 443}}}}}})};
  stored_["/v1/services/web/hook"] = {{"spec", {{"ports", {{{"name", "https"}, {"port", 443}}}}}}};
  stored_["/v1/endpoints/web/hook"] = {{"subsets",
                                        {{{"addresses", {{{"ip", "127.0.0.1"}}}},
                                          {"ports", {{{"name", "https"}, {"port", 8443}}}}}}}};
  const json slice = {
      {"metadata", {{"name", "hook-a"}, {"labels", {{"kubernetes.io/service-name", "hook"}}}}},
      {"ports", {{{"name", "https"}, {"port", 9443}}}},
      {"endpoints",
       {{{"addresses", {"127.0.0.2"}}, {"conditions", {{"ready", false}}}},
        {{"addresses", {"127.0.0.3"}}, {"conditions", {{"ready", true}}}}}}};
  json other_port = slice;
  other_port["ports"][0]["name"] = "metrics";
  std::vector<const json*> slices;
  auto lister = [&](const std::string& n, const std::string& service) {
    EXPECT_EQ(n, "web");
    EXPECT_EQ(service, "hook");
    return slices;
  };
  auto where = [&] {
    const auto resolved = targets(kPods, "CREATE", "", json::object(), json::object(), lister);
    EXPECT_EQ(resolved.size(), 1u);
    return resolved.empty() ? std::string() : resolved[0].host + ":" + resolved[0].port;
  };
  EXPECT_EQ(where(), "127.0.0.1:8443");  // no slice: the Endpoints
  slices = {&other_port};
  EXPECT_EQ(where(), "127.0.0.1:8443");  // a slice without the port's name: still the Endpoints
  slices = {&other_port, &slice};
  EXPECT_EQ(where(), "127.0.0.3:9443");  // the first ready endpoint of a slice with it
}

TEST(ValidateConfiguration, AValidOneHasNoErrorsAndDefaultsAreFilled) {
  json config = {{"webhooks", {hook("a.b.c", {rule({"pods"})})}}};
  EXPECT_TRUE(validateConfiguration(config).empty());
  applyConfigurationDefaults(config);
  EXPECT_EQ(config["webhooks"][0]["failurePolicy"], "Fail");
  EXPECT_EQ(config["webhooks"][0]["timeoutSeconds"], 10);
  EXPECT_EQ(config["webhooks"][0]["rules"][0]["scope"], "*");
}

TEST(ValidateConfiguration, EachRuleHasItsCause) {
  json bad = hook("a.b.c", {rule({"pods"}, {"PATCH"})},
                  {{"failurePolicy", "Maybe"}, {"sideEffects", "Some"}});
  bad["clientConfig"] = {{"service", {{"namespace", "web"}, {"path", "x"}, {"port", 70000}}}};
  std::vector<std::string> got;
  for (const FieldError& e : validateConfiguration({{"webhooks", {bad, hook("a.b.c", {})}}})) {
    got.push_back(e.field + ": " + e.body());
  }
  EXPECT_THAT(got, ::testing::IsSupersetOf(
                       {"webhooks[0].clientConfig.service.name: Required value",
                        "webhooks[0].clientConfig.service.path: Invalid value: \"x\": must start "
                        "with a '/'",
                        "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: "
                        "\"None\", \"NoneOnDryRun\"",
                        "webhooks[0].failurePolicy: Unsupported value: \"Maybe\": supported "
                        "values: \"Fail\", \"Ignore\"",
                        "webhooks[0].rules[0].operations[0]: Unsupported value: \"PATCH\": "
                        "supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
                        "webhooks[1].name: Duplicate value: \"a.b.c\""}));
}

}  // namespace
}  // namespace ekco::kubesim::webhooks
