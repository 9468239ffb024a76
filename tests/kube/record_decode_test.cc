// The informers' simdjson decoders (kube/watch/list_decode.h, decodeNode/decodePod in
// kube/decode/records.h): the same records and the same errors as the DOM projections, and
// malformed input (truncated, wrong-typed, deeply nested) is a one-line error for that page, line
// or object, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kube/decode/records.h"
#include "kube/watch/list_decode.h"

namespace ekco::kube {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

Json nodeJson() {
  return Json::parse(R"({
    "metadata": {"name": "node-a", "uid": "u-1", "resourceVersion": "7",
      "labels": {"kubernetes.io/hostname": "host-a", "node-role.kubernetes.io/master": "",
                 "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/": "",
                 "topology.kubernetes.io/zone": "z"},
      "annotations": {"ekco.kurl.sh/z": "2", "ekco.kurl.sh/cordoned-by": "shutdown", "other": "x"}},
    "spec": {"unschedulable": true,
      "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                  "timeAdded": "2026-11-22T10:00:00Z"}, {"key": "k", "value": "v", "effect": null}]},
    "status": {
      "conditions": [{"type": "Ready", "status": "Unknown", "lastHeartbeatTime": "2026-11-22T09:59:00Z",
                      "lastTransitionTime": "2026-11-22T10:00:00Z", "reason": "NodeStatusUnknown"}],
      "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "host-a"}],
      "nodeInfo": {"kubeletVersion": "v1.32.4", "bootID": "b-1"}}})");
}

Json podJson() {
  return Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "osd-0", "namespace": "rook-ceph", "uid": "u-2", "resourceVersion": "9",
      "labels": {"app": "rook-ceph-osd", "pod-template-hash": "abc"},
      "deletionTimestamp": "2026-11-22T10:00:00Z", "deletionGracePeriodSeconds": 30,
      "ownerReferences": [{"kind": "Node", "name": "x", "uid": "1"},
                          {"kind": "ReplicaSet", "name": "osd-0-abc", "uid": "2", "controller": true},
                          {"kind": "Job", "name": "second", "uid": "3", "controller": true}]},
    "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "x", "args": [1, [2, {"a": null}]]}],
      "volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "pvc-1"}},
        {"name": "empty"},
        {"name": "h", "hostPath": {"path": "/x"}},
        {"name": "c", "configMap": {"name": "cm"}},
        {"name": "e", "persistentVolumeClaim": null}]},
    "status": {"phase": "Running",
      "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                      "lastTransitionTime": "2026-11-22T10:00:00Z"}],
      "containerStatuses": [
        {"name": "a", "ready": true, "state": {"running": {"startedAt": "2026-11-22T09:00:00Z"}}},
        {"name": "b", "ready": false, "state": {"waiting": {"reason": "x"}}}]}})");
}

base::Result<NodeRecord> decodeNodeText(const std::string& text, ObjectMeta& meta) {
  std::string copy = text;
  return decodeNode(padded(copy), meta);
}

base::Result<PodRecord> decodePodText(const std::string& text, ObjectMeta& meta) {
  std::string copy = text;
  return decodePod(padded(copy), meta);
}

TEST(RecordDecodeTest, ANodeDecodesToTheRecordTheDomProjectionGives) {
  ObjectMeta meta;
  auto decoded = decodeNodeText(nodeJson().dump(), meta);
  auto projected = projectNode(nodeJson());
  ASSERT_TRUE(decoded) << decoded.error().message();
  ASSERT_TRUE(projected);
  EXPECT_EQ(*decoded, *projected);
  EXPECT_EQ(decoded->boot_id, "b-1");
  EXPECT_EQ(meta.name, "node-a");
  EXPECT_EQ(meta.resource_version, "7");
  EXPECT_EQ(meta.ns, "");
}

TEST(RecordDecodeTest, APodDecodesToTheRecordTheDomProjectionGives) {
  ObjectMeta meta;
  auto decoded = decodePodText(podJson().dump(), meta);
  auto projected = projectPod(podJson());
  ASSERT_TRUE(decoded) << decoded.error().message();
  ASSERT_TRUE(projected);
  EXPECT_EQ(*decoded, *projected);
  EXPECT_EQ(decoded->owner_kind, "ReplicaSet");  // the first controller
  EXPECT_EQ(decoded->containers, 2);
  EXPECT_EQ(decoded->containers_ready, 1);
  EXPECT_EQ(meta.ns, "rook-ceph");
  EXPECT_EQ(meta.resource_version, "9");
}

