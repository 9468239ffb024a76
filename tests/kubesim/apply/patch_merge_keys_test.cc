// Strategic merge patch merge keys that depend on the parent type: a ServiceSpec's ports merge
// by port, a container's by containerPort; lists without a key are replaced.
#include <gtest/gtest.h>

#include "tests/kubesim/apply/patch.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;

TEST(StrategicMergeKeys, ServicePortsMergeByPortAndContainerPortsByContainerPort) {
  json svc = {{"spec",
               {{"ports",
                 {{{"name", "http"}, {"port", 80}, {"targetPort", 8080}},
                  {{"name", "https"}, {"port", 443}, {"targetPort", 8443}}}}}}};
  auto merged =
      strategicMergePatch(svc, json::parse(R"({"spec":{"ports":[{"port":80,"targetPort":9090},
                                             {"port":443,"$patch":"delete"},
                                             {"port":53,"name":"dns"}]}})"));
  ASSERT_TRUE(merged);
  EXPECT_EQ((*merged)["spec"]["ports"], json::parse(R"([{"name":"http","port":80,"targetPort":9090},
                            {"name":"dns","port":53}])"));

  json pod = {{"spec",
               {{"containers",
                 {{{"name", "c"},
                   {"ports", {{{"containerPort", 80}, {"name", "http"}}}},
                   {"args", {"a", "b"}}}}},
                {"tolerations", {{{"key", "x"}, {"operator", "Exists"}}}}}}};
  merged = strategicMergePatch(pod, json::parse(R"({"spec":{"containers":[{"name":"c","args":["z"],
                                                  "ports":[{"containerPort":80,"protocol":"TCP"},
                                                           {"containerPort":81}]}],
                                   "tolerations":[{"key":"y","operator":"Exists"}]}})"));
  ASSERT_TRUE(merged);
  const json& c = (*merged)["spec"]["containers"][0];
  EXPECT_EQ(c["ports"], json::parse(R"([{"containerPort":80,"name":"http","protocol":"TCP"},
                                        {"containerPort":81}])"));
  EXPECT_EQ(c["args"], json::array({"z"}));  // no merge key: replaced
  EXPECT_EQ((*merged)["spec"]["tolerations"], json::parse(R"([{"key":"y","operator":"Exists"}])"));
}

TEST(StrategicMergeKeys, AListOfStringsUnderAKeyedNameIsReplaced) {
  // An EndpointSlice endpoint (a map whose `addresses` are strings).
  json endpoint = json::parse(R"({"addresses":["10.0.0.1","10.0.0.2"]})");
  auto merged = strategicMergePatch(endpoint, json::parse(R"({"addresses":["10.0.0.3"]})"));
  ASSERT_TRUE(merged);
  EXPECT_EQ((*merged)["addresses"], json::parse(R"(["10.0.0.3"])"));
  json node = json::parse(R"({"status":{"addresses":[{"type":"InternalIP","address":"a"}]}})");
  merged = strategicMergePatch(
      node, json::parse(R"({"status":{"addresses":[{"type":"Hostname","address":"h"}]}})"));
  ASSERT_TRUE(merged);
  EXPECT_EQ((*merged)["status"]["addresses"].size(), 2u);
}

TEST(StrategicMergeKeys, RetainKeysClearsTheFieldsItDoesNotList) {
  json d = json::parse(R"({"spec":{"replicas":1,"strategy":{"type":"RollingUpdate",
      "rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}}}})");
  auto merged = strategicMergePatch(
      d, json::parse(R"({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}})"));
  ASSERT_TRUE(merged);
  EXPECT_EQ((*merged)["spec"], json::parse(R"({"replicas":1,"strategy":{"type":"Recreate"}})"));

  // What kubectl apply sends when a Deployment's strategy becomes Recreate: the removed field is
  // null and not listed, which apimachinery allows.
  auto removed = strategicMergePatch(d, json::parse(R"({"spec":{"strategy":{
      "$retainKeys":["type"],"rollingUpdate":null,"type":"Recreate"}}})"));
  ASSERT_TRUE(removed) << removed.error().message();
  EXPECT_EQ((*removed)["spec"]["strategy"], json::parse(R"({"type":"Recreate"})"));

  auto unlisted = strategicMergePatch(
      d, json::parse(R"({"spec":{"strategy":{"$retainKeys":["type"],"rollingUpdate":{}}}})"));
  ASSERT_FALSE(unlisted);
  EXPECT_NE(unlisted.error().message().find("rollingUpdate"), std::string::npos);
  EXPECT_FALSE(strategicMergePatch(d, json::parse(R"({"spec":{"$retainKeys":"type"}})")));
}

}  // namespace
}  // namespace ekco::kubesim
