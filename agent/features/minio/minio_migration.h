// The MinIO data migration's copy and verification (used by the minio-ha controller,
// agent/features/minio/minio_ha.h): every bucket and object from the old single-replica MinIO to
// ha-minio over the S3 API (s3/client.h).
//
// What proves two objects hold the same bytes: their MD5s. A single-part upload's ETag is its
// MD5 (32 hex digits), so a listing proves it; a multipart upload's ETag ("<md5>-N", the MD5 of
// its parts' MD5s) or any other ETag proves nothing about the bytes, and neither does a size.
// Such an object is read (its MD5 computed as it streams) before it is taken as identical.
//
// Copying is resumable and never copies an object twice needlessly: buckets go in name order and
// objects in key order (S3 lists in that order), the progress (buckets done, the bucket in
// progress and the last key done in it) is handed to `checkpoint` every `checkpoint_every`
// objects and at each bucket's end, so the caller can keep it in the cluster; a copy resumed from
// a progress starts after its last key. The destination's listing is walked in step with the
// source's: an object it holds with the same size and the same MD5 ETag is skipped without being
// read; a source object whose ETag is not an MD5 is downloaded, and uploaded unless the
// destination's ETag is the MD5 just computed (same size). Each object goes through an unnamed
// temporary file (O_TMPFILE in tmp_dir): a 50 MiB object costs 50 MiB of disk, not of memory. Its
// bytes are checked twice: their MD5 against the source's ETag when that is an MD5, and, through
// Content-MD5, by the destination (whose ETag must then be that MD5 when it is one).
//
// Verification lists both sides again: every source bucket must exist on the destination, with
// every object of the source, of the same size and the same MD5. The source's MD5 is its ETag
// when that is one, else the MD5 this copy computed while reading the object (CopyDigests: the
// source's ETag and size must still be those it had then), else the object is read again; the
// destination's is its ETag when that is one, else it is read again. Objects only the destination
// has are not a failure.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "s3/client.h"

namespace ekco::agent {

struct CopyProgress {
  std::vector<std::string> buckets_done{};
  std::string bucket{};       // in progress ("" between buckets)
  std::string after{};        // the last key done in `bucket`
  std::uint64_t objects = 0;  // copied
  std::uint64_t bytes = 0;    // copied
  std::uint64_t skipped = 0;  // already on the destination, identical
  bool operator==(const CopyProgress&) const = default;
};

// As ConfigMap data (keys buckets-done, bucket, after, copied-objects, copied-bytes,
// skipped-objects) and back; unreadable numbers read as 0.
std::map<std::string, std::string> progressData(const CopyProgress& progress);
CopyProgress parseProgress(const std::map<std::string, std::string>& data);

// What a copy computed while reading the source's objects whose ETag is not an MD5, so that
// verification need not read them again: per bucket and key, the source's ETag and size when
// read, and the MD5 of the bytes read. Bounded (kMaxBytes of keys and digests): past it, nothing
// more is recorded and verification reads those objects again.
class CopyDigests {
 public:
  static constexpr std::size_t kMaxBytes = std::size_t{4} << 20;
  struct Digest {
    std::string source_etag{};
    std::uint64_t size = 0;
    std::string md5{};
  };
  void record(const std::string& bucket, const std::string& key, Digest digest);
  // The MD5 recorded for the object if it was read with this ETag and size; "" otherwise.
  std::string md5(const std::string& bucket, const s3::ObjectInfo& object) const;
  void clear();
  std::size_t size() const { return count_; }

 private:
  std::map<std::string, std::map<std::string, Digest>> by_bucket_{};
  std::size_t count_ = 0;
  std::size_t bytes_ = 0;
};

struct CopyOptions {
  std::string tmp_dir = "/tmp";
  // Stop (and return false) after this long, so one reconcile pass stays short; 0: no bound.
  std::chrono::milliseconds budget{0};
  std::size_t checkpoint_every = 100;
  // Records the progress; an error stops the copy (a lost leadership, a conflict).
  std::function<base::Status(const CopyProgress&)> checkpoint{};
  // Where to record the MD5s computed for objects whose ETag is not one (none: not recorded).
  CopyDigests* digests = nullptr;
};

// Copies from `progress` on. True when every bucket is done, false when the budget ran out.
[[nodiscard]] base::Result<bool> copyBuckets(s3::Client& from, s3::Client& to,
                                             CopyProgress& progress, const CopyOptions& options,
                                             const base::Clock& clock);

struct VerifyResult {
  std::size_t buckets = 0;
  std::size_t objects = 0;
  std::uint64_t bytes = 0;
  std::vector<std::string> problems{};  // at most 10 shown; problem_count has them all
  std::size_t problem_count = 0;
  std::size_t read_again = 0;  // objects downloaded (and hashed) to compare their bytes
  bool ok() const { return problem_count == 0; }
  // "3 buckets, 1024 objects, 104857600 bytes identical" (with "(2 multipart objects read
  // again)" when some were) or the first problems.
  std::string describe() const;
};

// `copied`: the MD5s the copy computed (may be null: every object whose ETag is not an MD5 is
// then read again).
[[nodiscard]] base::Result<VerifyResult> verifyCopy(s3::Client& from, s3::Client& to,
                                                    const CopyDigests* copied = nullptr);

}  // namespace ekco::agent