TEST(RecordDecodeTest, KeyOrderAndRepeatedKeysReadAsADomReadsThem) {
  // Text as a server may send it: status first, then a metadata that is overridden by a later
  // one (the last wins in a DOM too).
  const std::string text =
      R"({"status": {"phase": "Pending"}, "metadata": {"name": "old", "labels": {"app": "a"}},)"
      R"( "spec": {"nodeName": "n"}, "metadata": {"name": "p", "namespace": "ns"}})";
  ObjectMeta meta;
  auto decoded = decodePodText(text, meta);
  auto projected = projectPod(Json::parse(text));
  ASSERT_TRUE(decoded) << decoded.error().message();
  EXPECT_EQ(*decoded, *projected);
  EXPECT_EQ(decoded->name, "p");
  EXPECT_TRUE(decoded->app.empty());
}

// Wrong-typed fields: the decoder's message is the DOM projection's, word for word.
TEST(RecordDecodeTest, AWrongTypedFieldIsTheSameErrorAsTheDomProjection) {
  const std::vector<std::pair<std::string, Json>> pod_cases = {
      {"/spec/nodeName", 7},
      {"/metadata/labels/pod-template-hash", false},
      {"/metadata/labels/a\nb", nullptr},
      {"/metadata/deletionTimestamp", "yesterday"},
      {"/metadata/deletionGracePeriodSeconds", 1.5},
      {"/metadata/deletionGracePeriodSeconds", "30"},
      {"/metadata/ownerReferences/1/controller", "yes"},
      {"/metadata/ownerReferences/0", "x"},
      {"/metadata/ownerReferences", Json::object()},
      {"/spec/volumes/0/persistentVolumeClaim/claimName", 3},
      {"/spec/volumes/1", nullptr},
      {"/spec", Json::array()},
      {"/status/containerStatuses/0/ready", "true"},
      {"/status/containerStatuses/0/state/running/startedAt", 12},
      {"/status/conditions/0/lastTransitionTime", "not a time"},
      {"/status/conditions/0", 1},
      {"/status/phase", Json::array()},
  };
  for (const auto& [pointer, value] : pod_cases) {
    Json pod = podJson();
    pod[Json::json_pointer(pointer)] = value;
    ObjectMeta meta;
    auto decoded = decodePodText(pod.dump(), meta);
    auto projected = projectPod(pod);
    ASSERT_FALSE(projected) << pointer;
    ASSERT_FALSE(decoded) << pointer;
    EXPECT_EQ(decoded.error().message(), projected.error().message()) << pointer;
    EXPECT_EQ(decoded.error().code(), base::ErrorCode::kParse);
    EXPECT_EQ(meta.name, "osd-0") << pointer;
  }
  const std::vector<std::pair<std::string, Json>> node_cases = {
      {"/spec/unschedulable", "true"},
      {"/spec/taints/0/key", 1},
      {"/spec/taints/0/timeAdded", "2026-13-45"},
      {"/metadata/annotations/x", 1},
      {"/status/conditions/0/lastHeartbeatTime", true},
      {"/status/addresses", "10.0.0.1"},
      {"/status/nodeInfo/bootID", Json::object()},
      {"/status", 5},
  };
  for (const auto& [pointer, value] : node_cases) {
    Json node = nodeJson();
    node[Json::json_pointer(pointer)] = value;
    ObjectMeta meta;
    auto decoded = decodeNodeText(node.dump(), meta);
    auto projected = projectNode(node);
    ASSERT_FALSE(projected) << pointer;
    ASSERT_FALSE(decoded) << pointer;
    EXPECT_EQ(decoded.error().message(), projected.error().message()) << pointer;
  }
}

TEST(RecordDecodeTest, AnObjectWithoutANameIsTheKeyError) {
  for (const std::string text :
       {R"({"metadata": {"namespace": "x"}})", R"({"metadata": {"name": 4}})",
        R"({"metadata": {"name": ""}, "spec": {"nodeName": 1}})", "{}"}) {
    ObjectMeta meta;
    auto decoded = decodePodText(text, meta);
    ASSERT_FALSE(decoded) << text;
    EXPECT_EQ(decoded.error().message(), "object without metadata.name") << text;
    EXPECT_EQ(meta.name, "");
  }
}

