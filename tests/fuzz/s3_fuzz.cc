// The MinIO migration's readers of S3 answers (s3/xml.h): parseListBuckets,
// parseListObjectsV2, parseError and xmlUnescape, on bodies an S3 server (or whatever answers on
// its port) returns.
//
// Checks: a rejection is kParse with a one-line message free of control characters; an accepted
// page that is truncated has a continuation token; every ETag is normalized (no quotes, no upper
// case) and normalizing is idempotent; unescaping never grows the text and leaves text without
// '&' as it is; URL-decoding never grows the text and leaves text without '%' and '+' as it is;
// the input taken as a key (any bytes: odd keys), URL-encoded as MinIO does and listed with
// <EncodingType>url</EncodingType>, reads back as exactly that key; parseError never fails and
// says something.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>

#include "s3/xml.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

template <typename T>
void checkRejection(const ekco::base::Result<T>& r, std::string_view what) {
  if (r) return;
  ekco::fuzz::check(r.error().code() == ekco::base::ErrorCode::kParse, "a rejection is kParse",
                    what);
  ekco::fuzz::checkOneLine(r.error().message(), what);
}

// MinIO's s3URLEncode (cmd/api-utils.go): every byte but A-Z a-z 0-9 - _ . / * as %XX, a space
// as '+'.
std::string s3UrlEncode(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/' || c == '*') {
      out += ch;
    } else if (c == ' ') {
      out += '+';
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ekco::fuzz::check;
  const std::string_view text = ekco::fuzz::asText(data, size);

  auto buckets = ekco::s3::parseListBuckets(text);
  checkRejection(buckets, "parseListBuckets");

  auto page = ekco::s3::parseListObjectsV2(text);
  checkRejection(page, "parseListObjectsV2");
  if (page) {
    if (page->truncated) check(!page->next_token.empty(), "a truncated page has a token");
    for (const auto& o : page->objects) {
      check(o.etag.find('"') == std::string::npos, "an ETag without quotes", o.etag);
      check(std::none_of(o.etag.begin(), o.etag.end(),
                         [](char c) { return std::isupper(static_cast<unsigned char>(c)); }),
            "an ETag in lower case", o.etag);
      check(ekco::s3::normalizeEtag(o.etag) == o.etag, "normalizing is idempotent", o.etag);
    }
  }

  auto plain = ekco::s3::xmlUnescape(text);
  checkRejection(plain, "xmlUnescape");
  if (plain) {
    check(plain->size() <= text.size(), "unescaping never grows the text");
    if (text.find('&') == std::string_view::npos) check(*plain == text, "no entity, no change");
  }

  auto decoded = ekco::s3::urlDecode(text);
  checkRejection(decoded, "urlDecode");
  if (decoded) {
    check(decoded->size() <= text.size(), "URL-decoding never grows the text");
    if (text.find_first_of("%+") == std::string_view::npos) {
      check(*decoded == text, "no escape, no change");
    }
  }

  // The input as a key, listed as MinIO lists it with encoding-type=url.
  const std::string listing =
      "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>" + s3UrlEncode(text) +
      "</Key><ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>0</Size></Contents>"
      "<EncodingType>url</EncodingType></ListBucketResult>";
  auto odd = ekco::s3::parseListObjectsV2(listing);
  check(odd.has_value(), "a URL-encoded key is read", odd ? "" : odd.error().message());
  check(odd->objects.size() == 1 && odd->objects[0].key == text, "a URL-encoded key reads back",
        odd->objects.empty() ? "" : odd->objects[0].key);

  const ekco::s3::S3Error error = ekco::s3::parseError(text);
  check(!text.empty() || (error.code.empty() && error.message.empty()),
        "an empty body gives an empty error");
  return 0;
}
