#include "agent/tasks/minio_migration.h"

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

bool identical(const s3::ObjectInfo& a, const s3::ObjectInfo& b) {
  if (a.size != b.size) return false;
  return !isMd5(a.etag) || a.etag == b.etag;
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

base::Status copyObject(s3::Client& from, s3::Client& to, const std::string& bucket,
                        const s3::ObjectInfo& object, const std::string& tmp_dir) {
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
  auto got = from.download(bucket, object.key, fd);
  if (!got) return std::move(got).error().wrap(what);
  if (got->size != object.size || (isMd5(object.etag) && got->md5 != object.etag)) {
    return Error(fmt::format("{}: the source answered {} bytes (MD5 {}) for an object listed "
                             "with {} bytes (ETag {}): it changed while writes were stopped",
                             what, got->size, got->md5, object.size, object.etag),
                 ErrorCode::kConflict);
  }
  if (::lseek(fd, 0, SEEK_SET) != 0) {
    return Error(fmt::format("{}: rewind: {}", what, std::strerror(errno)), ErrorCode::kIo);
  }
  auto etag = to.upload(bucket, object.key, fd, got->size, got->md5);
  if (!etag) return std::move(etag).error().wrap(what);
  if (isMd5(*etag) && *etag != got->md5) {
    return Error(fmt::format("{}: the destination stored MD5 {}, not {}", what, *etag, got->md5),
                 ErrorCode::kIo);
  }
  return {};
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) {
    if (!out.empty()) out += '\n';
    out += s;
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> progressData(const CopyProgress& p) {
  return {{"buckets-done", join(p.buckets_done)},
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
      if (*there && identical(**object, **there)) {
        ++p.skipped;
      } else {
        if (auto copied = copyObject(from, to, bucket, **object, options.tmp_dir); !copied) {
          return std::move(copied).error();
        }
        ++p.objects;
        p.bytes += (*object)->size;
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
    return fmt::format("{} buckets, {} objects, {} bytes identical", buckets, objects, bytes);
  }
  std::string out = fmt::format("{} differences", problem_count);
  for (const std::string& p : problems) out += "; " + p;
  if (problem_count > problems.size()) out += "; ...";
  return out;
}

Result<VerifyResult> verifyCopy(s3::Client& from, s3::Client& to) {
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
      } else if ((*there)->size != (*object)->size) {
        problem(fmt::format("{} has {} bytes on ha-minio, {} on the source", name, (*there)->size,
                            (*object)->size));
      } else if (!identical(**object, **there)) {
        problem(fmt::format("{} has ETag {} on ha-minio, {} on the source", name, (*there)->etag,
                            (*object)->etag));
      }
    }
  }
  return r;
}

}  // namespace ekco::agent
