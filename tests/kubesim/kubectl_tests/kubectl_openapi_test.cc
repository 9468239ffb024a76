// The OpenAPI documents (features/openapi.h), proven with the real kubectl: `explain` from
// /openapi/v3 and, with --output plaintext-openapiv2, from /openapi/v2 in protobuf; custom
// resources explained by their CRD's schema while it exists; `apply` building its strategic
// merge patch from the schemas' patch strategies (containers merged by name, a Deployment's
// strategy with $retainKeys); the index's hashes; 404 for a group-version not served.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/kubectl_tests/kubectl_support.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

using KubectlOpenApiTest = testing::KubectlFixture;

TEST_F(KubectlOpenApiTest, ExplainReadsTheBuiltInKindsFromOpenApiV3) {
  start();
  auto ports = kubectl({"explain", "pods.spec.containers.ports"});
  ASSERT_EQ(ports.exit_code, 0) << ports.stderr_data;
  EXPECT_THAT(ports.stdout_data, HasSubstr("KIND:       Pod\nVERSION:    v1\n"));
  EXPECT_THAT(ports.stdout_data, HasSubstr("FIELD: ports <[]ContainerPort>"));
  EXPECT_THAT(ports.stdout_data, HasSubstr("containerPort\t<integer>"));
  EXPECT_THAT(ports.stdout_data, HasSubstr("protocol\t<string>"));

  auto strategy = kubectl({"explain", "deployments.spec.strategy", "--api-version=apps/v1"});
  ASSERT_EQ(strategy.exit_code, 0) << strategy.stderr_data;
  EXPECT_THAT(strategy.stdout_data, HasSubstr("GROUP:      apps"));
  EXPECT_THAT(strategy.stdout_data, HasSubstr("FIELD: strategy <DeploymentStrategy>"));
  EXPECT_THAT(strategy.stdout_data, HasSubstr("rollingUpdate\t<RollingUpdateDeployment>"));

  // Times, quantities and int-or-strings by their own definitions, maps by their values.
  auto lease = kubectl({"explain", "leases.spec"});
  // A ref to a string type reads as that type, as kubectl shows it against kube-apiserver.
  EXPECT_THAT(lease.stdout_data, HasSubstr("renewTime\t<string>"));
  EXPECT_THAT(lease.stdout_data, HasSubstr("leaseDurationSeconds\t<integer>"));
  auto resources = kubectl({"explain", "pods.spec.containers.resources"});
  EXPECT_THAT(resources.stdout_data, HasSubstr("limits\t<map[string]Quantity>"));
  auto recursive = kubectl({"explain", "nodes.spec.taints", "--recursive"});
  ASSERT_EQ(recursive.exit_code, 0) << recursive.stderr_data;
  EXPECT_THAT(recursive.stdout_data, HasSubstr("effect\t<string>"));
  EXPECT_THAT(recursive.stdout_data, HasSubstr("timeAdded\t<string>"));

  auto unknown = kubectl({"explain", "pods.spec.colour"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.stderr_data, HasSubstr("field \"colour\" does not exist"));
}

TEST_F(KubectlOpenApiTest, ExplainReadsTheProtobufOpenApiV2Document) {
  start();
  auto spec = kubectl({"explain", "pods.spec", "--output", "plaintext-openapiv2"});
  ASSERT_EQ(spec.exit_code, 0) << spec.stderr_data;
  EXPECT_THAT(spec.stdout_data, HasSubstr("KIND:     Pod\nVERSION:  v1\n"));
  EXPECT_THAT(spec.stdout_data, HasSubstr("RESOURCE: spec <Object>"));
  EXPECT_THAT(spec.stdout_data, HasSubstr("containers\t<[]Object>"));
  EXPECT_THAT(spec.stdout_data, HasSubstr("nodeName\t<string>"));
  auto csr = kubectl({"explain", "csr.status.certificate", "--output", "plaintext-openapiv2"});
  ASSERT_EQ(csr.exit_code, 0) << csr.stderr_data;
  EXPECT_THAT(csr.stdout_data, HasSubstr("VERSION:  certificates.k8s.io/v1"));
  EXPECT_THAT(csr.stdout_data, HasSubstr("FIELD:    certificate <string>"));

  // The same document in JSON for a client that does not ask for protobuf.
  auto raw = kubectl({"get", "--raw", "/openapi/v2"});
  ASSERT_EQ(raw.exit_code, 0) << raw.stderr_data;
  const json document = json::parse(raw.stdout_data, nullptr, false);
  ASSERT_TRUE(document.is_object()) << raw.stdout_data.substr(0, 200);
  EXPECT_EQ(document["swagger"], "2.0");
  const json& container =
      document["definitions"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
  EXPECT_EQ(container["items"], json({{"$ref", "#/definitions/io.k8s.api.core.v1.Container"}}));
  EXPECT_EQ(container["x-kubernetes-patch-merge-key"], "name");
  EXPECT_EQ(document["definitions"]["io.k8s.api.coordination.v1.Lease"]
                    ["x-kubernetes-group-version-kind"],
            json::parse(R"([{"group":"coordination.k8s.io","kind":"Lease","version":"v1"}])"));
}

constexpr const char* kDefinition = R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: backups.ops.example.com
spec:
  group: ops.example.com
  scope: Namespaced
  names: {plural: backups, singular: backup, kind: Backup}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [schedule]
            properties:
              schedule: {type: string, description: "When the backup runs, in cron syntax."}
              keep: {type: integer, nullable: true}
)";

TEST_F(KubectlOpenApiTest, ACustomResourceIsExplainedByItsSchemaWhileItsDefinitionExists) {
  start();
  auto index_before = kubectl({"get", "--raw", "/openapi/v3"});
  ASSERT_EQ(index_before.exit_code, 0) << index_before.stderr_data;
  EXPECT_THAT(index_before.stdout_data, Not(HasSubstr("apis/ops.example.com/v1")));
  auto missing = kubectl({"get", "--raw", "/openapi/v3/apis/ops.example.com/v1"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.stderr_data, HasSubstr("NotFound"));

  auto applied = kubectl({"apply", "-f", "-"}, kDefinition);
  ASSERT_EQ(applied.exit_code, 0) << applied.stderr_data;
  auto established = kubectl(
      {"wait", "--for=condition=Established", "--timeout=10s", "crd/backups.ops.example.com"});
  ASSERT_EQ(established.exit_code, 0) << established.stderr_data;
  const json index =
      json::parse(kubectl({"get", "--raw", "/openapi/v3"}).stdout_data, nullptr, false);
  const std::string url = index["paths"]["apis/ops.example.com/v1"].value("serverRelativeURL", "");
  EXPECT_THAT(url, HasSubstr("/openapi/v3/apis/ops.example.com/v1?hash="));

  auto spec = kubectl({"explain", "backups.spec"});
  ASSERT_EQ(spec.exit_code, 0) << spec.stderr_data;
  EXPECT_THAT(spec.stdout_data, HasSubstr("GROUP:      ops.example.com\nKIND:       Backup"));
  EXPECT_THAT(spec.stdout_data, HasSubstr("schedule\t<string> -required-"));
  EXPECT_THAT(spec.stdout_data, HasSubstr("When the backup runs, in cron syntax."));
  auto metadata = kubectl({"explain", "backups.metadata.labels"});
  EXPECT_THAT(metadata.stdout_data, HasSubstr("FIELD: labels <map[string]string>"));
  auto v2 = kubectl({"explain", "backups.spec.schedule", "--output", "plaintext-openapiv2"});
  ASSERT_EQ(v2.exit_code, 0) << v2.stderr_data;
  EXPECT_THAT(v2.stdout_data, HasSubstr("FIELD:    schedule <string>"));
  EXPECT_THAT(v2.stdout_data, HasSubstr("When the backup runs, in cron syntax."));

  // A changed schema is a new document: a new hash, so no client keeps the old one.
  std::string changed = kDefinition;
  changed += "              owner: {type: string}\n";
  ASSERT_EQ(kubectl({"apply", "-f", "-"}, changed).exit_code, 0);
  const json index_after =
      json::parse(kubectl({"get", "--raw", "/openapi/v3"}).stdout_data, nullptr, false);
  EXPECT_NE(index_after["paths"]["apis/ops.example.com/v1"].value("serverRelativeURL", ""), url);
  EXPECT_THAT(kubectl({"explain", "backups.spec.owner"}).stdout_data,
              HasSubstr("FIELD: owner <string>"));

  ASSERT_EQ(kubectl({"delete", "crd", "backups.ops.example.com"}).exit_code, 0);
  auto gone = kubectl({"explain", "backups"});
  EXPECT_NE(gone.exit_code, 0);
  EXPECT_THAT(gone.stderr_data,
              AnyOf(HasSubstr("the server doesn't have a resource type \"backups\""),
                    HasSubstr("couldn't find resource")));
  EXPECT_NE(kubectl({"get", "--raw", "/openapi/v3/apis/ops.example.com/v1"}).exit_code, 0);
}

constexpr const char* kDeployment = R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: app, image: "nginx:1", env: [{name: MODE, value: "blue"}]}
      - {name: sidecar, image: "busybox:1"}
)";

