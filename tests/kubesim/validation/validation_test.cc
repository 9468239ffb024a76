// The pure pieces behind kubesim's admission: field errors and the Status they render into, the
// name and key formats, Go's base64, defaulting and PrepareForCreate, generation tracking.
#include "tests/kubesim/validation/validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/validation/defaults.h"
#include "tests/kubesim/validation/types.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ResourceInfo core(const std::string& plural, const std::string& kind, bool status = false) {
  return ResourceInfo{
      .group = "",
      .version = "v1",
      .plural = plural,
      .singular = "",
      .kind = kind,
      .namespaced = plural != "namespaces" && plural != "nodes",
      .short_names = {},
      .subresources = status ? std::vector<std::string>{"status"} : std::vector<std::string>{}};
}

ResourceInfo deployments() {
  return ResourceInfo{.group = "apps",
                      .version = "v1",
                      .plural = "deployments",
                      .singular = "deployment",
                      .kind = "Deployment",
                      .namespaced = true,
                      .short_names = {},
                      .subresources = {"status", "scale"}};
}

TEST(InvalidReply, RendersOneErrorAsTheApiServerDoes) {
  Reply r = invalidReply("", "Pod", "Bad_Name",
                         {invalidValue("metadata.name", "Bad_Name", "must be lower case")});
  EXPECT_EQ(r.code, 422);
  EXPECT_EQ(r.body["reason"], "Invalid");
  EXPECT_EQ(r.body["message"],
            "Pod \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": must be "
            "lower case");
  EXPECT_EQ(r.body["details"]["kind"], "Pod");
  EXPECT_EQ(r.body["details"]["name"], "Bad_Name");
  EXPECT_FALSE(r.body["details"].contains("group"));
  ASSERT_EQ(r.body["details"]["causes"].size(), 1u);
  EXPECT_EQ(r.body["details"]["causes"][0],
            json({{"reason", "FieldValueInvalid"},
                  {"message", "Invalid value: \"Bad_Name\": must be lower case"},
                  {"field", "metadata.name"}}));
}

TEST(InvalidReply, BracketsSeveralErrorsAndQualifiesTheGroup) {
  Reply r = invalidReply("apps", "Deployment", "d",
                         {requiredValue("spec.selector"), forbidden("spec", "no")});
  EXPECT_EQ(r.body["message"],
            "Deployment.apps \"d\" is invalid: [spec.selector: Required value, spec: Forbidden: "
            "no]");
  EXPECT_EQ(r.body["details"]["group"], "apps");
}

TEST(NameFormats, MatchApimachinerysMessages) {
  EXPECT_THAT(dns1123Subdomain("a.b-c"), IsEmpty());
  EXPECT_THAT(dns1123Subdomain("A")[0], HasSubstr("a lowercase RFC 1123 subdomain must consist"));
  EXPECT_THAT(dns1123Label("a.b"), ElementsAre("must not contain dots"));
  EXPECT_THAT(dns1123Label(std::string(64, 'a')),
              ElementsAre("must be no more than 63 characters"));
  EXPECT_THAT(dns1035Label("1abc")[0], HasSubstr("start with an alphabetic character"));
  EXPECT_THAT(qualifiedName("example.com/my-key_1.x"), IsEmpty());
  EXPECT_THAT(qualifiedName("/x"), ElementsAre("prefix part must be non-empty"));
  EXPECT_THAT(qualifiedName("a/b/c")[0], HasSubstr("a qualified name must consist"));
  EXPECT_THAT(labelValue(""), IsEmpty());
  EXPECT_THAT(labelValue("-x")[0], HasSubstr("a valid label must be an empty string"));
  EXPECT_THAT(configMapKey("..x"), ElementsAre("must not start with '..'"));
  EXPECT_THAT(configMapKey("a b")[0], HasSubstr("a valid config key"));
}

