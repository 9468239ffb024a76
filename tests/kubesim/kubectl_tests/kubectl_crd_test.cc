// CustomResourceDefinitions, proven with the real kubectl: `apply` of a CRD, `wait
// --for=condition=Established`, discovery (`api-resources`, `explain`-free), custom resources
// validated and pruned by the server, printer columns in `get`, `scale`, and `delete crd`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/kubectl_tests/kubectl_support.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kDefinition = R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
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
            required: [cronSpec]
            properties:
              cronSpec: {type: string}
              image: {type: string}
              replicas: {type: integer, minimum: 1}
          status:
            type: object
            properties:
              replicas: {type: integer}
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Spec
      type: string
      jsonPath: .spec.cronSpec
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    - name: Image
      type: string
      priority: 1
      jsonPath: .spec.image
)";

constexpr const char* kCronTab = R"(apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: nightly
  namespace: default
spec:
  cronSpec: "0 3 * * *"
  image: backup:1
  replicas: 2
  unknownField: pruned
)";

using KubectlCrdTest = testing::KubectlFixture;

TEST_F(KubectlCrdTest, ACustomResourceIsServedOnlyWhileItsDefinitionExists) {
  start();
  auto before = kubectl({"get", "crontabs"});
  EXPECT_NE(before.exit_code, 0);
  EXPECT_THAT(before.stderr_data,
              HasSubstr("the server doesn't have a resource type \"crontabs\""));

  auto applied = kubectl({"apply", "-f", "-"}, kDefinition);
  ASSERT_EQ(applied.exit_code, 0) << applied.stderr_data;
  auto established = kubectl(
      {"wait", "--for=condition=Established", "--timeout=10s", "crd/crontabs.stable.example.com"});
  EXPECT_EQ(established.exit_code, 0) << established.stderr_data;
  EXPECT_THAT(established.stdout_data, HasSubstr("condition met"));
  auto resources = kubectl({"api-resources", "--api-group=stable.example.com", "--no-headers"});
  EXPECT_THAT(resources.stdout_data, HasSubstr("crontabs"));
  EXPECT_THAT(resources.stdout_data, HasSubstr("CronTab"));

  // kubectl's default --validate=strict (?fieldValidation=Strict): a field the schema does not
  // know is refused (400), as kube-apiserver's strict decoding refuses it.
  auto strict = kubectl({"apply", "-f", "-"}, kCronTab);
  EXPECT_NE(strict.exit_code, 0);
  EXPECT_THAT(strict.stderr_data,
              HasSubstr("CronTab in version \"v1\" cannot be handled as a CronTab: strict "
                        "decoding error: unknown field \"spec.unknownField\""));
  EXPECT_FALSE(server_->get("crontabs.stable.example.com", "default", "nightly"));
  // --validate=warn: created without it, with kube-apiserver's warning.
  auto created = kubectl({"apply", "--validate=warn", "-f", "-"}, kCronTab);
  ASSERT_EQ(created.exit_code, 0) << created.stderr_data;
  EXPECT_THAT(created.stdout_data, HasSubstr("crontab.stable.example.com/nightly created"));
  EXPECT_THAT(created.stderr_data, HasSubstr("Warning: unknown field \"spec.unknownField\""));
  auto spec = kubectl({"get", "ct", "nightly", "-o", "jsonpath={.spec}"});
  EXPECT_EQ(json::parse(spec.stdout_data, nullptr, false),
            json({{"cronSpec", "0 3 * * *"}, {"image", "backup:1"}, {"replicas", 2}}));

  clock_.advance(std::chrono::minutes(3));
  auto listed = kubectl({"get", "crontabs"});
  EXPECT_EQ(listed.stdout_data,
            "NAME      SPEC        REPLICAS   AGE\n"
            "nightly   0 3 * * *   2          3m\n");
  auto wide = kubectl({"get", "crontabs", "-o", "wide"});
  EXPECT_EQ(wide.stdout_data,
            "NAME      SPEC        REPLICAS   AGE   IMAGE\n"
            "nightly   0 3 * * *   2          3m    backup:1\n");

  auto scaled = kubectl({"scale", "crontab/nightly", "--replicas=4"});
  EXPECT_EQ(scaled.exit_code, 0) << scaled.stderr_data;
  EXPECT_EQ(kubectl({"get", "ct", "nightly", "-o", "jsonpath={.spec.replicas}"}).stdout_data, "4");

  auto deleted = kubectl({"delete", "crd", "crontabs.stable.example.com"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.stderr_data;
  EXPECT_FALSE(server_->get("crontabs.stable.example.com", "default", "nightly"));
  auto after = kubectl({"get", "crontabs"});
  EXPECT_NE(after.exit_code, 0);
  // From kubectl's cached discovery the GET is 404; with fresh discovery the type is unknown.
  EXPECT_THAT(after.stderr_data,
              AnyOf(HasSubstr("the server doesn't have a resource type \"crontabs\""),
                    HasSubstr("the server could not find the requested resource")));
}

TEST_F(KubectlCrdTest, AnInvalidCustomResourceIsRejectedWithTheSchemaErrors) {
  start();
  ASSERT_EQ(kubectl({"apply", "-f", "-"}, kDefinition).exit_code, 0);
  std::string bad = kCronTab;
  bad.erase(bad.find("  unknownField: pruned\n"));
  bad.replace(bad.find("replicas: 2"), 11, "replicas: 0");
  bad.replace(bad.find("cronSpec: \"0 3 * * *\""), 21, "cronSpec: 5");
  auto r = kubectl({"apply", "-f", "-"}, bad);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.stderr_data, HasSubstr("The CronTab \"nightly\" is invalid"));
  EXPECT_THAT(r.stderr_data, HasSubstr("spec.cronSpec: Invalid value: \"integer\": spec.cronSpec "
                                       "in body must be of type string: \"integer\""));
  EXPECT_THAT(r.stderr_data, HasSubstr("spec.replicas: Invalid value: 0: spec.replicas in body "
                                       "should be greater than or equal to 1"));
  EXPECT_FALSE(server_->get("crontabs.stable.example.com", "default", "nightly"));
}

TEST_F(KubectlCrdTest, ThePreloadedDefinitionsAreListedAndTheirPrinterColumnsShown) {
  start({{{"apiVersion", "ceph.rook.io/v1"},
          {"kind", "CephCluster"},
          {"metadata", {{"name", "rook-ceph"}, {"namespace", "rook-ceph"}}},
          {"spec", {{"dataDirHostPath", "/var/lib/rook"}, {"mon", {{"count", 3}}}}},
          {"status", {{"phase", "Ready"}, {"ceph", {{"health", "HEALTH_OK"}}}}}}});
  auto crds = kubectl({"get", "crd", "-o", "name"});
  EXPECT_THAT(crds.stdout_data,
              HasSubstr("customresourcedefinition.apiextensions.k8s.io/cephclusters.ceph.rook.io"));
  clock_.advance(std::chrono::hours(2));
  auto clusters = kubectl({"get", "cephclusters", "-n", "rook-ceph"});
  EXPECT_EQ(clusters.stdout_data,
            "NAME        DATADIRHOSTPATH   MONCOUNT   AGE    PHASE   MESSAGE   HEALTH      EXTERNAL"
            "   FSID\n"
            // Null cells (no message, no external, no FSID) print empty.
            "rook-ceph   /var/lib/rook     3          120m   Ready             HEALTH_OK           "
            "   \n");
  EXPECT_THAT(clusters.stderr_data, Not(HasSubstr("error")));
}

}  // namespace
}  // namespace ekco::kubesim
