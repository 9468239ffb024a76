#include "s3/client.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/strings.h"

namespace ekco::s3 {

using base::Error;
using base::ErrorCode;
using base::Result;

namespace {

std::string md5ToHex(const unsigned char* d, unsigned int n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += kDigits[d[i] >> 4];
    out += kDigits[d[i] & 0xf];
  }
  return out;
}

ErrorCode codeForStatus(int status) {
  if (status == 404) return ErrorCode::kNotFound;
  if (status == 403) return ErrorCode::kPermissionDenied;
  if (status == 409) return ErrorCode::kConflict;
  if (status >= 500) return ErrorCode::kUnavailable;
  return ErrorCode::kInvalidArgument;
}

}  // namespace

std::string md5HexToBase64(const std::string& hex) {
  if (hex.size() != 32) return "";
  unsigned char raw[16];
  for (int i = 0; i < 16; ++i) {
    unsigned int v = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &v) != 1) return "";
    raw[i] = static_cast<unsigned char>(v);
  }
  unsigned char out[32] = {};
  const int n = EVP_EncodeBlock(out, raw, 16);
  return std::string(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
}

// One request: what to send and where the answer goes.
struct Client::Exchange {
  SignRequest request{};
  std::string body_text{};  // a small answer (XML), collected
  int out_fd = -1;          // download: the body goes here instead
  bool hash_only = false;   // digest: the body is hashed and dropped
  EVP_MD_CTX* md5 = nullptr;
  std::uint64_t written = 0;
  int in_fd = -1;  // upload: the body comes from here
  std::uint64_t in_size = 0;
  std::uint64_t in_sent = 0;
  std::string etag{};
  std::string io_error{};
  bool sign = true;
  bool nobody = false;   // HEAD
  void* easy = nullptr;  // CURL*: the write callback asks it for the status
};

Client::Client(Endpoint endpoint, const base::Clock& clock)
    : endpoint_(std::move(endpoint)), clock_(clock), curl_(curl_easy_init()) {}

Client::~Client() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

