// The Kubernetes protobuf encoding of request bodies (protobuf.h): bodies built here field by
// field as client-go's generated marshallers write them, decoded, and served.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/api_tests/api_test_support.h"
#include "tests/kubesim/features/protobuf.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string varint(std::uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}

std::string bytesField(int number, const std::string& data) {
  return varint(static_cast<std::uint64_t>(number) << 3 | 2) + varint(data.size()) + data;
}

std::string varintField(int number, std::uint64_t v) {
  return varint(static_cast<std::uint64_t>(number) << 3) + varint(v);
}

std::string envelope(const std::string& api_version, const std::string& kind,
                     const std::string& raw) {
  std::string type_meta = bytesField(1, api_version) + bytesField(2, kind);
  return std::string("k8s\0", 4) + bytesField(1, type_meta) + bytesField(2, raw) +
         bytesField(3, "") + bytesField(4, "");
}

// ObjectMeta as gogo's marshaller writes it: every non-pointer field, empty or not.
std::string objectMeta(const std::string& name, const std::string& ns) {
  std::string time = "";  // metav1.Time{} (zero): an empty message
  return bytesField(1, name) + bytesField(2, "") + bytesField(3, ns) + bytesField(4, "") +
         bytesField(5, "") + bytesField(6, "") + varintField(7, 0) + bytesField(8, time) +
         bytesField(11, bytesField(1, "app") + bytesField(2, "web"));
}

