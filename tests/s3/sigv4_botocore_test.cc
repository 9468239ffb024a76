// Our SigV4 signer against an independent one: Debian's python3-botocore (S3SigV4Auth, through
// tests/s3/botocore_sign.py) signing the same requests at the same instant must produce the same
// Authorization header. s3rver does not verify signatures, so this is what catches a signing bug
// (../shared/reference/test-environment.md §10: curl's own --aws-sigv4 disagreed with botocore on
// unsorted multi-parameter queries).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "kube/decode/timestamp.h"
#include "s3/sigv4.h"

namespace ekco::s3 {
namespace {

using nlohmann::json;

std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string botocore(const SignRequest& r, const Credentials& c, const std::string& time) {
  json query = json::array();
  for (const auto& [k, v] : r.query) query.push_back({k, v});
  const json arg = {{"method", r.method},     {"host", r.host},
                    {"path", r.path},         {"query", query},
                    {"headers", r.headers},   {"unsigned", r.payload_sha256 == kUnsignedPayload},
                    {"access", c.access_key}, {"secret", c.secret_key},
                    {"region", "us-east-1"},  {"time", time}};
  const std::string cmd =
      "/usr/bin/python3 " EKCO_SOURCE_DIR "/tests/s3/botocore_sign.py " + shellQuote(arg.dump());
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return "popen failed";
  std::string out;
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), p.get()) != nullptr) out += buf.data();
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(SigV4Botocore, SameAuthorizationAsBotocoreForTheRequestsTheMigrationMakes) {
  auto t = kube::parseRfc3339("2026-11-26T10:30:07Z");
  ASSERT_TRUE(t);
  const Credentials creds{.access_key = "minio-access", .secret_key = "s3cr3t/Key+with=chars"};
  const std::string empty = sha256Hex("");
  const SignRequest requests[] = {
      {.method = "GET", .host = "127.0.0.1:9000", .path = "/", .payload_sha256 = empty},
      {.method = "GET",
       .host = "10.0.0.5:9000",
       .path = "/bucket",
       .query = {{"list-type", "2"},
                 {"max-keys", "1000"},
                 {"continuation-token", "1/abc+def=="},
                 {"start-after", "dir/a b/ü"}},
       .payload_sha256 = empty},
      {.method = "HEAD",
       .host = "127.0.0.1:19001",
       .path = "/bucket/nested/deep/key with spaces & (parens)+plus%percent",
       .payload_sha256 = empty},
      {.method = "PUT",
       .host = "127.0.0.1:19002",
       .path = "/bucket/ünïcödé/日本語.txt",
       .headers = {{"Content-Length", "52428800"}},
       .payload_sha256 = std::string(kUnsignedPayload)},
      {.method = "GET",
       .host = "127.0.0.1:19002",
       .path = "/bucket/a~b_c-d.e*f'g!h",
       .payload_sha256 = std::string(kUnsignedPayload)},
      {.method = "PUT", .host = "127.0.0.1:19002", .path = "/new-bucket", .payload_sha256 = empty},
  };
  for (const SignRequest& r : requests) {
    const Signed ours = sign(r, creds, "us-east-1", *t);
    EXPECT_EQ(ours.authorization, botocore(r, creds, "20261126T103007Z"))
        << r.method << " " << r.path << "\n"
        << ours.canonical_request;
  }
}

}  // namespace
}  // namespace ekco::s3
