// CustomResourceDefinitions in kubesim (crd.h, schema.h): the API of a custom resource follows
// its CRD; writes are pruned, defaulted and validated as kube-apiserver's apiextensions server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/api_tests/api_test_support.h"
#include "tests/kubesim/validation/crd.h"
#include "tests/kubesim/validation/schema.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using testing::ApiTest;
using ::testing::HasSubstr;

const char* const kCrds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const char* const kCronTabs = "/apis/stable.example.com/v1/namespaces/default/crontabs";

json cronTabDefinition() {
  return json::parse(R"({
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "crontabs.stable.example.com"},
    "spec": {
      "group": "stable.example.com",
      "scope": "Namespaced",
      "names": {"plural": "crontabs", "kind": "CronTab", "shortNames": ["ct"]},
      "versions": [{
        "name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {
          "type": "object",
          "properties": {
            "spec": {
              "type": "object",
              "required": ["cronSpec"],
              "properties": {
                "cronSpec": {"type": "string", "pattern": "^(\\S+ ){4}\\S+$"},
                "image": {"type": "string", "default": "busybox"},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                "port": {"x-kubernetes-int-or-string": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
              }
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
          }
        }},
        "subresources": {
          "status": {},
          "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"}
        }
      }]
    }
  })");
}

json cronTab(const std::string& name, json spec) {
  return {{"apiVersion", "stable.example.com/v1"},
          {"kind", "CronTab"},
          {"metadata", {{"name", name}}},
          {"spec", std::move(spec)}};
}

class CrdTest : public ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    start();
  }
  void define() {
    auto created = client_->post(kCrds, cronTabDefinition());
    ASSERT_EQ(created.status, 201) << created.body;
  }
};

TEST_F(CrdTest, ACustomResourceIsNotFoundBeforeItsDefinitionAndServedAfter) {
  EXPECT_EQ(client_->get(kCronTabs).status, 404);
  EXPECT_EQ(client_->post(kCronTabs, cronTab("a", {{"cronSpec", "* * * * *"}})).status, 404);
  EXPECT_EQ(client_->get("/apis/stable.example.com/v1").status, 404);
  EXPECT_FALSE(server_->put(cronTab("a", {{"cronSpec", "* * * * *"}})));
  define();
  auto crd = client_->get(std::string(kCrds) + "/crontabs.stable.example.com").json();
  ASSERT_EQ(crd["status"]["conditions"].size(), 2u);
  EXPECT_EQ(crd["status"]["conditions"][0]["type"], "NamesAccepted");
  EXPECT_EQ(crd["status"]["conditions"][1]["type"], "Established");
  EXPECT_EQ(crd["status"]["conditions"][1]["status"], "True");
  EXPECT_EQ(crd["status"]["acceptedNames"]["singular"], "crontab");
  EXPECT_EQ(crd["status"]["acceptedNames"]["listKind"], "CronTabList");
  EXPECT_EQ(crd["status"]["storedVersions"], json({"v1"}));
  auto discovery = client_->get("/apis/stable.example.com/v1").json();
  ASSERT_EQ(discovery["resources"].size(), 3u);
  EXPECT_EQ(discovery["resources"][0]["name"], "crontabs");
  EXPECT_EQ(discovery["resources"][0]["shortNames"], json({"ct"}));
  EXPECT_EQ(discovery["resources"][1]["name"], "crontabs/status");
  EXPECT_EQ(discovery["resources"][2]["name"], "crontabs/scale");
  EXPECT_EQ(client_->post(kCronTabs, cronTab("a", {{"cronSpec", "* * * * *"}})).status, 201);
}

