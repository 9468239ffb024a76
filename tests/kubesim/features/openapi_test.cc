// The OpenAPI documents as generated (openapi.h); kubectl_openapi_test.cc and
// clients/python/test_openapi.py prove them with real clients.
#include "tests/kubesim/features/openapi.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string_view>

namespace ekco::kubesim::openapi {
namespace {

using nlohmann::json;

// The value at `path` (object keys, or array indexes as numbers in text); a missing one throws, so
// the test fails instead of reading a null that operator[] made up.
const json& at(const json& j, std::initializer_list<std::string_view> path) {
  const json* cur = &j;
  for (std::string_view key : path) {
    if (cur->is_array()) {
      cur = &cur->at(std::stoul(std::string(key)));
    } else {
      cur = &cur->at(std::string(key));
    }
  }
  return *cur;
}

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
  const std::string core = at(index, {"paths", "api/v1", "serverRelativeURL"});
  EXPECT_EQ(core.rfind("/openapi/v3/api/v1?hash=", 0), 0u) << core;
  const std::string crd = at(index, {"paths", "apis/ops.example.com/v1", "serverRelativeURL"});
  // Another schema, another hash; the other group-versions keep theirs.
  all[7].crd_version = std::make_shared<const json>(json{{"name", "v1"}});
  const json changed = v3Index(all);
  EXPECT_NE(at(changed, {"paths", "apis/ops.example.com/v1", "serverRelativeURL"}), crd);
  EXPECT_EQ(at(changed, {"paths", "api/v1", "serverRelativeURL"}), core);
  EXPECT_FALSE(v3GroupVersion(all, "nope.example.com", "v1"));
}

TEST(OpenApi, BuiltInKindsComeFromTheTypeTableWithTheirPatchStrategies) {
  const auto all = resources();
  auto core = v3GroupVersion(all, "", "v1");
  ASSERT_TRUE(core);
  const json& schemas = at((*core), {"components", "schemas"});
  const json& pod = at(schemas, {"io.k8s.api.core.v1.Pod"});
  EXPECT_EQ(at(pod, {"x-kubernetes-group-version-kind"}),
            json::parse(R"([{"group":"","kind":"Pod","version":"v1"}])"));
  EXPECT_EQ(at(pod, {"properties", "apiVersion"}), json({{"type", "string"}}));
  EXPECT_EQ(
      at(pod, {"properties", "spec"}),
      json::parse(R"({"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.PodSpec"}]})"));
  const json& spec = at(schemas, {"io.k8s.api.core.v1.PodSpec", "properties"});
  EXPECT_EQ(at(spec, {"containers", "x-kubernetes-patch-merge-key"}), "name");
  EXPECT_EQ(at(spec, {"volumes", "x-kubernetes-patch-strategy"}), "merge,retainKeys");
  EXPECT_FALSE(at(spec, {"tolerations"}).contains("x-kubernetes-patch-strategy"));
  EXPECT_EQ(at(spec, {"nodeSelector"}),
            json::parse(R"({"type":"object","additionalProperties":{"type":"string"}})"));
  // Inline structs' fields at their embedding object's level (Volume's VolumeSource).
  EXPECT_TRUE(at(schemas, {"io.k8s.api.core.v1.Volume", "properties"}).contains("emptyDir"));
  EXPECT_FALSE(at(schemas, {"io.k8s.api.core.v1.Volume", "properties"}).contains("volumeSource"));
  // `ports`: a container's by containerPort, a ServiceSpec's by port, an EndpointSubset's replaced.
  EXPECT_EQ(at(schemas, {"io.k8s.api.core.v1.Container", "properties", "ports",
                         "x-kubernetes-patch-merge-key"}),
            "containerPort");
  EXPECT_EQ(at(schemas, {"io.k8s.api.core.v1.ServiceSpec", "properties", "ports",
                         "x-kubernetes-patch-merge-key"}),
            "port");
  EXPECT_FALSE(at(schemas, {"io.k8s.api.core.v1.EndpointSubset", "properties", "ports"})
                   .contains("x-kubernetes-patch-merge-key"));
  EXPECT_EQ(at(schemas, {"io.k8s.apimachinery.pkg.apis.meta.v1.Time"}),
            json({{"type", "string"}, {"format", "date-time"}}));
  EXPECT_EQ(at(schemas, {"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "properties",
                         "finalizers", "x-kubernetes-patch-strategy"}),
            "merge");
  const json& patch = at((*core), {"paths", "/api/v1/namespaces/{namespace}/pods/{name}", "patch"});
  EXPECT_TRUE(
      at(patch, {"requestBody", "content"}).contains("application/strategic-merge-patch+json"));
  EXPECT_EQ(at(patch, {"parameters", "0", "name"}), "fieldValidation");

  auto apps = v3GroupVersion(all, "apps", "v1");
  ASSERT_TRUE(apps);
  const json& apps_schemas = at((*apps), {"components", "schemas"});
  EXPECT_EQ(at(apps_schemas, {"io.k8s.api.apps.v1.DeploymentSpec", "properties", "strategy",
                              "x-kubernetes-patch-strategy"}),
            "retainKeys");
  // A kind reached from another group-version's kind still says what it is.
  EXPECT_EQ(at(apps_schemas, {"io.k8s.api.core.v1.PersistentVolumeClaim",
                              "x-kubernetes-group-version-kind", "0", "kind"}),
            "PersistentVolumeClaim");
  // A merge key means nothing for a list of strings (an EndpointSlice endpoint's addresses).
  auto slices = v3GroupVersion(all, "discovery.k8s.io", "v1");
  ASSERT_TRUE(slices);
  EXPECT_FALSE(at((*slices), {"components", "schemas", "io.k8s.api.discovery.v1.Endpoint",
                              "properties", "addresses"})
                   .contains("x-kubernetes-patch-merge-key"));
}

TEST(OpenApi, OtherKindsAreTheirCrdSchemaOrTheirMetadata) {
  const auto all = resources();
  auto ops = v3GroupVersion(all, "ops.example.com", "v1");
  ASSERT_TRUE(ops);
  const json& backup = at((*ops), {"components", "schemas", "com.example.ops.v1.Backup"});
  EXPECT_EQ(at(backup, {"properties", "spec", "properties", "keep", "nullable"}), true);
  EXPECT_EQ(at(backup, {"properties", "metadata", "allOf", "0", "$ref"}),
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
  EXPECT_TRUE(at((*ops), {"components", "schemas"})
                  .contains("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
  const json& patch = at(
      (*ops), {"paths", "/apis/ops.example.com/v1/namespaces/{namespace}/backups/{name}", "patch"});
  EXPECT_FALSE(
      at(patch, {"requestBody", "content"}).contains("application/strategic-merge-patch+json"));

  auto batch = v3GroupVersion(all, "batch", "v1");
  ASSERT_TRUE(batch);
  const json& job = at((*batch), {"components", "schemas", "io.k8s.api.batch.v1.Job"});
  EXPECT_EQ(at(job, {"x-kubernetes-preserve-unknown-fields"}), true);
  EXPECT_EQ(at(job, {"x-kubernetes-group-version-kind", "0", "kind"}), "Job");
  EXPECT_FALSE(at((*batch), {"paths", "/apis/batch/v1/namespaces/{namespace}/jobs/{name}", "patch",
                             "requestBody", "content"})
                   .contains("application/strategic-merge-patch+json"));

  // Only operations a resource has: a create-only review has no PATCH.
  auto authz = v3GroupVersion(all, "authorization.k8s.io", "v1");
  ASSERT_TRUE(authz);
  EXPECT_TRUE(at((*authz), {"paths"}).empty());

  const json v2 = v2Document(all);
  const json& keep =
      at(v2, {"definitions", "com.example.ops.v1.Backup", "properties", "spec", "properties"});
  EXPECT_EQ(at(keep, {"keep"}), json::object());  // nullable: untyped in v2
  EXPECT_FALSE(at(keep, {"mode"}).contains("anyOf"));
  EXPECT_EQ(
      at(v2, {"definitions", "io.k8s.api.core.v1.PodSpec", "properties", "containers", "items"}),
      json({{"$ref", "#/definitions/io.k8s.api.core.v1.Container"}}));
}

// A CRD's schema is its author's: whatever its shape (kubesim accepts more than apiextensions
// would), both documents stay whole and the kind's definition an object with metadata.
TEST(OpenApi, ACrdSchemaOfAnyShapeLeavesTheDocumentsWhole) {
  auto all = resources();
  for (const char* schema :
       {R"("just a string")",
        R"({"properties": "nope", "x-kubernetes-group-version-kind": {"kind": "X"}})",
        R"({"type": "object", "properties": {"list": {"type": "array"}, "ref": {"$ref": "#/x"},
               "odd": 7, "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
               "properties": {"a": {"type": "string"}}}}})"}) {
    SCOPED_TRACE(schema);
    all[7].crd_version = std::make_shared<const json>(
        json{{"name", "v1"}, {"schema", {{"openAPIV3Schema", json::parse(schema)}}}});
    auto v3 = v3GroupVersion(all, "ops.example.com", "v1");
    ASSERT_TRUE(v3);
    const json& backup = at(*v3, {"components", "schemas", "com.example.ops.v1.Backup"});
    EXPECT_EQ(at(backup, {"type"}), "object");
    EXPECT_TRUE(at(backup, {"properties", "metadata"}).is_object());
    EXPECT_EQ(at(backup, {"x-kubernetes-group-version-kind"}).size(), 1u);
    EXPECT_FALSE(v2Protobuf(v2Document(all)).empty());
  }
  // The last in v2: no $ref, no array without items, an open object without its properties.
  const json v2 = v2Document(all);
  const json& properties = at(v2, {"definitions", "com.example.ops.v1.Backup", "properties"});
  EXPECT_EQ(at(properties, {"list"}), json::object());
  EXPECT_EQ(at(properties, {"ref"}), json::object());
  EXPECT_EQ(at(properties, {"open"}), json({{"x-kubernetes-preserve-unknown-fields", true}}));
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