TEST(NameRule, FollowsEachRegistryStrategy) {
  EXPECT_EQ(nameRule(core("namespaces", "Namespace")), "label");
  EXPECT_EQ(nameRule(core("services", "Service")), "1035");
  EXPECT_EQ(nameRule(core("pods", "Pod")), "subdomain");
  ResourceInfo role{.group = "rbac.authorization.k8s.io", .plural = "roles", .kind = "Role"};
  EXPECT_EQ(nameRule(role), "segment");
}

TEST(ValidateCreate, ChecksLabelsAnnotationsAndTheirSize) {
  json cm = {{"metadata",
              {{"name", "ok"},
               {"labels", {{"bad key!", "v"}, {"k", "-bad"}}},
               {"annotations", {{"big", std::string(256 * 1024, 'x')}}}}}};
  auto errs = validateCreate(core("configmaps", "ConfigMap"), cm);
  ASSERT_EQ(errs.size(), 3u);
  EXPECT_EQ(errs[0].field, "metadata.labels");
  EXPECT_THAT(errs[0].body(), HasSubstr("Invalid value: \"bad key!\": name part must consist"));
  EXPECT_THAT(errs[1].body(), HasSubstr("Invalid value: \"-bad\": a valid label"));
  EXPECT_EQ(errs[2].field, "metadata.annotations");
  EXPECT_EQ(errs[2].body(), "Too long: may not be more than 262144 bytes");
}

TEST(ValidateCreate, ServicesAreDns1035LabelsAndNeedPorts) {
  json svc = {{"metadata", {{"name", "1svc"}}}, {"spec", {{"type", "ClusterIP"}}}};
  auto errs = validateCreate(core("services", "Service"), svc);
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].field, "metadata.name");
  EXPECT_EQ(errs[1].field, "spec.ports");
  EXPECT_EQ(errs[1].type, "FieldValueRequired");
}

TEST(ValidateCreate, TlsSecretsNeedTheCertificateAndTheKey) {
  json secret = {{"metadata", {{"name", "tls"}}},
                 {"type", "kubernetes.io/tls"},
                 {"data", {{"tls.crt", "eA=="}}}};
  auto errs = validateCreate(core("secrets", "Secret"), secret);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field, "data[tls.key]");
  EXPECT_EQ(errs[0].body(), "Required value");
}

TEST(ValidateUpdate, RefusesNewFinalizersOnAnObjectBeingDeleted) {
  json old = {
      {"metadata",
       {{"name", "x"}, {"deletionTimestamp", "2026-01-01T00:00:00Z"}, {"finalizers", {"a/b"}}}}};
  json next = old;
  next["metadata"]["finalizers"] = {"a/b", "c/d"};
  auto errs = validateUpdate(core("configmaps", "ConfigMap"), next, old);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field + ": " + errs[0].body(),
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is "
            "being deleted, found new finalizers []string{\"c/d\"}");
  next["metadata"]["finalizers"] = json::array();
  EXPECT_THAT(validateUpdate(core("configmaps", "ConfigMap"), next, old), IsEmpty());
}

TEST(ValidateUpdate, ImmutableConfigMapsKeepTheirDataAndFlag) {
  json old = {{"metadata", {{"name", "x"}}}, {"immutable", true}, {"data", {{"a", "1"}}}};
  json next = old;
  next["data"]["a"] = "2";
  next["immutable"] = false;
  auto errs = validateUpdate(core("configmaps", "ConfigMap"), next, old);
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].field, "immutable");
  EXPECT_EQ(errs[1].field + ": " + errs[1].body(),
            "data: Forbidden: field is immutable when `immutable` is set");
  json labelled = old;
  labelled["metadata"]["labels"] = {{"k", "v"}};
  EXPECT_THAT(validateUpdate(core("configmaps", "ConfigMap"), labelled, old), IsEmpty());
}

TEST(ValidateUpdate, SecretTypeIsImmutable) {
  json old = {{"metadata", {{"name", "s"}}}, {"type", "Opaque"}};
  json next = old;
  next["type"] = "example.com/other";
  auto errs = validateUpdate(core("secrets", "Secret"), next, old);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].body(), "Invalid value: \"example.com/other\": field is immutable");
}