TEST_F(CrdTest, WritesArePrunedAndDefaulted) {
  define();
  auto created = client_->post(kCronTabs, cronTab("a", {{"cronSpec", "* * * * *"},
                                                        {"unknown", 1},
                                                        {"labels", {{"x", "y"}}},
                                                        {"free", {{"any", {{"thing", 1}}}}},
                                                        {"replicas", nullptr}}));
  ASSERT_EQ(created.status, 201) << created.body;
  json spec = created.json()["spec"];
  EXPECT_EQ(spec, json({{"cronSpec", "* * * * *"},
                        {"image", "busybox"},
                        {"labels", {{"x", "y"}}},
                        {"free", {{"any", {{"thing", 1}}}}}}));
  json top = cronTab("b", {{"cronSpec", "* * * * *"}});
  top["extraTopLevel"] = true;
  EXPECT_FALSE(client_->post(kCronTabs, top).json().contains("extraTopLevel"));
}

TEST_F(CrdTest, InvalidObjectsAre422WithTheCausesOfTheRealServer) {
  define();
  auto r = client_->post(kCronTabs, cronTab("bad", {{"cronSpec", 5},
                                                    {"replicas", 11},
                                                    {"port", true},
                                                    {"tags", {"a", "b", "c"}},
                                                    {"labels", {{"k", 1}}}}));
  ASSERT_EQ(r.status, 422) << r.body;
  json status = r.json();
  EXPECT_EQ(status["reason"], "Invalid");
  EXPECT_EQ(status["details"]["kind"], "CronTab");
  EXPECT_EQ(status["details"]["group"], "stable.example.com");
  EXPECT_EQ(status["details"]["name"], "bad");
  json causes = status["details"]["causes"];
  std::map<std::string, std::pair<std::string, std::string>> by_field;
  for (const json& c : causes) by_field[c["field"]] = {c["reason"], c["message"]};
  EXPECT_EQ(by_field["spec.cronSpec"],
            std::make_pair(std::string("FieldValueTypeInvalid"),
                           std::string("Invalid value: \"integer\": spec.cronSpec in body must be "
                                       "of type string: \"integer\"")));
  EXPECT_EQ(by_field["spec.replicas"].second,
            "Invalid value: 11: spec.replicas in body should be less than or equal to 10");
  EXPECT_EQ(by_field["spec.port"].second,
            "Invalid value: \"boolean\": spec.port in body must be of type integer,string: "
            "\"boolean\"");
  EXPECT_EQ(by_field["spec.tags"], std::make_pair(std::string("FieldValueTooMany"),
                                                  std::string("Too many: 3: must have at most 2 "
                                                              "items")));
  EXPECT_EQ(by_field["spec.labels.k"].first, "FieldValueTypeInvalid");
  EXPECT_THAT(status["message"].get<std::string>(),
              HasSubstr("CronTab.stable.example.com \"bad\" is invalid: ["));
  EXPECT_FALSE(server_->get("crontabs.stable.example.com", "default", "bad"));

  auto one = client_->post(kCronTabs, cronTab("one", {{"cronSpec", "nope"}}));
  EXPECT_EQ(one.json()["message"],
            "CronTab.stable.example.com \"one\" is invalid: spec.cronSpec: Invalid value: "
            "\"nope\": spec.cronSpec in body should match '^(\\S+ ){4}\\S+$'");
  auto missing = client_->post(kCronTabs, cronTab("none", json::object()));
  EXPECT_EQ(missing.json()["message"],
            "CronTab.stable.example.com \"none\" is invalid: spec.cronSpec: Required value");

  // Updates are validated too.
  ASSERT_EQ(client_->post(kCronTabs, cronTab("ok", {{"cronSpec", "* * * * *"}})).status, 201);
  auto patched =
      client_->request("PATCH", std::string(kCronTabs) + "/ok", R"({"spec":{"replicas":"three"}})",
                       "application/merge-patch+json");
  EXPECT_EQ(patched.status, 422);
  EXPECT_EQ(client_
                ->request("PATCH", std::string(kCronTabs) + "/ok", R"({"spec":{"replicas":1}})",
                          "application/strategic-merge-patch+json")
                .status,
            415);
}