Result<int> Client::perform(Exchange& x) {
  CURL* easy = static_cast<CURL*>(curl_);
  if (easy == nullptr) return Error("curl_easy_init failed", ErrorCode::kUnknown);
  curl_easy_reset(easy);
  x.easy = easy;
  x.request.host = endpoint_.host;
  const std::string url = "http://" + endpoint_.host + encodedTarget(x.request);
  curl_slist* headers = nullptr;
  if (x.sign) {
    const Signed s = sign(x.request, endpoint_.credentials, endpoint_.region, clock_.wallNow());
    headers = curl_slist_append(headers, ("Authorization: " + s.authorization).c_str());
    headers = curl_slist_append(headers, ("x-amz-date: " + s.amz_date).c_str());
    const std::string payload =
        x.request.payload_sha256.empty() ? sha256Hex("") : x.request.payload_sha256;
    headers = curl_slist_append(headers, ("x-amz-content-sha256: " + payload).c_str());
  }
  for (const auto& [k, v] : x.request.headers) {
    headers = curl_slist_append(headers, (k + ": " + v).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http");
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(endpoint_.connect_timeout.count()));
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME,
                   std::max(1L, static_cast<long>(endpoint_.idle_timeout.count() / 1000)));
  if (x.nobody) {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else if (x.request.method == "PUT") {
    curl_easy_setopt(easy, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(easy, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(x.in_size));
    curl_easy_setopt(
        easy, CURLOPT_READFUNCTION,
        +[](char* buf, std::size_t size, std::size_t n, void* p) -> std::size_t {
          auto* e = static_cast<Exchange*>(p);
          if (e->in_fd < 0) return 0;
          const std::uint64_t left = e->in_size - e->in_sent;
          const std::size_t want =
              static_cast<std::size_t>(std::min<std::uint64_t>(size * n, left));
          if (want == 0) return 0;
          ssize_t got;
          do {
            got = ::read(e->in_fd, buf, want);
          } while (got < 0 && errno == EINTR);
          if (got <= 0) {
            e->io_error = got == 0 ? "the file ended early" : std::strerror(errno);
            return CURL_READFUNC_ABORT;
          }
          e->in_sent += static_cast<std::uint64_t>(got);
          return static_cast<std::size_t>(got);
        });
    curl_easy_setopt(easy, CURLOPT_READDATA, &x);
  } else {
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, x.request.method.c_str());
  }
  curl_easy_setopt(
      easy, CURLOPT_HEADERFUNCTION, +[](char* buf, std::size_t size, std::size_t n, void* p) {
        auto* e = static_cast<Exchange*>(p);
        std::string_view line(buf, size * n);
        if (line.size() > 5 && strncasecmp(line.data(), "etag:", 5) == 0) {
          e->etag = normalizeEtag(base::trimSpace(line.substr(5)));
        }
        return size * n;
      });
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(
      easy, CURLOPT_WRITEFUNCTION, +[](char* buf, std::size_t size, std::size_t n, void* p) {
        auto* e = static_cast<Exchange*>(p);
        const std::size_t len = size * n;
        long status = 0;
        curl_easy_getinfo(static_cast<CURL*>(e->easy), CURLINFO_RESPONSE_CODE, &status);
        if (e->hash_only && status == 200) {
          EVP_DigestUpdate(e->md5, buf, len);
          e->written += len;
          return len;
        }
        if (e->out_fd < 0 || status != 200) {  // an error answer is collected, not written
          if (e->body_text.size() + len > (std::size_t{64} << 20)) return std::size_t{0};
          e->body_text.append(buf, len);
          return len;
        }
        std::size_t done = 0;
        while (done < len) {
          const ssize_t w = ::write(e->out_fd, buf + done, len - done);
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) {
            e->io_error = std::strerror(errno);
            return std::size_t{0};
          }
          done += static_cast<std::size_t>(w);
        }
        if (e->md5 != nullptr) EVP_DigestUpdate(e->md5, buf, len);
        e->written += len;
        return len;
      });
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &x);
  const CURLcode rc = curl_easy_perform(easy);
  curl_slist_free_all(headers);
  const std::string what =
      fmt::format("{} {}", x.request.method, base::quoteForMessage(x.request.path, 200));
  if (rc != CURLE_OK) {
    const ErrorCode code = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST
                               ? ErrorCode::kUnavailable
                           : rc == CURLE_OPERATION_TIMEDOUT ? ErrorCode::kTimeout
                                                            : ErrorCode::kIo;
    std::string detail = curl_easy_strerror(rc);
    if (!x.io_error.empty()) detail += " (" + x.io_error + ")";
    return Error(fmt::format("{} on {}: {}", what, endpoint_.host, detail), code);
  }
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  return static_cast<int>(status);
}

namespace {

Error answerError(const std::string& what, const std::string& host, int status,
                  const std::string& body) {
  const S3Error e = parseError(body);
  return Error(
      fmt::format("{} on {}: HTTP {}{}{}", what, host, status, e.code.empty() ? "" : " " + e.code,
                  e.message.empty() ? "" : ": " + e.message),
      codeForStatus(status));
}

}  // namespace

Result<std::vector<std::string>> Client::listBuckets() {
  Exchange x{.request = {.method = "GET", .path = "/"}};
  auto status = perform(x);
  if (!status) return std::move(status).error();
  if (*status != 200) return answerError("list buckets", endpoint_.host, *status, x.body_text);
  return parseListBuckets(x.body_text);
}

Result<ObjectPage> Client::listObjects(const std::string& bucket, const std::string& token,
                                       const std::string& start_after, int max_keys) {
  Exchange x{.request = {.method = "GET", .path = "/" + bucket}};
  // encoding-type=url: keys with characters XML cannot carry come back intact (s3/xml.h).
  x.request.query = {
      {"list-type", "2"}, {"max-keys", std::to_string(max_keys)}, {"encoding-type", "url"}};
  if (!token.empty()) x.request.query.emplace_back("continuation-token", token);
  if (token.empty() && !start_after.empty())
    x.request.query.emplace_back("start-after", start_after);
  auto status = perform(x);
  if (!status) return std::move(status).error();
  if (*status != 200) {
    return answerError("list objects of " + bucket, endpoint_.host, *status, x.body_text);
  }
  auto page = parseListObjectsV2(x.body_text);
  if (!page) return std::move(page).error().wrap("list objects of " + bucket);
  return page;
}