json pod() {
  json p = {{"metadata", {{"name", "p"}}},
            {"spec", {{"containers", {{{"name", "c"}, {"image", "nginx:1"}}}}}}};
  applyDefaults(core("pods", "Pod", true), p);
  admitPod(p, true);
  return p;
}

TEST(ValidateUpdate, PodSpecChangesOnlyInTheUpdatableFields) {
  const ResourceInfo pods = core("pods", "Pod", true);
  json old = pod();
  json next = old;
  next["spec"]["containers"][0]["image"] = "nginx:2";
  next["spec"]["activeDeadlineSeconds"] = 30;
  next["spec"]["tolerations"].push_back({{"key", "k"}, {"operator", "Exists"}});
  EXPECT_THAT(validateUpdate(pods, next, old), IsEmpty());

  json moved = old;
  moved["spec"]["nodeName"] = "node-a";
  auto errs = validateUpdate(pods, moved, old);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field, "spec");
  EXPECT_THAT(errs[0].body(), HasSubstr("Forbidden: pod updates may not change fields other than "
                                        "`spec.containers[*].image`"));

  json fewer = old;
  fewer["spec"]["tolerations"].erase(0);
  errs = validateUpdate(pods, fewer, old);
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs[0].body(),
            "Forbidden: existing toleration can not be modified except its tolerationSeconds");

  json added = old;
  added["spec"]["containers"].push_back({{"name", "d"}, {"image", "x"}});
  errs = validateUpdate(pods, added, old);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].body(), "Forbidden: pod updates may not add or remove containers");
}

TEST(InvalidDryRun, AcceptsAllAndNamesTheOptionsKindOtherwise) {
  EXPECT_EQ(invalidDryRun("CreateOptions", {"All"}), std::nullopt);
  auto bad = invalidDryRun("CreateOptions", {"Yes"});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->code, 422);
  EXPECT_EQ(bad->body["message"],
            "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: "
            "[]string{\"Yes\"}: supported values: \"All\"");
}

TEST(Base64, DecodesAsGoAndReportsGosOffsets) {
  std::string error;
  EXPECT_EQ(decodeBase64("aGVsbG8=", &error), "hello");
  EXPECT_EQ(decodeBase64("aGVs\nbG8=", &error), "hello");
  EXPECT_EQ(decodeBase64("", &error), "");
  EXPECT_EQ(decodeBase64("aGVsbG8", &error), std::nullopt);
  EXPECT_EQ(error, "illegal base64 data at input byte 4");
  EXPECT_EQ(decodeBase64("not base64!", &error), std::nullopt);
  EXPECT_EQ(error, "illegal base64 data at input byte 3");
  EXPECT_EQ(decodeBase64("aGVsbG8=x", &error), std::nullopt);
  EXPECT_EQ(error, "illegal base64 data at input byte 8");
  EXPECT_EQ(encodeBase64("hello"), "aGVsbG8=");
  EXPECT_EQ(encodeBase64("hi"), "aGk=");
  EXPECT_EQ(typeError({{"data", {{"k", "%%%"}}}}, "Secret"), "illegal base64 data at input byte 0");
}