TEST(Protobuf, DecodesAConfigMapAsKubectlSendsIt) {
  std::string configmap = bytesField(1, objectMeta("settings", "")) +
                          bytesField(2, bytesField(1, "mode") + bytesField(2, "fast")) +
                          bytesField(3, bytesField(1, "blob") + bytesField(2, "\x01\x02")) +
                          varintField(4, 1);
  auto decoded = protobuf::decode(envelope("v1", "ConfigMap", configmap));
  ASSERT_TRUE(decoded) << decoded.error().message();
  EXPECT_EQ(
      *decoded,
      json({{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata", {{"name", "settings"}, {"generation", 0}, {"labels", {{"app", "web"}}}}},
            {"data", {{"mode", "fast"}}},
            {"binaryData", {{"blob", "AQI="}}},
            {"immutable", true}}));
}

TEST(Protobuf, DecodesNestedMessagesRepeatedFieldsAndSpecialTypes) {
  // A Secret (bytes map) and an Eviction with DeleteOptions in another group.
  std::string secret = bytesField(1, objectMeta("s", "kurl")) +
                       bytesField(2, bytesField(1, "tls.key") + bytesField(2, "key")) +
                       bytesField(3, "kubernetes.io/tls");
  auto s = protobuf::decode(envelope("v1", "Secret", secret));
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ((*s)["data"], json({{"tls.key", "a2V5"}}));
  EXPECT_EQ((*s)["type"], "kubernetes.io/tls");
  std::string eviction =
      bytesField(1, objectMeta("web-1", "default")) +
      bytesField(2, varintField(1, 30) + bytesField(4, "Foreground") + bytesField(5, "All"));
  auto e = protobuf::decode(envelope("policy/v1", "Eviction", eviction));
  ASSERT_TRUE(e) << e.error().message();
  EXPECT_EQ(
      (*e)["deleteOptions"],
      json({{"gracePeriodSeconds", 30}, {"propagationPolicy", "Foreground"}, {"dryRun", {"All"}}}));
  // A Deployment: int32 replicas, a template with containers, an IntOrString and a Quantity.
  std::string container =
      bytesField(1, "web") + bytesField(2, "nginx") + bytesField(6, varintField(3, 8080)) +
      bytesField(8, bytesField(2, bytesField(1, "cpu") + bytesField(2, bytesField(1, "100m"))));
  std::string pod_spec = bytesField(2, container);
  std::string strategy = bytesField(1, "RollingUpdate") +
                         bytesField(2, bytesField(1, varintField(1, 1) + bytesField(3, "25%")));
  std::string spec = varintField(1, 3) +
                     bytesField(3, bytesField(1, objectMeta("", "")) + bytesField(2, pod_spec)) +
                     bytesField(4, strategy);
  auto d = protobuf::decode(
      envelope("apps/v1", "Deployment", bytesField(1, objectMeta("d", "")) + bytesField(2, spec)));
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ((*d)["spec"]["replicas"], 3);
  EXPECT_EQ((*d)["spec"]["template"]["spec"]["containers"][0],
            json({{"name", "web"},
                  {"image", "nginx"},
                  {"ports", {{{"containerPort", 8080}}}},
                  {"resources", {{"requests", {{"cpu", "100m"}}}}}}));
  EXPECT_EQ((*d)["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], "25%");
}

TEST(Protobuf, BadBodiesAreOneLineErrors) {
  auto no_magic = protobuf::decode("{}");
  ASSERT_FALSE(no_magic);
  EXPECT_THAT(no_magic.error().message(), HasSubstr("magic"));
  auto truncated = protobuf::decode(std::string("k8s\0\x0a\x05", 6));
  ASSERT_FALSE(truncated);
  EXPECT_EQ(truncated.error().code(), base::ErrorCode::kParse);
  auto custom = protobuf::decode(envelope("ceph.rook.io/v1", "CephCluster", ""));
  ASSERT_FALSE(custom);
  EXPECT_EQ(custom.error().code(), base::ErrorCode::kNotFound);
  auto unknown_field = protobuf::decode(envelope("v1", "ConfigMap", varintField(99, 1)));
  ASSERT_FALSE(unknown_field);
  EXPECT_THAT(unknown_field.error().message(),
              HasSubstr("field 99 of k8s.io.api.core.v1.ConfigMap is unknown"));
}

// What server-side field validation (Store::decodeFieldsLocked) drops from a built-in kind's
// JSON, named as the strict decoder names it; the structs Go embeds inline (a Volume's source, a
// Probe's handler, a key selector's name) and TypeMeta are known fields.
TEST(Protobuf, UnknownFieldsAreNamedAndDroppedAndInlineStructsAreKnown) {
  json pod = json::parse(R"({
    "apiVersion": "v1", "kind": "Pod", "bogus": 1,
    "metadata": {"name": "p", "labels": {"a": "b"}, "colour": "red"},
    "spec": {
      "containers": [{
        "name": "app", "image": "nginx", "shade": 2,
        "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
        "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        "resources": {"limits": {"cpu": "1"}}
      }],
      "volumes": [{"name": "v", "hostPath": {"path": "/x", "depth": 3}}]
    }})");
  auto dropped = protobuf::dropUnknownFields(pod);
  ASSERT_TRUE(dropped);
  EXPECT_EQ(*dropped,
            (std::vector<std::string>{"bogus", "metadata.colour", "spec.containers[0].shade",
                                      "spec.volumes[0].hostPath.depth"}));
  EXPECT_FALSE(pod.contains("bogus"));
  EXPECT_EQ(pod["spec"]["volumes"][0]["hostPath"], json({{"path", "/x"}}));
  EXPECT_EQ(pod["spec"]["containers"][0]["livenessProbe"]["exec"]["command"][0], "true");
  EXPECT_EQ(pod["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"], "s");

  json sts = json::parse(R"({"apiVersion": "apps/v1", "kind": "StatefulSet",
    "metadata": {"name": "s"},
    "spec": {"volumeClaimTemplates": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                       "metadata": {"name": "data"}}]}})");
  dropped = protobuf::dropUnknownFields(sts);
  ASSERT_TRUE(dropped);
  EXPECT_TRUE(dropped->empty()) << ::testing::PrintToString(*dropped);

  // Times as metav1.Time (whole seconds) and MicroTime (microseconds) decode them: UTC.
  json lease = json::parse(R"({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"name": "l", "creationTimestamp": "2026-11-29T05:44:53.9+02:00"},
    "spec": {"renewTime": "2026-11-29T03:44:53.354993+00:00", "acquireTime": "not a time"}})");
  ASSERT_TRUE(protobuf::dropUnknownFields(lease));
  EXPECT_EQ(lease["metadata"]["creationTimestamp"], "2026-11-29T03:44:53Z");
  EXPECT_EQ(lease["spec"]["renewTime"], "2026-11-29T03:44:53.354993Z");
  EXPECT_EQ(lease["spec"]["acquireTime"], "not a time");  // left to the type check

  json custom = {{"apiVersion", "example.com/v1"}, {"kind", "Widget"}, {"x", 1}};
  EXPECT_FALSE(protobuf::dropUnknownFields(custom));
  EXPECT_TRUE(custom.contains("x"));
}

using ProtobufServerTest = testing::ApiTest;

TEST_F(ProtobufServerTest, AProtobufCreateIsStoredAndACustomResourceOneIs415) {
  start();
  std::string configmap = bytesField(1, objectMeta("from-proto", "")) +
                          bytesField(2, bytesField(1, "k") + bytesField(2, "v"));
  auto created = client_->request("POST", "/api/v1/namespaces/default/configmaps",
                                  envelope("v1", "ConfigMap", configmap),
                                  "application/vnd.kubernetes.protobuf");
  ASSERT_EQ(created.status, 201) << created.body;
  auto stored = server_->get("configmaps", "default", "from-proto");
  ASSERT_TRUE(stored);
  EXPECT_EQ((*stored)["data"], json({{"k", "v"}}));
  EXPECT_EQ((*stored)["metadata"]["labels"], json({{"app", "web"}}));
  auto custom = client_->request("POST", "/apis/ceph.rook.io/v1/namespaces/rook-ceph/cephclusters",
                                 envelope("ceph.rook.io/v1", "CephCluster", ""),
                                 "application/vnd.kubernetes.protobuf");
  EXPECT_EQ(custom.status, 415);
  EXPECT_EQ(custom.json()["reason"], "UnsupportedMediaType");
}

}  // namespace
}  // namespace ekco::kubesim
