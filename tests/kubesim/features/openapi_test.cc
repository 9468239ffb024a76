// The OpenAPI documents as generated (openapi.h); kubectl_openapi_test.cc and
// clients/python/test_openapi.py prove them with real clients.
#include "tests/kubesim/features/openapi.h"

#include <gtest/gtest.h>

#include <memory>

namespace ekco::kubesim::openapi {
namespace {

using nlohmann::json;

ResourceInfo builtIn(std::string group, std::string version, std::string plural, std::string kind) {
  return ResourceInfo{.group = std::move(group),
                      .version = std::move(version),
                      .plural = std::move(plural),
                      .kind = std::move(kind)};
}

std::vector<ResourceInfo> resources() {
  ResourceInfo backups = builtIn("ops.example.com", "v1", "backups", "Backup");
  backups.crd_version = std::make_shared<const json>(json::parse(R"({"name": "v1",
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
      "properties": {"keep": {"type": "integer", "nullable": true},
                     "mode": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}}}}})"));
  ResourceInfo jobs = builtIn("batch", "v1", "jobs", "Job");
  ResourceInfo reviews =
      builtIn("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview");
  reviews.verbs = {"create"};
  return {builtIn("", "v1", "pods", "Pod"),
          builtIn("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
          builtIn("", "v1", "services", "Service"),
          builtIn("", "v1", "endpoints", "Endpoints"),
          builtIn("apps", "v1", "deployments", "Deployment"),
          builtIn("apps", "v1", "statefulsets", "StatefulSet"),
          builtIn("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
          backups,
          jobs,
          reviews};
}

TEST(OpenApi, TheIndexListsEachGroupVersionWithAHashOfItsDocument) {
  auto all = resources();
  const json index = v3Index(all);
  const std::string core = index["paths"]["api/v1"]["serverRelativeURL"];
  EXPECT_EQ(core.rfind("/openapi/v3/api/v1?hash=", 0), 0u) << core;
  const std::string crd = index["paths"]["apis/ops.example.com/v1"]["serverRelativeURL"];
  // Another schema, another hash; the other group-versions keep theirs.
  all[7].crd_version = std::make_shared<const json>(json{{"name", "v1"}});
  const json changed = v3Index(all);
  EXPECT_NE(changed["paths"]["apis/ops.example.com/v1"]["serverRelativeURL"], crd);
  EXPECT_EQ(changed["paths"]["api/v1"]["serverRelativeURL"], core);
  EXPECT_FALSE(v3GroupVersion(all, "nope.example.com", "v1"));
}

TEST(OpenApi, BuiltInKindsComeFromTheTypeTableWithTheirPatchStrategies) {
  const auto all = resources();
  auto core = v3GroupVersion(all, "", "v1");
  ASSERT_TRUE(core);
  const json& schemas = (*core)["components"]["schemas"];
  const json& pod = schemas["io.k8s.api.core.v1.Pod"];
  EXPECT_EQ(pod["x-kubernetes-group-version-kind"],
            json::parse(R"([{"group":"","kind":"Pod","version":"v1"}])"));
  EXPECT_EQ(pod["properties"]["apiVersion"], json({{"type", "string"}}));
  EXPECT_EQ(
      pod["properties"]["spec"],
      json::parse(R"({"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.PodSpec"}]})"));
  const json& spec = schemas["io.k8s.api.core.v1.PodSpec"]["properties"];
  EXPECT_EQ(spec["containers"]["x-kubernetes-patch-merge-key"], "name");
  EXPECT_EQ(spec["volumes"]["x-kubernetes-patch-strategy"], "merge,retainKeys");
  EXPECT_FALSE(spec["tolerations"].contains("x-kubernetes-patch-strategy"));
  EXPECT_EQ(spec["nodeSelector"],
            json::parse(R"({"type":"object","additionalProperties":{"type":"string"}})"));
  // Inline structs' fields at their embedding object's level (Volume's VolumeSource).
  EXPECT_TRUE(schemas["io.k8s.api.core.v1.Volume"]["properties"].contains("emptyDir"));
  EXPECT_FALSE(schemas["io.k8s.api.core.v1.Volume"]["properties"].contains("volumeSource"));
  // `ports`: a container's by containerPort, a ServiceSpec's by port, an EndpointSubset's replaced.
  EXPECT_EQ(schemas["io.k8s.api.core.v1.Container"]["properties"]["ports"]
                   ["x-kubernetes-patch-merge-key"],
            "containerPort");
  EXPECT_EQ(schemas["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"]
                   ["x-kubernetes-patch-merge-key"],
            "port");
  EXPECT_FALSE(schemas["io.k8s.api.core.v1.EndpointSubset"]["properties"]["ports"].contains(
      "x-kubernetes-patch-merge-key"));
  EXPECT_EQ(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.Time"],
            json({{"type", "string"}, {"format", "date-time"}}));
  EXPECT_EQ(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["finalizers"]
                   ["x-kubernetes-patch-strategy"],
            "merge");
  const json& patch = (*core)["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
  EXPECT_TRUE(patch["requestBody"]["content"].contains("application/strategic-merge-patch+json"));
  EXPECT_EQ(patch["parameters"][0]["name"], "fieldValidation");

  auto apps = v3GroupVersion(all, "apps", "v1");
  ASSERT_TRUE(apps);
  const json& apps_schemas = (*apps)["components"]["schemas"];
  EXPECT_EQ(apps_schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["strategy"]
                        ["x-kubernetes-patch-strategy"],
            "retainKeys");
  // A kind reached from another group-version's kind still says what it is.
  EXPECT_EQ(apps_schemas["io.k8s.api.core.v1.PersistentVolumeClaim"]
                        ["x-kubernetes-group-version-kind"][0]["kind"],
            "PersistentVolumeClaim");
  // A merge key means nothing for a list of strings (an EndpointSlice endpoint's addresses).
  auto slices = v3GroupVersion(all, "discovery.k8s.io", "v1");
  ASSERT_TRUE(slices);
  EXPECT_FALSE((*slices)["components"]["schemas"]["io.k8s.api.discovery.v1.Endpoint"]["properties"]
                        ["addresses"]
                            .contains("x-kubernetes-patch-merge-key"));
}

TEST(OpenApi, OtherKindsAreTheirCrdSchemaOrTheirMetadata) {
  const auto all = resources();
  auto ops = v3GroupVersion(all, "ops.example.com", "v1");
  ASSERT_TRUE(ops);
  const json& backup = (*ops)["components"]["schemas"]["com.example.ops.v1.Backup"];
  EXPECT_EQ(backup["properties"]["spec"]["properties"]["keep"]["nullable"], true);
  EXPECT_EQ(backup["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
  EXPECT_TRUE(
      (*ops)["components"]["schemas"].contains("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
  const json& patch =
      (*ops)["paths"]["/apis/ops.example.com/v1/namespaces/{namespace}/backups/{name}"]["patch"];
  EXPECT_FALSE(patch["requestBody"]["content"].contains("application/strategic-merge-patch+json"));

  auto batch = v3GroupVersion(all, "batch", "v1");
  ASSERT_TRUE(batch);
  const json& job = (*batch)["components"]["schemas"]["io.k8s.api.batch.v1.Job"];
  EXPECT_EQ(job["x-kubernetes-preserve-unknown-fields"], true);
  EXPECT_EQ(job["x-kubernetes-group-version-kind"][0]["kind"], "Job");
  EXPECT_FALSE((*batch)["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"]
                       ["requestBody"]["content"]
                           .contains("application/strategic-merge-patch+json"));

  // Only operations a resource has: a create-only review has no PATCH.
  auto authz = v3GroupVersion(all, "authorization.k8s.io", "v1");
  ASSERT_TRUE(authz);
  EXPECT_TRUE((*authz)["paths"].empty());

  const json v2 = v2Document(all);
  const json& keep =
      v2["definitions"]["com.example.ops.v1.Backup"]["properties"]["spec"]["properties"];
  EXPECT_EQ(keep["keep"], json({{"type", "integer"}}));  // no nullable in v2
  EXPECT_FALSE(keep["mode"].contains("anyOf"));
  EXPECT_EQ(v2["definitions"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["items"],
            json({{"$ref", "#/definitions/io.k8s.api.core.v1.Container"}}));
}

TEST(OpenApi, TheV2ProtobufIsGnosticsDocument) {
  const json document = {{"swagger", "2.0"},
                         {"info", {{"title", "Kubernetes"}, {"version", "v1.32.4"}}},
                         {"paths", json::object()},
                         {"definitions", {{"A", {{"type", "string"}}}}}};
  const std::string bytes = v2Protobuf(document);
  // swagger = 1 ("2.0"), info = 2 {title = 1, version = 2}, paths = 8 (empty),
  // definitions = 9 {additional_properties = 1 {name = 1 "A", value = 2 {type = 22 {value = 1}}}}.
  const std::string expected = std::string(
                                   "\x0a\x03"
                                   "2.0",
                                   5) +
                               std::string(
                                   "\x12\x15\x0a\x0a"
                                   "Kubernetes"
                                   "\x12\x07"
                                   "v1.32.4",
                                   23) +
                               std::string("\x42\x00", 2) +
                               std::string(
                                   "\x4a\x12\x0a\x10\x0a\x01"
                                   "A"
                                   "\x12\x0b\xb2\x01\x08\x0a\x06"
                                   "string",
                                   20);
  EXPECT_EQ(bytes, expected);
}

}  // namespace
}  // namespace ekco::kubesim::openapi
