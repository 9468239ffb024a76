// Reading the S3 answers the migration needs (ListAllMyBucketsResult, ListBucketResult of
// ListObjectsV2, Error). S3's XML is flat and machine-written: elements without attributes of
// interest, text with the five predefined entities and numeric character references. This
// reads exactly that; anything else (an unterminated element, a bad number, an unknown entity,
// a bad URL escape) is kParse with what was wrong. Pure.
//
// Keys: XML 1.0 cannot carry most control characters, so a key holding one comes back altered
// (MinIO, like Go's encoding/xml, writes U+FFFD instead) unless the listing is asked for
// `encoding-type=url` (the client always asks). A server that honours it says so with
// <EncodingType>url</EncodingType> and URL-encodes each Key ("%01", "+" for a space); only then
// are the keys decoded (s3rver ignores the parameter and sends keys as they are).
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
// An S3 `encoding-type=url` value: "%XX" -> the byte, "+" -> " "; a '%' without two hex digits
// is kParse.
base::Result<std::string> urlDecode(std::string_view text);
// The ETag as compared: quotes dropped, lower case.
std::string normalizeEtag(std::string_view etag);

base::Result<std::vector<std::string>> parseListBuckets(std::string_view xml);
base::Result<ObjectPage> parseListObjectsV2(std::string_view xml);
// Never fails: an unreadable body gives an empty code and the body's start as the message.
S3Error parseError(std::string_view xml);

}  // namespace ekco::s3
