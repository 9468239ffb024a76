// The MinIO migration's readers of S3 answers (s3/xml.h): parseListBuckets,
// parseListObjectsV2, parseError and xmlUnescape, on bodies an S3 server (or whatever answers on
// its port) returns.
//
// Checks: a rejection is kParse with a one-line message free of control characters; an accepted
// page that is truncated has a continuation token; every ETag is normalized (no quotes, no upper
// case) and normalizing is idempotent; unescaping never grows the text and leaves text without
// '&' as it is; parseError never fails and says something.
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

  const ekco::s3::S3Error error = ekco::s3::parseError(text);
  check(!text.empty() || (error.code.empty() && error.message.empty()),
        "an empty body gives an empty error");
  return 0;
}