TEST(RecordDecodeTest, AnInvalidScalarWhereAFieldIsReadNamesTheField) {
  ObjectMeta meta;
  auto decoded = decodePodText(R"({"metadata": {"name": "p"}, "spec": {"nodeName": tru}})", meta);
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error().message(), "parse Pod p: spec.nodeName: invalid JSON");
  for (const std::string bad : {"nul", "fals", "-", "1.e", "truex"}) {
    decoded =
        decodePodText(R"({"metadata": {"name": "p"}, "spec": {"nodeName": )" + bad + "}}", meta);
    ASSERT_FALSE(decoded) << bad;
    EXPECT_EQ(decoded.error().message(), "parse Pod p: spec.nodeName: invalid JSON") << bad;
  }
}

std::string page(const std::string& items,
                 const std::string& meta = R"({"resourceVersion": "5"})") {
  return R"({"kind": "PodList", "metadata": )" + meta + R"(, "items": )" + items + "}";
}

base::Result<ListPage> listPage(JsonDecoder& decoder, std::string& text) {
  return decoder.listPage(padded(text), "list pods");
}

TEST(ListDecodeTest, APageGivesItsMetadataAndEachItemsText) {
  JsonDecoder decoder;
  std::string text = page(R"([{"metadata": {"name": "a"}}, 7, {"metadata": {"name": "b"}}])",
                          R"({"resourceVersion": "12", "continue": "c1"})");
  auto decoded = listPage(decoder, text);
  ASSERT_TRUE(decoded) << decoded.error().message();
  EXPECT_EQ(decoded->resource_version, "12");
  EXPECT_EQ(decoded->continue_token, "c1");
  ASSERT_EQ(decoded->items.size(), 3U);
  EXPECT_EQ(decoded->items[0].text, R"({"metadata": {"name": "a"}})");
  EXPECT_TRUE(decoded->items[1].text.empty());  // not an object: an error for that item
  ObjectMeta meta;
  auto pod = decodePod(decoded->items[2], meta);
  ASSERT_TRUE(pod);
  EXPECT_EQ(pod->name, "b");
}

TEST(ListDecodeTest, TruncatedWrongTypedAndDeeplyNestedPagesAreOneLineErrors) {
  const std::string full = page(R"([{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}])");
  struct Case {
    std::string text;
    std::string error;
  };
  std::vector<Case> cases;
  for (std::size_t cut = 1; cut < full.size(); cut += 3) {
    cases.push_back({full.substr(0, cut), "list pods: response is not JSON"});
  }
  cases.push_back({"", "list pods: response is not JSON"});
  cases.push_back({"[1, 2]", "list pods: response is not a List (no items or metadata)"});
  cases.push_back({R"("text")", "list pods: response is not a List (no items or metadata)"});
  cases.push_back({page("{}"), "list pods: response is not a List (no items or metadata)"});
  cases.push_back({page("[]", "[]"), "list pods: response is not a List (no items or metadata)"});
  cases.push_back({full + " {}", "list pods: response is not JSON"});
  cases.push_back({std::string(100000, '['), "list pods: response is not JSON"});
  for (auto& c : cases) {
    JsonDecoder decoder;
    auto decoded = listPage(decoder, c.text);
    ASSERT_FALSE(decoded) << c.text.substr(0, 80);
    EXPECT_EQ(decoded.error().message(), c.error) << c.text.substr(0, 80);
    EXPECT_EQ(decoded.error().code(), base::ErrorCode::kParse);
  }
}

TEST(ListDecodeTest, AnItemNestedThousandsDeepIsAnErrorForThatItemOnly) {
  // An array 5,000 deep where an object should be: skipped by counting depth, not recursion.
  JsonDecoder decoder;
  std::string text = page("[" + std::string(5000, '[') + std::string(5000, ']') +
                          R"(, {"metadata": {"name": "b"}}])");
  auto decoded = listPage(decoder, text);
  ASSERT_TRUE(decoded) << decoded.error().message();
  ASSERT_EQ(decoded->items.size(), 2U);
  EXPECT_TRUE(decoded->items[0].text.empty());  // "object without metadata.name" for it
  ObjectMeta meta;
  EXPECT_TRUE(decodePod(decoded->items[1], meta));
}