TEST_F(CrdTest, StatusAndScaleSubresourcesFollowTheDefinition) {
  define();
  json body = cronTab("s", {{"cronSpec", "* * * * *"}, {"replicas", 2}});
  body["status"] = {{"phase", "dropped on create"}};
  auto created = client_->post(kCronTabs, body).json();
  EXPECT_FALSE(created.contains("status"));
  EXPECT_EQ(created["metadata"]["generation"], 1);
  auto status = client_->request("PATCH", std::string(kCronTabs) + "/s/status",
                                 R"({"status":{"replicas":2,"selector":"app=s"}})",
                                 "application/merge-patch+json");
  ASSERT_EQ(status.status, 200) << status.body;
  EXPECT_EQ(status.json()["metadata"]["generation"], 1);
  auto scale = client_->get(std::string(kCronTabs) + "/s/scale").json();
  EXPECT_EQ(scale["kind"], "Scale");
  EXPECT_EQ(scale["spec"]["replicas"], 2);
  EXPECT_EQ(scale["status"], json({{"replicas", 2}, {"selector", "app=s"}}));
  scale["spec"]["replicas"] = 5;
  ASSERT_EQ(client_->put(std::string(kCronTabs) + "/s/scale", scale).status, 200);
  auto after = server_->get("crontabs.stable.example.com", "default", "s");
  ASSERT_TRUE(after);
  EXPECT_EQ((*after)["spec"]["replicas"], 5);
  EXPECT_EQ((*after)["metadata"]["generation"], 2);
  scale["spec"]["replicas"] = 50;  // beyond the schema's maximum
  scale["metadata"].erase("resourceVersion");
  EXPECT_EQ(client_->put(std::string(kCronTabs) + "/s/scale", scale).status, 422);
}

TEST_F(CrdTest, DeletingTheDefinitionDeletesItsObjectsAndItsApi) {
  define();
  ASSERT_EQ(client_->post(kCronTabs, cronTab("a", {{"cronSpec", "* * * * *"}})).status, 201);
  std::uint64_t rv = server_->store().resourceVersion();
  ASSERT_EQ(client_->request("DELETE", std::string(kCrds) + "/crontabs.stable.example.com").status,
            200);
  EXPECT_EQ(client_->get(kCronTabs).status, 404);
  EXPECT_EQ(client_->get("/apis/stable.example.com/v1").status, 404);
  std::set<std::string> groups;
  const json apis = client_->get("/apis").json();
  for (const json& g : apis["groups"]) groups.insert(g["name"]);
  EXPECT_EQ(groups.count("stable.example.com"), 0u);
  std::uint64_t scanned = 0;
  auto events = server_->store().eventsAfter(rv, "stable.example.com/v1/crontabs", &scanned);
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].type, "DELETED");
  define();
  EXPECT_TRUE(client_->get(kCronTabs).json()["items"].empty());
}

TEST_F(CrdTest, AnInvalidDefinitionIs422) {
  json crd = cronTabDefinition();
  crd["metadata"]["name"] = "crontab.example.com";
  crd["spec"]["versions"][0].erase("schema");
  crd["spec"]["versions"][0]["storage"] = false;
  auto r = client_->post(kCrds, crd);
  ASSERT_EQ(r.status, 422);
  std::string message = r.json()["message"];
  EXPECT_THAT(message, HasSubstr("CustomResourceDefinition.apiextensions.k8s.io "
                                 "\"crontab.example.com\" is invalid: ["));
  EXPECT_THAT(message, HasSubstr("metadata.name: Invalid value: \"crontab.example.com\": must be "
                                 "spec.names.plural+\".\"+spec.group"));
  EXPECT_THAT(message, HasSubstr("spec.versions[0].schema.openAPIV3Schema: Required value"));
  EXPECT_THAT(message, HasSubstr("must have exactly one version marked as storage version"));
}

