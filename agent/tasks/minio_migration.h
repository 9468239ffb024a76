// The MinIO data migration's copy and verification (used by the minio-ha controller,
// agent/controllers/minio_ha.h): every bucket and object from the old single-replica MinIO to
// ha-minio over the S3 API (s3/client.h).
//
// Copying is resumable and never copies an object twice needlessly: buckets go in name order and
// objects in key order (S3 lists in that order), the progress (buckets done, the bucket in
// progress and the last key done in it) is handed to `checkpoint` every `checkpoint_every`
// objects and at each bucket's end, so the caller can keep it in the cluster; a copy resumed from
// a progress starts after its last key, and an object the destination already holds with the
// same size and ETag is skipped (the destination's listing is walked in step with the source's).
// Each object goes through an unnamed temporary file (O_TMPFILE in tmp_dir): a 50 MiB object
// costs 50 MiB of disk, not of memory. Its bytes are checked twice: their MD5 against the
// source's ETag (a single-part ETag is the MD5) and, through Content-MD5, by the destination.
//
// Verification lists both sides again: every source bucket must exist on the destination, with
// every object of the source, of the same size and (for single-part ETags, which are MD5s) the
// same ETag. A multipart object's ETag is not an MD5, so it is compared by size (its bytes were
// checked by Content-MD5 when copied). Objects only the destination has are not a failure.
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

struct CopyOptions {
  std::string tmp_dir = "/tmp";
  // Stop (and return false) after this long, so one reconcile pass stays short; 0: no bound.
  std::chrono::milliseconds budget{0};
  std::size_t checkpoint_every = 100;
  // Records the progress; an error stops the copy (a lost leadership, a conflict).
  std::function<base::Status(const CopyProgress&)> checkpoint{};
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
  bool ok() const { return problem_count == 0; }
  // "3 buckets, 1024 objects, 104857600 bytes identical" or the first problems.
  std::string describe() const;
};

[[nodiscard]] base::Result<VerifyResult> verifyCopy(s3::Client& from, s3::Client& to);

}  // namespace ekco::agent
