// The readers of S3 answers (s3/xml.h) on answers as MinIO and s3rver write them: listings with
// URL-encoded keys (encoding-type=url, which the client always asks for) are decoded only when
// the answer says <EncodingType>url</EncodingType>; a bad escape is a one-line kParse.
#include "s3/xml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ekco::s3 {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> keys(const ObjectPage& page) {
  std::vector<std::string> out;
  for (const ObjectInfo& o : page.objects) out.push_back(o.key);
  return out;
}

std::string contents(const std::string& key) {
  return "<Contents><Key>" + key +
         "</Key><LastModified>2026-11-26T10:00:00.000Z</LastModified><ETag>&#34;"
         "d41d8cd98f00b204e9800998ecf8427e&#34;</ETag><Size>0</Size></Contents>";
}

// MinIO (cmd/api-response.go): EncodingType after the last Contents, keys through s3URLEncode.
TEST(S3Xml, UrlEncodedKeysAsMinioWritesThemAreDecoded) {
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>kotsadm</Name><Prefix></Prefix>"
      "<StartAfter>a%01b</StartAfter><KeyCount>5</KeyCount><MaxKeys>1000</MaxKeys>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>a+b%3D/c</NextContinuationToken>" +
      contents("ctl%01%1B%5B31m") + contents("with+space+%26+plus%2Bpercent%2525%3Deq%3Fq%23hash") +
      contents("dir/nested/star*dot.dash-under_") +
      contents("%C3%BCn%C3%AF/%E6%97%A5%F0%9F%98%80") + contents("lt%3C%22quote%22%3E%7F") +
      "<EncodingType>url</EncodingType></ListBucketResult>";
  auto page = parseListObjectsV2(xml);
  ASSERT_TRUE(page) << page.error().message();
  EXPECT_EQ(keys(*page), (std::vector<std::string>{
                             "ctl\x01\x1b[31m", "with space & plus+percent%25=eq?q#hash",
                             "dir/nested/star*dot.dash-under_", "ünï/日😀", "lt<\"quote\">\x7f"}));
  // The continuation token is the server's, never encoded: sent back as it came.
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_token, "a+b%3D/c");
  EXPECT_EQ(page->objects[0].etag, "d41d8cd98f00b204e9800998ecf8427e");
}

// S3 (and some servers) put EncodingType before Contents; its case does not matter.
TEST(S3Xml, EncodingTypeBeforeTheContentsAndInAnyCaseCounts) {
  for (const char* value : {"url", "URL", " Url "}) {
    const std::string xml = std::string("<ListBucketResult><EncodingType>") + value +
                            "</EncodingType><IsTruncated>false</IsTruncated>" +
                            contents("a%2Bb+c%0A") + "</ListBucketResult>";
    auto page = parseListObjectsV2(xml);
    ASSERT_TRUE(page) << value << ": " << page.error().message();
    EXPECT_EQ(keys(*page), std::vector<std::string>{"a+b c\n"}) << value;
  }
}

// A server that ignores encoding-type=url (s3rver) says no EncodingType: its keys are taken as
// they are, '+' and '%' included.
TEST(S3Xml, KeysOfAnAnswerWithoutEncodingTypeAreTakenAsTheyAre) {
  const std::string xml = "<ListBucketResult><IsTruncated>false</IsTruncated>" +
                          contents("a+b%41 &amp; c") + contents("x%") + "</ListBucketResult>";
  auto page = parseListObjectsV2(xml);
  ASSERT_TRUE(page) << page.error().message();
  EXPECT_EQ(keys(*page), (std::vector<std::string>{"a+b%41 & c", "x%"}));
  // Another encoding type is not one this reader decodes: keys as they are.
  auto other = parseListObjectsV2("<ListBucketResult><EncodingType>base64</EncodingType>" +
                                  contents("a+b") + "</ListBucketResult>");
  ASSERT_TRUE(other) << other.error().message();
  EXPECT_EQ(keys(*other), std::vector<std::string>{"a+b"});
}

TEST(S3Xml, ABadUrlEscapeIsAOneLineParseErrorNamingTheText) {
  for (const char* bad : {"x%", "x%4", "x%zz", "%G0", "a%0\x01"}) {
    const std::string xml = "<ListBucketResult><EncodingType>url</EncodingType>" + contents(bad) +
                            "</ListBucketResult>";
    auto page = parseListObjectsV2(xml);
    ASSERT_FALSE(page) << bad;
    EXPECT_EQ(page.error().code(), base::ErrorCode::kParse) << bad;
    EXPECT_THAT(page.error().message(), HasSubstr("a bad URL escape in \"")) << bad;
    EXPECT_EQ(page.error().message().find_first_of("\x01\n"), std::string::npos) << bad;
  }
}

TEST(S3Xml, UrlDecodeTurnsEscapesIntoBytesAndPlusIntoASpace) {
  const std::pair<const char*, std::string> cases[] = {
      {"", ""},           {"plain/key.txt", "plain/key.txt"},   {"a+b", "a b"},
      {"%2B%2b", "++"},   {"%00%ff", std::string("\0\xff", 2)}, {"%e6%97%A5", "日"},
      {"100%25", "100%"},
  };
  for (const auto& [in, want] : cases) {
    auto got = urlDecode(in);
    ASSERT_TRUE(got) << in << ": " << got.error().message();
    EXPECT_EQ(*got, want) << in;
  }
}

}  // namespace
}  // namespace ekco::s3