TEST_F(CrdTest, ThePreloadedDefinitionsAreObjectsAndCanBeDeleted) {
  auto list = client_->get(kCrds).json();
  std::set<std::string> names;
  for (const json& c : list["items"]) names.insert(c["metadata"]["name"]);
  EXPECT_EQ(names,
            (std::set<std::string>{
                "alertmanagers.monitoring.coreos.com", "cephblockpools.ceph.rook.io",
                "cephclusters.ceph.rook.io", "cephfilesystems.ceph.rook.io",
                "cephobjectstores.ceph.rook.io", "podmonitors.monitoring.coreos.com",
                "prometheuses.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com"}));
  ASSERT_TRUE(server_->put({{"apiVersion", "monitoring.coreos.com/v1"},
                            {"kind", "Prometheus"},
                            {"metadata", {{"name", "k8s"}, {"namespace", "monitoring"}}},
                            {"spec", {{"replicas", 2}}}}));
  auto scale =
      client_->get("/apis/monitoring.coreos.com/v1/namespaces/monitoring/prometheuses/k8s/scale");
  EXPECT_EQ(scale.json()["spec"]["replicas"], 2);
  ASSERT_EQ(
      client_->request("DELETE", std::string(kCrds) + "/prometheuses.monitoring.coreos.com").status,
      200);
  EXPECT_FALSE(server_->get("prometheuses.monitoring.coreos.com", "monitoring", "k8s"));
  EXPECT_EQ(client_->get("/apis/monitoring.coreos.com/v1/prometheuses").status, 404);
}

TEST(Schema, JsonPathSelectsFieldsIndexesAndFilters) {
  json obj = {{"status",
               {{"conditions",
                 {{{"type", "Ready"}, {"status", "True"}}, {{"type", "Synced"}, {"status", "No"}}}},
                {"count", 3}}}};
  EXPECT_EQ(crd::jsonPath(obj, ".status.count"), std::vector<json>{3});
  EXPECT_EQ(crd::jsonPath(obj, ".status.conditions[1].type"), std::vector<json>{"Synced"});
  EXPECT_EQ(crd::jsonPath(obj, ".status.conditions[*].status"), (std::vector<json>{"True", "No"}));
  EXPECT_EQ(crd::jsonPath(obj, ".status.conditions[?(@.type == 'Ready')].status"),
            std::vector<json>{"True"});
  EXPECT_EQ(crd::jsonPath(obj, "{.status.conditions[?(@.type==\"Synced\")].status}"),
            std::vector<json>{"No"});
  EXPECT_TRUE(crd::jsonPath(obj, ".status.missing").empty());
}

TEST(Schema, BoundsPrintAsGoPrintsFloats) {
  json schema = {
      {"type", "object"},
      {"properties",
       {{"low", {{"type", "number"}, {"minimum", 0.5}}},
        {"high", {{"type", "integer"}, {"maximum", 1000000}, {"exclusiveMaximum", true}}},
        {"name", {{"type", "string"}, {"minLength", 3}, {"maxLength", 4}}}}}};
  auto errors = schema::validate(schema, {{"low", 0.25}, {"high", 1000000}, {"name", "ab"}});
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].field, "high");
  EXPECT_EQ(errors[0].body, "Invalid value: 1000000: high in body should be less than 1e+06");
  EXPECT_EQ(errors[1].body,
            "Invalid value: 0.25: low in body should be greater than or equal to 0.5");
  EXPECT_EQ(errors[2].body, "Invalid value: \"ab\": name in body should be at least 3 chars long");
  auto long_name = schema::validate(schema, {{"name", "abcde"}});
  ASSERT_EQ(long_name.size(), 1u);
  EXPECT_EQ(long_name[0].reason, "FieldValueTooLong");
}

TEST(Schema, AggregateListsSeveralErrorsInBrackets) {
  EXPECT_EQ(schema::aggregate({{"FieldValueRequired", "spec.a", "Required value"}}),
            "spec.a: Required value");
  EXPECT_EQ(schema::aggregate({{"FieldValueRequired", "spec.a", "Required value"},
                               {"FieldValueRequired", "spec.b", "Required value"}}),
            "[spec.a: Required value, spec.b: Required value]");
}

}  // namespace
}  // namespace ekco::kubesim