TEST_F(KubectlOpenApiTest, ApplyMergesByTheSchemasPatchStrategies) {
  start();
  auto created = kubectl({"apply", "-f", "-"}, kDeployment);
  ASSERT_EQ(created.exit_code, 0) << created.stderr_data;
  // A change made by another hand: three-way merge keeps it where the applied file is silent.
  auto set = kubectl({"set", "env", "deployment/web", "-c", "sidecar", "DEBUG=1"});
  ASSERT_EQ(set.exit_code, 0) << set.stderr_data;

  std::string next = kDeployment;
  const std::string blue = "value: \"blue\"";
  const std::string rolling = "{type: RollingUpdate, rollingUpdate: {maxSurge: 1}}";
  next.replace(next.find(blue), blue.size(), "value: \"green\"");
  next.replace(next.find(rolling), rolling.size(), "{type: Recreate}");
  auto applied = kubectl({"apply", "-f", "-"}, next);
  ASSERT_EQ(applied.exit_code, 0) << applied.stderr_data;
  EXPECT_THAT(applied.stderr_data, Not(HasSubstr("openapi")));

  auto web = server_->get("deployments.apps", "default", "web");
  ASSERT_TRUE(web);
  const json& spec = (*web)["spec"];
  // The strategy's rollingUpdate went with $retainKeys (patch strategy retainKeys).
  EXPECT_EQ(spec["strategy"], json({{"type", "Recreate"}}));
  // Containers merged by name: the app's env changed, the sidecar kept the env it was given
  // (a replaced list would have dropped it).
  const json& containers = spec["template"]["spec"]["containers"];
  ASSERT_EQ(containers.size(), 2u) << containers.dump();
  EXPECT_EQ(containers[0]["env"], json::parse(R"([{"name":"MODE","value":"green"}])"));
  EXPECT_EQ(containers[1]["env"], json::parse(R"([{"name":"DEBUG","value":"1"}])"));
  EXPECT_EQ(containers[1]["image"], "busybox:1");

  // kubectl built the patch from the apps/v1 document: had the v3 schemas not served (no
  // strategic merge in the PATCH operation, or a kind it could not find), it would have fallen
  // back to /openapi/v2 before its compiled-in types.
  bool read_v3 = false;
  bool read_v2 = false;
  for (const RequestRecord& r : server_->requestLog()) {
    read_v3 = read_v3 || r.path == "/openapi/v3/apis/apps/v1";
    read_v2 = read_v2 || r.path == "/openapi/v2";
  }
  EXPECT_TRUE(read_v3);
  EXPECT_FALSE(read_v2);
}

}  // namespace
}  // namespace ekco::kubesim
