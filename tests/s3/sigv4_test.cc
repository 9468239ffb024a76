// The SigV4 signer (s3/sigv4.h) on AWS's published example. Its agreement with an independent
// signer (botocore) on many requests is sigv4_botocore_test.cc.
#include "s3/sigv4.h"

#include <gtest/gtest.h>

#include "kube/decode/timestamp.h"

namespace ekco::s3 {
namespace {

TEST(SigV4, MatchesAwsPublishedExampleForGetObjectWithRange) {
  // https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html, "Example:
  // GET Object".
  auto t = kube::parseRfc3339("2013-05-24T00:00:00Z");
  ASSERT_TRUE(t);
  const Signed s = sign({.method = "GET",
                         .host = "examplebucket.s3.amazonaws.com",
                         .path = "/test.txt",
                         .headers = {{"Range", "bytes=0-9"}}},
                        {.access_key = "AKIAIOSFODNN7EXAMPLE",
                         .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
                        "us-east-1", *t);
  EXPECT_EQ(s.amz_date, "20130524T000000Z");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, EncodesPathsOnceKeepingSlashesAndSortsTheQuery) {
  EXPECT_EQ(uriEncode("a b/ü+%~._-", true), "a%20b/%C3%BC%2B%25~._-");
  EXPECT_EQ(uriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(encodedTarget({.path = "/b/x y", .query = {{"prefix", "a/b"}, {"list-type", "2"}}}),
            "/b/x%20y?list-type=2&prefix=a%2Fb");
  EXPECT_EQ(encodedTarget({.path = "/", .query = {{"uploads", ""}}}), "/?uploads=");
}

}  // namespace
}  // namespace ekco::s3
