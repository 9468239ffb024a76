#include "kube/decode/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace ekco::kube {
namespace {

std::string nested(int depth, const std::string& inside = "1") {
  return std::string(depth, '[') + inside + std::string(depth, ']');
}

TEST(JsonDepth, CountsArraysAndObjectsOpenAtOnce) {
  EXPECT_FALSE(jsonNestedDeeperThan("", 0));
  EXPECT_FALSE(jsonNestedDeeperThan("1", 0));
  EXPECT_TRUE(jsonNestedDeeperThan("[]", 0));
  EXPECT_FALSE(jsonNestedDeeperThan(R"({"a":[1],"b":{"c":2}})", 2));
  EXPECT_TRUE(jsonNestedDeeperThan(R"({"a":[1],"b":{"c":[2]}})", 2));
  EXPECT_FALSE(jsonNestedDeeperThan(nested(kMaxJsonDepth)));
  EXPECT_TRUE(jsonNestedDeeperThan(nested(kMaxJsonDepth + 1)));
  // Siblings do not add up.
  std::string siblings;
  for (int i = 0; i < 3 * kMaxJsonDepth; ++i) siblings += "[],";
  EXPECT_FALSE(jsonNestedDeeperThan("[" + siblings + "1]"));
}

TEST(JsonDepth, BracketsInsideStringsDoNotCount) {
  EXPECT_FALSE(jsonNestedDeeperThan(R"(["[[[[", "{{{{"])", 1));
  EXPECT_FALSE(jsonNestedDeeperThan(R"(["a\"[[[[\\", "\\\"{{"])", 1));
  EXPECT_TRUE(jsonNestedDeeperThan(R"(["a\\", [[1]]])", 2));
}

}  // namespace
}  // namespace ekco::kube