TEST(Defaults, PodsGetTheApiDefaultsAndTheDefaultTolerations) {
  json p = pod();
  const json& spec = p["spec"];
  EXPECT_EQ(spec["restartPolicy"], "Always");
  EXPECT_EQ(spec["dnsPolicy"], "ClusterFirst");
  EXPECT_EQ(spec["schedulerName"], "default-scheduler");
  EXPECT_EQ(spec["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ(spec["serviceAccountName"], "default");
  EXPECT_EQ(spec["containers"][0]["imagePullPolicy"], "IfNotPresent");
  ASSERT_EQ(spec["tolerations"].size(), 2u);
  EXPECT_EQ(spec["tolerations"][1], json({{"key", "node.kubernetes.io/unreachable"},
                                          {"operator", "Exists"},
                                          {"effect", "NoExecute"},
                                          {"tolerationSeconds", 300}}));
  // A pod that tolerates everything gets none added.
  json tolerant = {{"spec", {{"tolerations", {{{"operator", "Exists"}}}}}}};
  admitPod(tolerant, true);
  EXPECT_EQ(tolerant["spec"]["tolerations"].size(), 1u);
}

TEST(Defaults, PrepareForCreateDropsStatusAndStartsPodsPending) {
  json p = pod();
  p["status"] = {{"phase", "Running"}};
  prepareForCreate(core("pods", "Pod", true), p);
  EXPECT_EQ(p["status"], json({{"phase", "Pending"}, {"qosClass", "BestEffort"}}));
  EXPECT_FALSE(p["metadata"].contains("generation"));

  json d = {{"metadata", {{"name", "d"}}}, {"spec", json::object()}, {"status", {{"replicas", 3}}}};
  applyDefaults(deployments(), d);
  prepareForCreate(deployments(), d);
  EXPECT_FALSE(d.contains("status"));
  EXPECT_EQ(d["metadata"]["generation"], 1);
  EXPECT_EQ(d["spec"]["replicas"], 1);
  EXPECT_EQ(d["spec"]["revisionHistoryLimit"], 10);
  EXPECT_EQ(d["spec"]["progressDeadlineSeconds"], 600);
  EXPECT_EQ(d["spec"]["strategy"],
            json({{"type", "RollingUpdate"},
                  {"rollingUpdate", {{"maxUnavailable", "25%"}, {"maxSurge", "25%"}}}}));

  json node = {{"metadata", {{"name", "n"}}}, {"status", {{"capacity", {{"cpu", "2"}}}}}};
  prepareForCreate(core("nodes", "Node", true), node);
  EXPECT_TRUE(node.contains("status"));  // the kubelet registers its node with a status
}

TEST(Defaults, QosClassFollowsRequestsAndLimits) {
  json guaranteed = {
      {"spec",
       {{"containers",
         {{{"name", "c"}, {"resources", {{"limits", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}}}}}};
  applyDefaults(core("pods", "Pod"), guaranteed);
  EXPECT_EQ(qosClass(guaranteed), "Guaranteed");
  json burstable = {
      {"spec", {{"containers", {{{"name", "c"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}}}}}};
  EXPECT_EQ(qosClass(burstable), "Burstable");
}

TEST(Defaults, SecretsFoldStringDataIntoData) {
  json s = {{"stringData", {{"k", "hello"}}}, {"data", {{"other", "eA=="}}}};
  applyDefaults(core("secrets", "Secret"), s);
  EXPECT_FALSE(s.contains("stringData"));
  EXPECT_EQ(s["data"], json({{"k", "aGVsbG8="}, {"other", "eA=="}}));
  EXPECT_EQ(s["type"], "Opaque");
}

TEST(Generation, OnlyWhereTheRegistryKeepsIt) {
  EXPECT_TRUE(tracksGeneration(deployments()));
  EXPECT_FALSE(tracksGeneration(core("configmaps", "ConfigMap")));
  EXPECT_FALSE(tracksGeneration(core("pods", "Pod", true)));
  ResourceInfo ceph{.group = "ceph.rook.io", .plural = "cephclusters", .kind = "CephCluster"};
  EXPECT_TRUE(tracksGeneration(ceph));
  json old = {{"metadata", {{"name", "d"}}}, {"spec", {{"replicas", 1}}}};
  json next = old;
  next["status"] = {{"x", 1}};
  EXPECT_FALSE(bumpsGeneration(deployments(), next, old));
  EXPECT_TRUE(bumpsGeneration(ceph, next, old));  // no status subresource: status is spec
  next["metadata"]["annotations"] = {{"a", "b"}};
  EXPECT_TRUE(bumpsGeneration(deployments(), next, old));
}

}  // namespace
}  // namespace ekco::kubesim
