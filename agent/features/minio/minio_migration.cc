#include "agent/features/minio/minio_migration.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "base/strings.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;

namespace {

std::uint64_t number(const std::map<std::string, std::string>& data, const std::string& key) {
  auto it = data.find(key);
  if (it == data.end()) return 0;
  std::uint64_t n = 0;
  std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
  return n;
}

// A single-part upload's ETag is the MD5 of the object (32 hex digits); a multipart one's is
// not ("...-N").
bool isMd5(const std::string& etag) {
  return etag.size() == 32 && std::all_of(etag.begin(), etag.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Proven identical by the listings alone: same size, and ETags that are the same MD5. Anything
// else (a multipart ETag on either side, no ETag) is not proven, whatever the sizes say.
bool provenIdentical(const s3::ObjectInfo& source, const s3::ObjectInfo& dest) {
  return source.size == dest.size && isMd5(source.etag) && source.etag == dest.etag;
}

// Walks a bucket's listing in key order, a page at a time.
class Listing {
 public:
  Listing(s3::Client& client, std::string bucket, std::string after)
      : client_(client), bucket_(std::move(bucket)), after_(std::move(after)) {}
  // The next object, or nullopt at the end.
  Result<std::optional<s3::ObjectInfo>> next() {
    while (index_ >= page_.objects.size()) {
      if (started_ && !page_.truncated) return std::optional<s3::ObjectInfo>();
      auto page = client_.listObjects(bucket_, page_.next_token, started_ ? "" : after_);
      if (!page) {
        // A destination bucket that does not exist yet holds nothing.
        if (!started_ && page.error().code() == ErrorCode::kNotFound && missing_is_empty_) {
          started_ = true;
          page_ = {};
          return std::optional<s3::ObjectInfo>();
        }
        return std::move(page).error();
      }
      started_ = true;
      page_ = std::move(*page);
      index_ = 0;
    }
    return std::optional<s3::ObjectInfo>(page_.objects[index_++]);
  }
  void missingIsEmpty() { missing_is_empty_ = true; }

 private:
  s3::Client& client_;
  std::string bucket_;
  std::string after_;
  s3::ObjectPage page_{};
  std::size_t index_ = 0;
  bool started_ = false;
  bool missing_is_empty_ = false;
};

// The destination's object with `key` if it has one, walking `dest` forward (both in key order).
Result<std::optional<s3::ObjectInfo>> seek(Listing& dest, std::optional<s3::ObjectInfo>& cursor,
                                           bool& cursor_valid, const std::string& key) {
  while (true) {
    if (!cursor_valid) {
      auto n = dest.next();
      if (!n) return std::move(n).error();
      cursor = std::move(*n);
      cursor_valid = true;
    }
    if (!cursor) return std::optional<s3::ObjectInfo>();
    if (cursor->key < key) {
      cursor_valid = false;
      continue;
    }
    if (cursor->key == key) return cursor;
    return std::optional<s3::ObjectInfo>();
  }
}

struct Copied {
  bool uploaded = false;  // false: the destination's copy was found identical once read
  std::string md5{};      // of the source's bytes
};

// (1) Downloads the source's object into a temporary file, computing its MD5; (2) checks it
// against the listing (size, and the ETag when that is an MD5); (3) keeps the destination's copy
// when its ETag is that MD5 (same size); (4) uploads it otherwise, with Content-MD5.
Result<Copied> copyObject(s3::Client& from, s3::Client& to, const std::string& bucket,
                          const s3::ObjectInfo& object, const std::optional<s3::ObjectInfo>& there,
                          const std::string& tmp_dir) {
  const std::string what = fmt::format("copy {}/{}", bucket, base::quoteForMessage(object.key));
  int fd = ::open(tmp_dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Error(fmt::format("{}: a temporary file in {}: {}", what, tmp_dir, std::strerror(errno)),
                 ErrorCode::kIo);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // (1)
  auto got = from.download(bucket, object.key, fd);
  if (!got) return std::move(got).error().wrap(what);
  // (2)
  if (got->size != object.size || (isMd5(object.etag) && got->md5 != object.etag)) {
    return Error(fmt::format("{}: the source answered {} bytes (MD5 {}) for an object listed "
                             "with {} bytes (ETag {}): it changed while writes were stopped",
                             what, got->size, got->md5, object.size, object.etag),
                 ErrorCode::kConflict);
  }
  // (3)
  if (there && there->size == got->size && isMd5(there->etag) && there->etag == got->md5) {
    return Copied{.uploaded = false, .md5 = got->md5};
  }
  // (4)
  if (::lseek(fd, 0, SEEK_SET) != 0) {
    return Error(fmt::format("{}: rewind: {}", what, std::strerror(errno)), ErrorCode::kIo);
  }
  auto etag = to.upload(bucket, object.key, fd, got->size, got->md5);
  if (!etag) return std::move(etag).error().wrap(what);
  if (isMd5(*etag) && *etag != got->md5) {
    return Error(fmt::format("{}: the destination stored MD5 {}, not {}", what, *etag, got->md5),
                 ErrorCode::kIo);
  }
  return Copied{.uploaded = true, .md5 = got->md5};
}

}  // namespace

void CopyDigests::record(const std::string& bucket, const std::string& key, Digest digest) {
  const std::size_t cost = key.size() + digest.source_etag.size() + digest.md5.size() + 64;
  auto& keys = by_bucket_[bucket];
  auto it = keys.find(key);
  if (it != keys.end()) {
    it->second = std::move(digest);
    return;
  }
  if (bytes_ + cost > kMaxBytes) return;  // verification reads this one again
  bytes_ += cost;
  ++count_;
  keys.emplace(key, std::move(digest));
}

std::string CopyDigests::md5(const std::string& bucket, const s3::ObjectInfo& object) const {
  auto b = by_bucket_.find(bucket);
  if (b == by_bucket_.end()) return "";
  auto k = b->second.find(object.key);
  if (k == b->second.end()) return "";
  const Digest& d = k->second;
  // Read with another ETag or size: the object changed since, the MD5 is not its.
  if (d.source_etag.empty() || d.source_etag != object.etag || d.size != object.size) return "";
  return d.md5;
}

void CopyDigests::clear() {
  by_bucket_.clear();
  count_ = 0;
  bytes_ = 0;
}

std::map<std::string, std::string> progressData(const CopyProgress& p) {
  return {{"buckets-done", fmt::to_string(fmt::join(p.buckets_done, "\n"))},
          {"bucket", p.bucket},
          {"after", p.after},
          {"copied-objects", std::to_string(p.objects)},
          {"copied-bytes", std::to_string(p.bytes)},
          {"skipped-objects", std::to_string(p.skipped)}};
}

CopyProgress parseProgress(const std::map<std::string, std::string>& data) {
  CopyProgress p;
  auto get = [&](const std::string& k) {
    auto it = data.find(k);
    return it == data.end() ? std::string() : it->second;
  };
  const std::string done = get("buckets-done");
  for (std::size_t pos = 0; pos < done.size();) {
    std::size_t nl = done.find('\n', pos);
    if (nl == std::string::npos) nl = done.size();
    if (nl > pos) p.buckets_done.push_back(done.substr(pos, nl - pos));
    pos = nl + 1;
  }
  p.bucket = get("bucket");
  p.after = get("after");
  p.objects = number(data, "copied-objects");
  p.bytes = number(data, "copied-bytes");
  p.skipped = number(data, "skipped-objects");
  return p;
}

Result<bool> copyBuckets(s3::Client& from, s3::Client& to, CopyProgress& p,
                         const CopyOptions& options, const base::Clock& clock) {
  const auto start = clock.monoNow();
  auto out_of_time = [&] {
    return options.budget.count() > 0 && clock.monoNow() - start >= options.budget;
  };
  auto checkpoint = [&]() -> base::Status {
    return options.checkpoint ? options.checkpoint(p) : base::Status();
  };
  auto buckets = from.listBuckets();
  if (!buckets) return std::move(buckets).error().wrap("list the source's buckets");
  for (const std::string& bucket : *buckets) {
    if (std::find(p.buckets_done.begin(), p.buckets_done.end(), bucket) != p.buckets_done.end()) {
      continue;
    }
    if (p.bucket != bucket) {
      p.bucket = bucket;
      p.after.clear();
    }
    if (auto made = to.createBucket(bucket); !made) return std::move(made).error();
    Listing source(from, bucket, p.after);
    Listing dest(to, bucket, p.after);
    dest.missingIsEmpty();
    std::optional<s3::ObjectInfo> cursor;
    bool cursor_valid = false;
    std::size_t since_checkpoint = 0;
    while (true) {
      auto object = source.next();
      if (!object) return std::move(object).error().wrap("list " + bucket + " on the source");
      if (!*object) break;
      auto there = seek(dest, cursor, cursor_valid, (*object)->key);
      if (!there) return std::move(there).error().wrap("list " + bucket + " on the destination");
      if (*there && provenIdentical(**object, **there)) {
        ++p.skipped;
      } else {
        auto copied = copyObject(from, to, bucket, **object, *there, options.tmp_dir);
        if (!copied) return std::move(copied).error();
        if (options.digests != nullptr && !isMd5((*object)->etag)) {
          options.digests->record(
              bucket, (*object)->key,
              {.source_etag = (*object)->etag, .size = (*object)->size, .md5 = copied->md5});
        }
        if (copied->uploaded) {
          ++p.objects;
          p.bytes += (*object)->size;
        } else {
          ++p.skipped;
        }
      }
      p.after = (*object)->key;
      if (++since_checkpoint >= options.checkpoint_every || out_of_time()) {
        since_checkpoint = 0;
        if (auto saved = checkpoint(); !saved) return std::move(saved).error();
        if (out_of_time()) return false;
      }
    }
    p.buckets_done.push_back(bucket);
    p.bucket.clear();
    p.after.clear();
    if (auto saved = checkpoint(); !saved) return std::move(saved).error();
    if (out_of_time()) return false;
  }
  return true;
}

std::string VerifyResult::describe() const {
  if (ok()) {
    std::string out =
        fmt::format("{} buckets, {} objects, {} bytes identical", buckets, objects, bytes);
    if (read_again > 0) {
      out += fmt::format(" ({} object{} read again)", read_again, read_again == 1 ? "" : "s");
    }
    return out;
  }
  std::string out = fmt::format("{} differences", problem_count);
  for (const std::string& p : problems) out += "; " + p;
  if (problem_count > problems.size()) out += "; ...";
  return out;
}

namespace {

// The MD5 of an object's bytes: its ETag when that is one, else `known` (what a copy computed),
// else read now (`read` set). nullopt when it is gone or answers another size than listed (a
// problem for the caller to name).
Result<std::optional<std::string>> contentMd5(s3::Client& client, const std::string& bucket,
                                              const s3::ObjectInfo& object,
                                              const std::string& known, bool& read) {
  if (isMd5(object.etag)) return std::optional<std::string>(object.etag);
  if (!known.empty()) return std::optional<std::string>(known);
  read = true;
  auto got = client.digest(bucket, object.key);
  if (!got) {
    if (got.error().code() == ErrorCode::kNotFound) return std::optional<std::string>();
    return std::move(got).error();
  }
  if (got->size != object.size) return std::optional<std::string>();
  return std::optional<std::string>(got->md5);
}

}  // namespace

Result<VerifyResult> verifyCopy(s3::Client& from, s3::Client& to, const CopyDigests* copied) {
  VerifyResult r;
  auto problem = [&](std::string text) {
    if (r.problems.size() < 10) r.problems.push_back(std::move(text));
    ++r.problem_count;
  };
  auto buckets = from.listBuckets();
  if (!buckets) return std::move(buckets).error().wrap("verify: list the source's buckets");
  for (const std::string& bucket : *buckets) {
    ++r.buckets;
    Listing source(from, bucket, "");
    Listing dest(to, bucket, "");
    std::optional<s3::ObjectInfo> cursor;
    bool cursor_valid = false;
    while (true) {
      auto object = source.next();
      if (!object) return std::move(object).error().wrap("verify: list " + bucket);
      if (!*object) break;
      ++r.objects;
      r.bytes += (*object)->size;
      auto there = seek(dest, cursor, cursor_valid, (*object)->key);
      if (!there) {
        if (there.error().code() == ErrorCode::kNotFound) {
          problem(fmt::format("bucket {} is missing on ha-minio", bucket));
          break;
        }
        return std::move(there).error().wrap("verify: list " + bucket + " on the destination");
      }
      const std::string name = fmt::format("{}/{}", bucket, base::quoteForMessage((*object)->key));
      if (!*there) {
        problem(name + " is missing on ha-minio");
        continue;
      }
      if ((*there)->size != (*object)->size) {
        problem(fmt::format("{} has {} bytes on ha-minio, {} on the source", name, (*there)->size,
                            (*object)->size));
        continue;
      }
      if (provenIdentical(**object, **there)) continue;
      if (isMd5((*object)->etag) && isMd5((*there)->etag)) {
        problem(fmt::format("{} has ETag {} on ha-minio, {} on the source", name, (*there)->etag,
                            (*object)->etag));
        continue;
      }
      // An ETag that is not an MD5 on one side: compare the MD5s of the bytes.
      bool read = false;
      auto mine = contentMd5(from, bucket, **object,
                             copied != nullptr ? copied->md5(bucket, **object) : "", read);
      if (!mine) return std::move(mine).error().wrap("verify: read " + name + " on the source");
      auto theirs = contentMd5(to, bucket, **there, "", read);
      if (!theirs) return std::move(theirs).error().wrap("verify: read " + name + " on ha-minio");
      if (read) ++r.read_again;
      if (!*mine) {
        problem(fmt::format("{} changed on the source while writes were stopped", name));
      } else if (!*theirs) {
        problem(fmt::format("{} changed on ha-minio while it was verified", name));
      } else if (**mine != **theirs) {
        problem(
            fmt::format("{} has other bytes on ha-minio (MD5 {}) than on the source (MD5 {}, "
                        "ETag {})",
                        name, **theirs, **mine, (*object)->etag));
      }
    }
  }
  return r;
}

}  // namespace ekco::agent
