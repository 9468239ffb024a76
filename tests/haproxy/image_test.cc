#include "haproxy/image.h"

#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ekco::haproxy {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kSha256 = "sha256:" + std::string(64, 'a');

TEST(ValidateImage, AcceptsDistributionReferences) {
  for (const std::string& image : {
           std::string("haproxy"),
           std::string("haproxy:lts-alpine"),
           std::string("haproxy:2.9.1-alpine"),
           std::string("docker.io/library/haproxy:2.8"),
           std::string("registry.example.com:5000/kurl/haproxy:3.0"),
           std::string("localhost/haproxy"),
           std::string("localhost:5000/haproxy:latest"),
           std::string("[fd00::1]:5000/haproxy:2.6"),
           std::string("10.0.0.1:5000/haproxy"),
           std::string("a/b/c__d-e.f---g:Tag_1.x-y"),
           "haproxy@" + kSha256,
           "haproxy:2.9@" + kSha256,
           "registry.example.com/haproxy@sha512:" + std::string(128, 'F'),
       }) {
    auto status = validateImage(image);
    EXPECT_TRUE(status) << image << ": " << status.error().message();
  }
}

TEST(ValidateImage, RejectsAnythingElseNamingTheValueOnOneLine) {
  for (const std::string& image : {
           std::string(""),
           std::string(" "),
           std::string("haproxy lts"),
           std::string("haproxy:lts\n  command: [sh]"),
           std::string("\"haproxy\""),
           std::string("'haproxy'"),
           std::string("haproxy\t"),
           std::string("HAProxy:2.9"),
           std::string("haproxy:"),
           std::string(":2.9"),
           std::string("haproxy::2.9"),
           std::string("haproxy:-x"),
           std::string("haproxy:.x"),
           "haproxy:" + std::string(129, 'x'),
           std::string("/haproxy"),
           std::string("haproxy/"),
           std::string("a//b"),
           std::string("haproxy#1"),
           std::string("haproxy:2.9 # comment"),
           std::string("registry_x.example.com/haproxy"),
           std::string("-registry.example.com/haproxy"),
           std::string("registry.example.com:/haproxy"),
           std::string("registry.example.com:50a/haproxy"),
           std::string("[fd00::1/haproxy"),
           std::string("[not-v6]:5000/haproxy"),
           std::string("haproxy@sha256:abc"),
           std::string("haproxy@" + std::string(64, 'a')),
           std::string("haproxy@1sha:" + std::string(64, 'a')),
           "haproxy@sha256:" + std::string(63, 'a') + "g",
           "haproxy@" + kSha256 + "@" + kSha256,
           std::string("ha_-proxy"),
           std::string("haproxy..x"),
           std::string(256, 'a'),
       }) {
    auto status = validateImage(image);
    ASSERT_FALSE(status) << "accepted: " << image;
    EXPECT_EQ(status.error().code(), base::ErrorCode::kInvalidArgument);
    EXPECT_THAT(status.error().message(), StartsWith("invalid image \""));
    EXPECT_THAT(status.error().message(), Not(HasSubstr("\n"))) << status.error().message();
  }
}

TEST(ValidateImage, MessageQuotesAndEscapesTheValue) {
  auto status = validateImage("haproxy\n\"x\"");
  ASSERT_FALSE(status);
  EXPECT_THAT(status.error().message(), StartsWith(R"(invalid image "haproxy\n\"x\"": )"));
}

TEST(HaproxyVersionOfImage, ReadsTheVersionFromHaproxyTags) {
  struct Case {
    std::string image;
    std::optional<HaproxyVersion> want;
  };
  const std::vector<Case> cases = {
      {"haproxy:2.9.1-alpine", HaproxyVersion{2, 9}},
      {"haproxy:2.9", HaproxyVersion{2, 9}},
      {"haproxy:2.8", HaproxyVersion{2, 8}},
      {"haproxy:2.8.5-alpine", HaproxyVersion{2, 8}},
      {"haproxy:2.6.12-bullseye", HaproxyVersion{2, 6}},
      {"haproxy:3.0-alpine", HaproxyVersion{3, 0}},
      {"haproxy:3", HaproxyVersion{3, 0}},
      {"haproxy:3-alpine", HaproxyVersion{3, 0}},
      {"haproxy:2.10", HaproxyVersion{2, 10}},
      {"docker.io/library/haproxy:3.2.1", HaproxyVersion{3, 2}},
      {"registry.local:5000/kurl/haproxy:2.9-bookworm", HaproxyVersion{2, 9}},
      {"haproxytech/haproxy-alpine:2.9", HaproxyVersion{2, 9}},
      // Unknown: moving tags, no tag, digests, other images, garbage.
      {"haproxy:lts-alpine", std::nullopt},
      {"haproxy:lts", std::nullopt},
      {"haproxy:latest", std::nullopt},
      {"haproxy:alpine", std::nullopt},
      {"haproxy", std::nullopt},
      {"haproxy:2", std::nullopt},
      {"haproxy:2-alpine", std::nullopt},
      {"haproxy:2.9@" + kSha256, std::nullopt},
      {"haproxy@" + kSha256, std::nullopt},
      {"myproxy:2.9", std::nullopt},
      {"haproxy/other:2.9", std::nullopt},
      {"haproxy:v2.9", std::nullopt},
      {"haproxy:2.x", std::nullopt},
      {"haproxy:2.9x", std::nullopt},
      {"haproxy:99999.1", std::nullopt},
      {"haproxy 2.9", std::nullopt},
      {"", std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(haproxyVersionOfImage(c.image), c.want) << c.image;
  }
}

}  // namespace
}  // namespace ekco::haproxy
