// Issue 24 defect 12: kubesim aborted (std::terminate in its kubelet thread) on objects with
// wrong JSON types, and stored them. Now the real server's decoder answer: 400 BadRequest
// naming the field, and nothing stored.
#include "tests/kubesim/validation/types.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/api_tests/api_test_support.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using testing::ApiTest;
using ::testing::HasSubstr;

TEST(TypeError, WellTypedObjectsPassAndNullIsAccepted) {
  EXPECT_EQ(typeError(testing::pod("default", "p", "node-a"), "Pod"), std::nullopt);
  EXPECT_EQ(typeError(testing::node("node-a", "True"), "Node"), std::nullopt);
  json with_nulls = testing::pod("default", "p", "node-a");
  with_nulls["metadata"]["labels"] = nullptr;
  with_nulls["spec"]["terminationGracePeriodSeconds"] = nullptr;
  EXPECT_EQ(typeError(with_nulls, "Pod"), std::nullopt);
  // Custom resources are schemaless beyond their ObjectMeta.
  EXPECT_EQ(typeError({{"metadata", {{"name", "c"}}}, {"spec", 5}}, "CephCluster"), std::nullopt);
}

TEST(TypeError, NamesTheFieldTheJsonTypeAndTheGoType) {
  const auto error = [](json patch, const std::string& kind, json base) {
    base.merge_patch(patch);
    return typeError(base, kind).value_or("(none)");
  };
  const json pod = testing::pod("default", "p", "node-a");
  const json node = testing::node("node-a", "True");
  EXPECT_EQ(error({{"metadata", {{"labels", "x"}}}}, "Node", node),
            "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of "
            "type map[string]string");
  EXPECT_EQ(error({{"metadata", {{"labels", {{"x", 5}}}}}}, "Node", node),
            "json: cannot unmarshal object into Go struct field ObjectMeta.metadata.labels of "
            "type map[string]string");
  EXPECT_EQ(error({{"metadata", {{"finalizers", "x"}}}}, "Pod", pod),
            "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.finalizers of "
            "type []string");
  EXPECT_EQ(error({{"spec", {{"terminationGracePeriodSeconds", "x"}}}}, "Pod", pod),
            "json: cannot unmarshal string into Go struct field "
            "PodSpec.spec.terminationGracePeriodSeconds of type int64");
  EXPECT_EQ(error({{"spec", {{"terminationGracePeriodSeconds", 1.5}}}}, "Pod", pod),
            "json: cannot unmarshal number 1.5 into Go struct field "
            "PodSpec.spec.terminationGracePeriodSeconds of type int64");
  EXPECT_THAT(error({{"spec", 5}}, "Pod", pod), HasSubstr("Pod.spec of type struct"));
  EXPECT_THAT(error({{"spec", {{"taints", {1}}}}}, "Node", node),
              HasSubstr("NodeSpec.spec.taints of type []struct"));
  EXPECT_THAT(error({{"spec", {{"holderIdentity", 42}}}}, "Lease", json::object()),
              HasSubstr("LeaseSpec.spec.holderIdentity of type string"));
  EXPECT_THAT(error({{"spec", {{"replicas", "2"}}}}, "Deployment", json::object()),
              HasSubstr("Spec.spec.replicas of type int64"));
  EXPECT_THAT(error({{"apiVersion", 5}}, "Node", node),
              HasSubstr("TypeMeta.apiVersion of type string"));
  EXPECT_THAT(typeError(json::array(), "Node").value_or(""), HasSubstr("unmarshal array"));
}

TEST_F(ApiTest, WrongTypesAreRefusedWith400OnCreateUpdateAndPatchAndNothingIsStored) {
  start();
  json bad_pod = testing::pod("default", "p", "node-a");
  bad_pod["spec"]["nodeName"] = 5;
  auto created = client_->post("/api/v1/namespaces/default/pods", bad_pod);
  EXPECT_EQ(created.status, 400) << created.body;
  EXPECT_EQ(created.json()["reason"], "BadRequest");
  EXPECT_EQ(created.json()["message"],
            "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal number "
            "into Go struct field PodSpec.spec.nodeName of type string");
  EXPECT_EQ(client_->get("/api/v1/namespaces/default/pods/p").status, 404);

  auto good =
      client_->post("/api/v1/namespaces/default/pods", testing::pod("default", "p", "node-a"));
  ASSERT_EQ(good.status, 201) << good.body;
  json replaced = good.json();
  replaced["spec"]["terminationGracePeriodSeconds"] = "x";
  auto updated = client_->put("/api/v1/namespaces/default/pods/p", replaced);
  EXPECT_EQ(updated.status, 400) << updated.body;
  EXPECT_THAT(updated.json()["message"].get<std::string>(),
              HasSubstr("PodSpec.spec.terminationGracePeriodSeconds of type int64"));
  auto patched =
      client_->request("PATCH", "/api/v1/nodes/node-a", R"({"spec":{"unschedulable":"yes"}})",
                       "application/merge-patch+json");
  EXPECT_EQ(patched.status, 400) << patched.body;
  EXPECT_THAT(patched.json()["message"].get<std::string>(),
              HasSubstr("NodeSpec.spec.unschedulable of type bool"));
  EXPECT_EQ(client_->get("/api/v1/nodes/node-a").json()["spec"], json::object());

  // The server is alive and the pod still deletes (graceful, confirmed by the kubelet pass).
  auto deleted = client_->request("DELETE", "/api/v1/namespaces/default/pods/p",
                                  R"({"gracePeriodSeconds":0})");
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  server_->runKubelet();
  EXPECT_EQ(client_->get("/api/v1/namespaces/default/pods/p").status, 404);

  // Preloaded objects are checked too.
  json bad_node = testing::node("node-x", "True");
  bad_node["metadata"]["annotations"] = {{"a", 1}};
  auto put = server_->store().put(bad_node);
  ASSERT_FALSE(put);
  EXPECT_THAT(put.error().message(),
              HasSubstr("Node node-x: json: cannot unmarshal object into Go struct field "
                        "ObjectMeta.metadata.annotations"));
}

}  // namespace
}  // namespace ekco::kubesim
