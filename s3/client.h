// An S3 client for the MinIO data migration: path-style requests (http://host:port/bucket/key)
// signed with SigV4 (s3/sigv4.h) over libcurl (client.cc is the only libcurl file here). Objects
// move through files, never whole in memory: download() writes the body to a file descriptor as
// it arrives (hashing it with MD5 on the way), upload() reads it back from one.
//
// Errors: a failed exchange is kUnavailable (nothing reached the server) or kIo/kTimeout; an S3
// error answer is an Error naming the request, the HTTP status and S3's Code and Message
// (kNotFound for 404, kPermissionDenied for 403, kInvalidArgument for other 4xx, kUnavailable for
// 5xx). Thread-compatible: one client per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "s3/sigv4.h"
#include "s3/xml.h"

namespace ekco::s3 {

struct Endpoint {
  std::string host{};  // "10.32.0.7:9000" or "[fd00::7]:9000"
  Credentials credentials{};
  std::string region = "us-east-1";
  std::chrono::milliseconds connect_timeout{5000};
  // A request ends with kTimeout when no byte moves for this long (a 50 MiB object on a slow
  // disk is fine, a hung server is not).
  std::chrono::milliseconds idle_timeout{30000};
};

struct Download {
  std::uint64_t size = 0;
  std::string md5{};   // hex, lower case, of the bytes written
  std::string etag{};  // as the server answered, normalized
};

class Client {
 public:
  Client(Endpoint endpoint, const base::Clock& clock);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Endpoint& endpoint() const { return endpoint_; }

  [[nodiscard]] base::Result<std::vector<std::string>> listBuckets();
  // ListObjectsV2, one page (at most max_keys) after `token` (or after the key `start_after`
  // when token is empty), in key order.
  [[nodiscard]] base::Result<ObjectPage> listObjects(const std::string& bucket,
                                                     const std::string& token,
                                                     const std::string& start_after,
                                                     int max_keys = 1000);
  // Every object of the bucket after `start_after` (all pages).
  [[nodiscard]] base::Result<std::vector<ObjectInfo>> listAllObjects(const std::string& bucket);
  // nullopt when absent.
  [[nodiscard]] base::Result<std::optional<ObjectInfo>> head(const std::string& bucket,
                                                             const std::string& key);
  // Creates the bucket; one this account already owns is fine.
  [[nodiscard]] base::Status createBucket(const std::string& bucket);
  [[nodiscard]] base::Result<Download> download(const std::string& bucket, const std::string& key,
                                                int fd);
  // GETs the object only to hash it: its size and MD5 as they arrive, the bytes kept nowhere.
  [[nodiscard]] base::Result<Download> digest(const std::string& bucket, const std::string& key);
  // PUTs `size` bytes read from `fd` (from its current offset) with Content-MD5 `md5_hex`, so
  // the server refuses a body that does not match; returns the ETag it answered.
  [[nodiscard]] base::Result<std::string> upload(const std::string& bucket, const std::string& key,
                                                 int fd, std::uint64_t size,
                                                 const std::string& md5_hex);
  // GET `path` unsigned (MinIO's /minio/health/cluster, ?maintenance=true): the HTTP status, or
  // an error when none came.
  [[nodiscard]] base::Result<int> healthStatus(const std::string& path_and_query);

 private:
  struct Exchange;
  base::Result<int> perform(Exchange& exchange);
  // download() into fd, or digest() when fd < 0.
  base::Result<Download> get(const std::string& bucket, const std::string& key, int fd);

  Endpoint endpoint_;
  const base::Clock& clock_;
  void* curl_ = nullptr;  // CURL*, reused (keep-alive)
};

// Hex MD5 -> base64 (the Content-MD5 header); "" when the hex is malformed.
std::string md5HexToBase64(const std::string& hex);

}  // namespace ekco::s3
