#include "kube/decode/json_fields.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace ekco::kube {
namespace {

using nlohmann::json;

TEST(JsonFields, AbsentOrWronglyTypedReadsAsEmptyAndNeverThrows) {
  const json pod = {{"metadata", {{"name", "p"}, {"uid", 7}}},
                    {"spec", "not an object"},
                    {"status", {{"phase", "Running"}, {"restarts", 3}}}};
  EXPECT_EQ(jsonText(jsonField(pod, "metadata"), "name"), "p");
  EXPECT_EQ(jsonText(jsonField(pod, "metadata"), "uid"), "");  // a number
  EXPECT_EQ(jsonText(jsonField(pod, "metadata"), "absent"), "");
  EXPECT_TRUE(jsonField(jsonField(pod, "spec"), "containers").is_null());  // spec is a string
  EXPECT_TRUE(jsonField(jsonField(pod, "nope"), "deeper").is_null());
  EXPECT_EQ(jsonText(jsonField(pod, "status"), "phase"), "Running");
  EXPECT_EQ(jsonInteger(jsonField(pod, "status"), "restarts"), 3);
  EXPECT_EQ(jsonInteger(jsonField(pod, "status"), "phase"), std::nullopt);
  for (const json& not_an_object : {json(nullptr), json(1), json("x"), json::array({1})}) {
    EXPECT_TRUE(jsonField(not_an_object, "a").is_null()) << not_an_object.dump();
    EXPECT_EQ(jsonText(not_an_object, "a"), "") << not_an_object.dump();
    EXPECT_EQ(jsonInteger(not_an_object, "a"), std::nullopt) << not_an_object.dump();
  }
}

TEST(JsonFields, FindFollowsAPathOfObjectsAndPointsIntoTheObject) {
  const json o = {{"spec", {{"storage", {{"nodes", {1}}, {"off", nullptr}}}}}, {"text", "a"}};
  EXPECT_EQ(jsonFind(o, {"spec", "storage", "nodes"}), &o["spec"]["storage"]["nodes"]);
  ASSERT_NE(jsonFind(o, {"spec", "storage", "off"}), nullptr);  // present, null
  EXPECT_TRUE(jsonFind(o, {"spec", "storage", "off"})->is_null());
  EXPECT_EQ(jsonFind(o, {}), &o);
  EXPECT_EQ(jsonFind(o, {"spec", "absent"}), nullptr);
  EXPECT_EQ(jsonFind(o, {"text", "deeper"}), nullptr);  // a string is not an object
  EXPECT_EQ(jsonFind(json::array({o}), {"spec"}), nullptr);
}

TEST(JsonFields, ArraysAreReferencesAndAnythingElseIsEmpty) {
  const json o = {{"items", {1, 2}}, {"text", "a"}, {"object", {{"a", 1}}}};
  EXPECT_EQ(&jsonArray(o, "items"), &o["items"]);  // not a copy
  for (const char* k : {"text", "object", "absent"}) {
    EXPECT_TRUE(jsonArray(o, k).is_array()) << k;
    EXPECT_TRUE(jsonArray(o, k).empty()) << k;
  }
  EXPECT_TRUE(jsonArray(json("x"), "items").empty());
}

TEST(JsonFields, TheResourceVersionAndItsJsonPatchTest) {
  EXPECT_EQ(jsonResourceVersion({{"metadata", {{"resourceVersion", "42"}}}}), "42");
  EXPECT_EQ(jsonResourceVersion({{"metadata", {{"resourceVersion", 42}}}}), "");
  EXPECT_EQ(jsonResourceVersion(json("x")), "");
  EXPECT_EQ(resourceVersionTest("42"),
            json::parse(R"({"op":"test","path":"/metadata/resourceVersion","value":"42"})"));
}

TEST(JsonFields, IntegersAreThoseThatFitInt64) {
  const json o = {{"neg", -5},
                  {"max", std::numeric_limits<std::int64_t>::max()},
                  {"too_big", std::numeric_limits<std::uint64_t>::max()},
                  {"float", 2.5},
                  {"bool", true},
                  {"text", "5"}};
  EXPECT_EQ(jsonInteger(o, "neg"), -5);
  EXPECT_EQ(jsonInteger(o, "max"), std::numeric_limits<std::int64_t>::max());
  for (const char* k : {"too_big", "float", "bool", "text", "absent"}) {
    EXPECT_EQ(jsonInteger(o, k), std::nullopt) << k;
  }
}

TEST(JsonFields, DumpReplacesInvalidUtf8InsteadOfThrowing) {
  // A host job's output (`printf 'caf\351'`), a host path, a message cut at a byte limit.
  const json entry = {{"output", "caf\xE9\n"}, {"message", std::string("\xC3\xA9\xC3", 3)}};
  EXPECT_THROW((void)entry.dump(), json::type_error);  // why jsonDump exists
  const std::string text = jsonDump(entry);
  EXPECT_EQ(json::parse(text)["output"], "caf\xEF\xBF\xBD\n");
  EXPECT_EQ(json::parse(text)["message"], "\xC3\xA9\xEF\xBF\xBD");
  EXPECT_EQ(jsonDump(json{{"a", "\xC3\xA9"}}, -1, /*ascii=*/true), R"({"a":"\u00e9"})");
  EXPECT_EQ(jsonDump(json{{"a", 1}}, 2), "{\n  \"a\": 1\n}");
}

}  // namespace
}  // namespace ekco::kube