TEST(ListDecodeTest, ADeeplyNestedFieldInAnItemIsAnErrorForThatItemOrSkippedNeverACrash) {
  // Nested 5,000 deep inside a field the decoder reads, and inside one it skips.
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  JsonDecoder decoder;
  std::string text = page(R"([{"metadata": {"name": "a"}, "spec": {"nodeName": )" + deep +
                          R"(}}, {"metadata": {"name": "b"}, "spec": {"x": )" + deep + "}}]");
  auto decoded = listPage(decoder, text);
  if (!decoded) {
    EXPECT_EQ(decoded.error().message(), "list pods: response is not JSON");
    return;
  }
  ASSERT_EQ(decoded->items.size(), 2U);
  ObjectMeta meta;
  auto a = decodePod(decoded->items[0], meta);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message(), "parse Pod a: spec.nodeName: expected string, got array");
  auto b = decodePod(decoded->items[1], meta);
  if (b) {
    EXPECT_EQ(b->name, "b");
  } else {
    EXPECT_THAT(b.error().message(), HasSubstr("parse Pod b"));
  }
}

base::Result<WatchLine> watchLine(JsonDecoder& decoder, std::string& text, std::string& scratch) {
  return decoder.watchLine(padded(text), "watch pods", scratch);
}

TEST(ListDecodeTest, AWatchLineGivesItsTypeAndObjectText) {
  JsonDecoder decoder;
  std::string scratch;
  std::string text = R"({"type": "MODIFIED", "object": {"metadata": {"name": "a"}}})";
  auto line = watchLine(decoder, text, scratch);
  ASSERT_TRUE(line) << line.error().message();
  EXPECT_EQ(line->type, WatchEventType::kModified);
  EXPECT_EQ(line->object.text, R"({"metadata": {"name": "a"}})");
  std::string bookmark =
      R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"77"}}})";
  line = watchLine(decoder, bookmark, scratch);
  ASSERT_TRUE(line);
  ObjectMeta meta;
  ASSERT_TRUE(decodeMeta(line->object, meta));
  EXPECT_EQ(meta.resource_version, "77");
}

TEST(ListDecodeTest, MalformedWatchLinesAreTheWatchDecodersErrors) {
  const std::string good = R"({"type": "ADDED", "object": {"metadata": {"name": "a"}}})";
  std::vector<std::pair<std::string, std::string>> cases;
  for (std::size_t cut = 1; cut < good.size(); cut += 4) {
    cases.emplace_back(good.substr(0, cut), "watch pods: watch event is not a JSON object");
  }
  cases.emplace_back(R"({"type": 1, "object": {}})",
                     "watch pods: watch event without type or object");
  cases.emplace_back(R"({"type": "ADDED", "object": []})",
                     "watch pods: watch event without type or object");
  cases.emplace_back(R"({"type": "RENAMED", "object": {}})",
                     "watch pods: unknown watch event type");
  cases.emplace_back(std::string(100000, '{'),
                     "watch pods: watch event nested deeper than 1000 levels");
  cases.emplace_back(
      R"({"type":"ERROR","object":{"kind":"Status","status":"Failure","reason":"Expired","code":410,"message":"too old"}})",
      "watch pods: too old");
  for (auto& [text, error] : cases) {
    JsonDecoder decoder;
    std::string scratch;
    auto line = watchLine(decoder, text, scratch);
    ASSERT_FALSE(line) << text.substr(0, 80);
    EXPECT_THAT(line.error().message(), HasSubstr(error)) << text.substr(0, 80);
    EXPECT_EQ(line.error().message().find('\n'), std::string::npos);
  }
  JsonDecoder decoder;
  std::string scratch;
  std::string expired =
      R"({"type":"ERROR","object":{"kind":"Status","status":"Failure","reason":"Expired","code":410,"message":"too old"}})";
  auto line = watchLine(decoder, expired, scratch);
  ASSERT_FALSE(line);
  EXPECT_EQ(line.error().code(), base::ErrorCode::kGone);
}

}  // namespace
}  // namespace ekco::kube
