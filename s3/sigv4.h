// AWS Signature Version 4 for S3 (https://docs.aws.amazon.com/AmazonS3/latest/API/
// sig-v4-header-based-auth.html), header-based, as botocore's S3SigV4Auth computes it:
//   - the canonical URI is the request path with every byte but A-Z a-z 0-9 - . _ ~ / percent-
//     encoded once (S3 does not normalize or double-encode paths);
//   - the canonical query is every parameter, key and value percent-encoded (nothing but the
//     unreserved characters kept), sorted by key then value; a bare key is "key=";
//   - the signed headers are host, x-amz-content-sha256, x-amz-date and any extra headers given,
//     lower-cased, values trimmed, sorted.
// Pure: the caller passes the time (tests sign at a fixed instant and compare with botocore).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"

namespace ekco::s3 {

// x-amz-content-sha256 for a body that is not hashed (streamed uploads and downloads).
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

struct Credentials {
  std::string access_key{};
  std::string secret_key{};
};

struct SignRequest {
  std::string method = "GET";
  std::string host{};      // "127.0.0.1:9000": the Host header as sent
  std::string path = "/";  // decoded: "/bucket/a b/c" (encoded by the signer and the client)
  std::vector<std::pair<std::string, std::string>> query{};  // decoded keys and values
  std::map<std::string, std::string> headers{};              // extra headers to sign (any case)
  std::string payload_sha256{};                              // hex, or kUnsignedPayload
};

struct Signed {
  std::string amz_date{};       // "20261126T103000Z"
  std::string authorization{};  // "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., ..."
  std::string canonical_request{};
  std::string string_to_sign{};
};

// Percent-encodes every byte but A-Z a-z 0-9 - . _ ~ (and '/' when keep_slash).
std::string uriEncode(std::string_view text, bool keep_slash);
// The encoded path and query of a request, exactly as signed ("/b/a%20b?list-type=2").
std::string encodedTarget(const SignRequest& request);

std::string sha256Hex(std::string_view data);

Signed sign(const SignRequest& request, const Credentials& credentials, std::string_view region,
            base::WallTime now);

}  // namespace ekco::s3