Result<std::vector<ObjectInfo>> Client::listAllObjects(const std::string& bucket) {
  std::vector<ObjectInfo> out;
  std::string token;
  while (true) {
    auto page = listObjects(bucket, token, "");
    if (!page) return std::move(page).error();
    for (ObjectInfo& o : page->objects) out.push_back(std::move(o));
    if (!page->truncated) break;
    token = page->next_token;
  }
  return out;
}

Result<std::optional<ObjectInfo>> Client::head(const std::string& bucket, const std::string& key) {
  Exchange x{.request = {.method = "HEAD", .path = "/" + bucket + "/" + key}, .nobody = true};
  auto status = perform(x);
  if (!status) return std::move(status).error();
  if (*status == 404) return std::optional<ObjectInfo>();
  if (*status != 200) return answerError("head " + bucket + "/" + key, endpoint_.host, *status, "");
  curl_off_t length = -1;
  curl_easy_getinfo(static_cast<CURL*>(curl_), CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
  return std::optional<ObjectInfo>(
      ObjectInfo{.key = key,
                 .size = static_cast<std::uint64_t>(std::max<curl_off_t>(length, 0)),
                 .etag = x.etag});
}

base::Status Client::createBucket(const std::string& bucket) {
  Exchange x{.request = {.method = "PUT", .path = "/" + bucket}};
  x.in_size = 0;
  auto status = perform(x);
  if (!status) return std::move(status).error();
  if (*status == 200) return {};
  const S3Error e = parseError(x.body_text);
  if (*status == 409 && e.code == "BucketAlreadyOwnedByYou") return {};
  if (*status == 409 && e.code == "BucketAlreadyExists") {
    // Some servers (s3rver) say this for their only account's own bucket: ours if we can list it.
    auto listed = listObjects(bucket, "", "", 1);
    if (listed) return {};
  }
  return answerError("create bucket " + bucket, endpoint_.host, *status, x.body_text);
}

Result<Download> Client::download(const std::string& bucket, const std::string& key, int fd) {
  return get(bucket, key, fd);
}

Result<Download> Client::digest(const std::string& bucket, const std::string& key) {
  return get(bucket, key, -1);
}

Result<Download> Client::get(const std::string& bucket, const std::string& key, int fd) {
  Exchange x{.request = {.method = "GET",
                         .path = "/" + bucket + "/" + key,
                         .payload_sha256 = std::string(kUnsignedPayload)},
             .out_fd = -1};
  // The body goes to fd only for a 200 (or is only hashed when fd < 0): an error answer's XML is
  // collected instead.
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md5(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!md5 || EVP_DigestInit_ex(md5.get(), EVP_md5(), nullptr) != 1) {
    return Error("get " + bucket + "/" + key + ": cannot start an MD5", ErrorCode::kUnknown);
  }
  x.md5 = md5.get();
  x.out_fd = fd;
  x.hash_only = fd < 0;
  auto status = perform(x);
  if (!status) return std::move(status).error();
  if (*status != 200) {
    return answerError("get " + bucket + "/" + key, endpoint_.host, *status, x.body_text);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(md5.get(), digest, &n);
  return Download{.size = x.written, .md5 = md5ToHex(digest, n), .etag = x.etag};
}

Result<std::string> Client::upload(const std::string& bucket, const std::string& key, int fd,
                                   std::uint64_t size, const std::string& md5_hex) {
  Exchange x{.request = {.method = "PUT",
                         .path = "/" + bucket + "/" + key,
                         .headers = {{"Content-MD5", md5HexToBase64(md5_hex)}},
                         .payload_sha256 = std::string(kUnsignedPayload)},
             .in_fd = fd,
             .in_size = size};
  auto status = perform(x);
  if (!status) return std::move(status).error();
  if (*status != 200) {
    return answerError("put " + bucket + "/" + key, endpoint_.host, *status, x.body_text);
  }
  return x.etag;
}

Result<int> Client::healthStatus(const std::string& path_and_query) {
  Exchange x{.sign = false};
  const std::size_t q = path_and_query.find('?');
  x.request.path = path_and_query.substr(0, q);
  if (q != std::string::npos) {
    const std::string query = path_and_query.substr(q + 1);
    const std::size_t eq = query.find('=');
    x.request.query.emplace_back(query.substr(0, eq),
                                 eq == std::string::npos ? "" : query.substr(eq + 1));
  }
  return perform(x);
}

}  // namespace ekco::s3
