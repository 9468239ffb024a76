#include "s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <ctime>

#include <fmt/format.h>

namespace ekco::s3 {

namespace {

std::string hex(const unsigned char* data, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 0xf];
  }
  return out;
}

std::string hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n);
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string trim(std::string_view v) {
  // Leading/trailing spaces removed, inner runs of spaces collapsed (SigV4's "Trimall").
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::string lower(std::string_view v) {
  std::string out(v);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string canonicalQuery(const SignRequest& r) {
  std::vector<std::pair<std::string, std::string>> q;
  for (const auto& [k, v] : r.query) q.emplace_back(uriEncode(k, false), uriEncode(v, false));
  std::sort(q.begin(), q.end());
  std::string out;
  for (const auto& [k, v] : q) {
    if (!out.empty()) out += '&';
    out += k + "=" + v;
  }
  return out;
}

}  // namespace

std::string uriEncode(std::string_view text, bool keep_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 0xf];
    }
  }
  return out;
}

std::string encodedTarget(const SignRequest& request) {
  std::string out = uriEncode(request.path.empty() ? "/" : request.path, true);
  std::string q = canonicalQuery(request);
  if (!q.empty()) out += "?" + q;
  return out;
}

std::string sha256Hex(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), out, &n, EVP_sha256(), nullptr);
  return hex(out, n);
}

Signed sign(const SignRequest& request, const Credentials& credentials, std::string_view region,
            base::WallTime now) {
  const std::time_t t = std::chrono::system_clock::to_time_t(
      std::chrono::time_point_cast<std::chrono::system_clock::duration>(now));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char amz_date[32];
  std::strftime(amz_date, sizeof amz_date, "%Y%m%dT%H%M%SZ", &tm);
  const std::string date(amz_date, 8);
  const std::string payload =
      request.payload_sha256.empty() ? sha256Hex("") : request.payload_sha256;

  std::map<std::string, std::string> headers;  // lower-case name -> trimmed value, sorted
  for (const auto& [k, v] : request.headers) headers[lower(k)] = trim(v);
  headers["host"] = request.host;
  headers["x-amz-content-sha256"] = payload;
  headers["x-amz-date"] = amz_date;
  std::string canonical_headers;
  std::string signed_headers;
  for (const auto& [k, v] : headers) {
    canonical_headers += k + ":" + v + "\n";
    if (!signed_headers.empty()) signed_headers += ';';
    signed_headers += k;
  }
  Signed out;
  out.amz_date = amz_date;
  out.canonical_request =
      fmt::format("{}\n{}\n{}\n{}\n{}\n{}", request.method,
                  uriEncode(request.path.empty() ? "/" : request.path, true),
                  canonicalQuery(request), canonical_headers, signed_headers, payload);
  const std::string scope = fmt::format("{}/{}/s3/aws4_request", date, region);
  out.string_to_sign = fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", amz_date, scope,
                                   sha256Hex(out.canonical_request));
  std::string key = hmac("AWS4" + credentials.secret_key, date);
  key = hmac(key, region);
  key = hmac(key, "s3");
  key = hmac(key, "aws4_request");
  const std::string sig = hmac(key, out.string_to_sign);
  out.authorization = fmt::format(
      "AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}", credentials.access_key,
      scope, signed_headers, hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size()));
  return out;
}

}  // namespace ekco::s3
