// Reading the S3 answers the migration needs (ListAllMyBucketsResult, ListBucketResult of
// ListObjectsV2, Error). S3's XML is flat and machine-written: elements without attributes of
// interest, text with the five predefined entities and numeric character references. This
// reads exactly that; anything else (an unterminated element, a bad number, an unknown entity)
// is kParse with what was wrong. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ekco::s3 {

struct ObjectInfo {
  std::string key{};
  std::uint64_t size = 0;
  std::string etag{};  // without quotes, lower case: "d41d8cd98f00b204e9800998ecf8427e"
  bool operator==(const ObjectInfo&) const = default;
};

struct ObjectPage {
  std::vector<ObjectInfo> objects{};
  bool truncated = false;
  std::string next_token{};  // NextContinuationToken, when truncated
};

struct S3Error {
  std::string code{};  // "NoSuchBucket"
  std::string message{};
};

// "&amp;" -> "&", "&#x41;" -> "A", ...
base::Result<std::string> xmlUnescape(std::string_view text);
// The ETag as compared: quotes dropped, lower case.
std::string normalizeEtag(std::string_view etag);

base::Result<std::vector<std::string>> parseListBuckets(std::string_view xml);
base::Result<ObjectPage> parseListObjectsV2(std::string_view xml);
// Never fails: an unreadable body gives an empty code and the body's start as the message.
S3Error parseError(std::string_view xml);

}  // namespace ekco::s3
