// The fieldmanager's pure pieces: FieldsV1 sets, Compare with the real server's `.` entries,
// Apply's merge, prune and conflicts (the kubectl and client tests drive them over HTTPS).
#include "tests/kubesim/apply/managed_fields.h"

#include <gtest/gtest.h>

namespace ekco::kubesim::managed {
namespace {

using nlohmann::json;

Writer writer(const std::string& manager, const std::string& api_version = "v1") {
  return Writer{.manager = manager, .api_version = api_version, .now = "2024-01-01T00:00:00Z"};
}

TEST(ManagedFields, FieldsV1RoundTripsAndPathsPrintAsFieldpath) {
  json fields = json::parse(R"({"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},
      "f:image":{}}}},"f:metadata":{"f:finalizers":{"v:\"x\"":{}}}})");
  FieldSet set = FieldSet::fromFieldsV1(fields);
  EXPECT_EQ(set.toFieldsV1(), fields);
  std::vector<std::string> printed;
  for (const Path& p : set.paths()) printed.push_back(pathString(p));
  EXPECT_EQ(printed, (std::vector<std::string>{".metadata.finalizers[=\"x\"]",
                                               ".spec.containers[name=\"c\"]",
                                               ".spec.containers[name=\"c\"].image"}));
}

TEST(ManagedFields, ACreateOwnsWhatItAddedWithMapsAndNewItemsAsMembers) {
  json d = json::parse(R"({"apiVersion":"apps/v1","kind":"Deployment",
      "metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},
      "spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},
              "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%"}},
              "template":{"spec":{"containers":[{"name":"c","image":"i",
                                                  "resources":{}}]}}}})");
  recordUpdate(json(), d, writer("maker", "apps/v1"), json(), true);
  ASSERT_EQ(d["metadata"]["managedFields"].size(), 1u);
  const json& e = d["metadata"]["managedFields"][0];
  EXPECT_EQ(e["operation"], "Update");
  EXPECT_EQ(e["time"], "2024-01-01T00:00:00Z");
  EXPECT_EQ(e["fieldsV1"], json::parse(R"({
      "f:metadata":{"f:labels":{".":{},"f:app":{}}},
      "f:spec":{"f:replicas":{},"f:selector":{},
                "f:strategy":{"f:rollingUpdate":{".":{},"f:maxSurge":{}},"f:type":{}},
                "f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},
                    "f:image":{},"f:name":{},"f:resources":{}}}}}}})"));
}

TEST(ManagedFields, ApplyPrunesWhatOnlyItOwnedAndConflictsOnChangedForeignFields) {
  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "x"}, {"namespace", "default"}}},
             {"data", {{"a", "1"}, {"b", "2"}}}};
  recordUpdate(json(), cm, writer("creator"), json(), false);
  json same = cm;
  same["metadata"].erase("managedFields");
  // Applying the same values shares them: no conflict.
  Applied shared = apply(cm, same, writer("applier"), false, false);
  ASSERT_FALSE(shared.error);
  EXPECT_EQ(shared.object["metadata"]["managedFields"].size(), 2u);
  // Changing `a` conflicts with the creator.
  json changed = same;
  changed["data"]["a"] = "9";
  Applied conflict = apply(shared.object, changed, writer("applier"), false, false);
  ASSERT_TRUE(conflict.error);
  EXPECT_EQ(conflict.error->code, 409);
  EXPECT_EQ(conflict.error->body["message"],
            "Apply failed with 1 conflict: conflict with \"creator\" using v1: .data.a");
  // Forced, then `b` dropped from the configuration: the creator still owns it, so it stays.
  Applied forced = apply(shared.object, changed, writer("applier"), true, false);
  ASSERT_FALSE(forced.error);
  json without_b = changed;
  without_b["data"].erase("b");
  Applied pruned = apply(forced.object, without_b, writer("applier"), false, false);
  ASSERT_FALSE(pruned.error);
  EXPECT_EQ(pruned.object["data"], json({{"a", "9"}, {"b", "2"}}));
  // Owned by the applier alone, a dropped field goes.
  json only = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", "y"}}},
               {"data", {{"c", "3"}, {"d", "4"}}}};
  Applied first = apply(json(), only, writer("applier"), false, false);
  only["data"].erase("d");
  Applied second = apply(first.object, only, writer("applier"), false, false);
  EXPECT_EQ(second.object["data"], json({{"c", "3"}}));
}

TEST(ManagedFields, ManagerComesFromTheQueryOrTheUserAgentsProduct) {
  EXPECT_EQ(managerFor("mine", "kubectl/v1.32.4 (linux/amd64)"), "mine");
  EXPECT_EQ(managerFor("", "kubectl/v1.32.4 (linux/amd64)"), "kubectl");
  EXPECT_EQ(managerFor("", "OpenAPI-Generator/31.0.0/python"), "OpenAPI-Generator");
}

}  // namespace
}  // namespace ekco::kubesim::managed
