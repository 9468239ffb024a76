#include "hostfs/local_host_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "base/os/unique_fd.h"
#include "base/strings.h"
#include "hostfs/host_path.h"

namespace ekco::hostfs {
namespace {

using base::Error;
using base::ErrorCode;
using base::Result;
using base::Status;
using base::UniqueFd;

constexpr std::string_view kTempMarker = ".ekco-tmp.";
constexpr std::size_t kTempRandomHex = 16;
constexpr std::size_t kNameMax = NAME_MAX;
// Room left for the target's name inside a temp name of at most NAME_MAX bytes.
constexpr std::size_t kTempNameRoom = kNameMax - 1 - kTempMarker.size() - kTempRandomHex;

// "No such file or directory" with the code errnoError gives errno, for messages whose context
// (operation and path) is added by the caller.
Error bareErrno(int err) { return Error(std::strerror(err), base::errnoError("", err).code()); }

std::string octal(std::uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode);
  return buf;
}

base::WallTime toWallTime(const struct timespec& ts) {
  return base::WallTime(std::chrono::duration_cast<base::WallTime::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

FileInfo toFileInfo(const struct stat& st) {
  FileType type = FileType::kOther;
  if (S_ISREG(st.st_mode)) type = FileType::kRegular;
  if (S_ISDIR(st.st_mode)) type = FileType::kDirectory;
  return FileInfo{.type = type,
                  .mode = static_cast<std::uint32_t>(st.st_mode & 07777),
                  .uid = st.st_uid,
                  .gid = st.st_gid,
                  .size = static_cast<std::uint64_t>(st.st_size),
                  .mtime = toWallTime(st.st_mtim)};
}

// Opens the directory an O_PATH descriptor refers to for reading (fsync and readdir need a
// real descriptor; "." relative to the descriptor is the same object).
Result<UniqueFd> openDirForReading(int dir, const std::string& name = ".") {
  UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return bareErrno(errno);
  return fd;
}

Status syncDir(int dir, const std::string& where) {
  auto fd = openDirForReading(dir);
  if (!fd) return std::move(fd).error().wrap("open directory " + where);
  if (::fsync(fd->get()) != 0) return base::errnoError("fsync directory " + where, errno);
  return base::ok();
}

// Creates directory `name` in `parent` with exactly `mode` (created 0700, then fchmod, so the
// umask plays no part and it is never more open than asked), then makes the new entry durable.
Status makeDir(int parent, const std::string& name, std::uint32_t mode,
               const std::string& parent_where) {
  const std::string where = childPath(parent_where, name);
  if (::mkdirat(parent, name.c_str(), 0700) != 0) return base::errnoError("mkdir " + where, errno);
  auto fd = openDirForReading(parent, name);
  if (!fd) return std::move(fd).error().wrap("open " + where);
  if (::fchmod(fd->get(), mode) != 0) return base::errnoError("chmod " + where, errno);
  return syncDir(parent, parent_where);
}

Result<std::string> readLink(int link_fd) {
  std::string buf(PATH_MAX, '\0');
  ssize_t n = ::readlinkat(link_fd, "", buf.data(), buf.size());
  if (n < 0) return bareErrno(errno);
  if (static_cast<std::size_t>(n) >= buf.size()) return bareErrno(ENAMETOOLONG);
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

// Reads to the end, or fails with kInvalidArgument once more than max_bytes arrived (the size
// stat reports may be stale, or 0 for /proc files).
Result<std::string> readAll(int fd, std::size_t size_hint, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(size_hint, max_bytes));
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return bareErrno(errno);
    }
    if (n == 0) return out;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) {
      return Error("larger than " + base::describeBytes(max_bytes) + "; not reading it",
                   ErrorCode::kInvalidArgument);
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
}

Status writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return base::errnoError("write temp file", errno);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return base::ok();
}

// Directory entries without "." and "..", sorted. Takes a descriptor opened for reading.
Result<std::vector<std::string>> readDirNames(UniqueFd fd) {
  DIR* d = ::fdopendir(fd.get());
  if (d == nullptr) return bareErrno(errno);
  fd.release();
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
    errno = 0;
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) return bareErrno(err);
  std::sort(names.begin(), names.end());
  return names;
}

std::string tempPrefix(std::string_view target_name) {
  std::string p = ".";
  p.append(target_name.substr(0, kTempNameRoom));
  p.append(kTempMarker);
  return p;
}

std::string randomHex() {
  unsigned char bytes[kTempRandomHex / 2];
  if (::getrandom(bytes, sizeof bytes, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bytes)) {
    // Without entropy (early boot) a pid and a counter are unique among live writers; O_EXCL
    // and the retry in write() cover the leftovers of dead ones.
    static std::atomic<std::uint32_t> counter{0};
    const std::uint64_t v = (static_cast<std::uint64_t>(::getpid()) << 32) | counter++;
    for (std::size_t i = 0; i < sizeof bytes; ++i)
      bytes[i] = static_cast<unsigned char>(v >> (8 * i));
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

// Removes regular files in `dir` whose names pass `match` and whose mtime is at least
// `older_than` before `now`. Returns how many were removed.
template <typename Match>
Result<std::size_t> sweepDir(int dir, Match match, base::WallTime now,
                             std::chrono::nanoseconds older_than) {
  auto fd = openDirForReading(dir);
  if (!fd) return std::move(fd).error();
  auto names = readDirNames(std::move(*fd));
  if (!names) return std::move(names).error();
  std::size_t removed = 0;
  for (const std::string& n : *names) {
    if (!match(n)) continue;
    struct stat st;
    if (::fstatat(dir, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (now - toWallTime(st.st_mtim) < older_than) continue;
    if (::unlinkat(dir, n.c_str(), 0) == 0) {
      ++removed;
    } else if (errno != ENOENT) {  // ENOENT: another sweeper was faster
      return base::errnoError("remove " + n, errno);
    }
  }
  return removed;
}

// Where a walk ended: the directory holding the final component, and its name.
struct Resolved {
  UniqueFd dir;       // O_PATH descriptor
  std::string name;   // empty when the path resolved to `dir` itself
  std::string where;  // host path of `dir`, for messages
};

enum class Final { kFollow, kNoFollow };

// Resolves `host_path` under the root (see the header for the rules). The final component is
// not opened: it may be missing, and the caller opens it with the flags it needs. Missing
// intermediate directories are created with `create_mode` if given.
Result<Resolved> walk(int root_fd, std::string_view host_path, Final final,
                      std::optional<std::uint32_t> create_mode = std::nullopt) {
  auto components = splitHostPath(host_path);
  if (!components) return std::move(components).error();
  std::vector<std::string> pending(components->rbegin(), components->rend());

  // dirs[i+1] was opened as names[i] inside dirs[i]; dirs[0] is the root.
  std::vector<UniqueFd> dirs;
  std::vector<std::string> names;
  dirs.emplace_back(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!dirs.back().valid()) return base::errnoError("dup host root", errno);
  int hops = 0;
  int created = 0;        // bounds the mkdir/open retries if someone keeps removing what we made
  std::string last_link;  // "symlink /a -> ../b", for the escape message

  auto done = [&](std::string name) {
    std::string where = joinHostPath(names);
    return Resolved{.dir = std::move(dirs.back()), .name = std::move(name), .where = where};
  };

  while (!pending.empty()) {
    std::string c = std::move(pending.back());
    pending.pop_back();
    const bool last = pending.empty();

    if (c == "..") {  // only symlink targets get here; the path itself was checked
      if (dirs.size() == 1) {
        return Error(last_link + " climbs above the host root", ErrorCode::kEscape);
      }
      dirs.pop_back();
      names.pop_back();
      continue;
    }
    if (last && final == Final::kNoFollow) return done(std::move(c));

    UniqueFd child(::openat(dirs.back().get(), c.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!child.valid()) {
      const int err = errno;
      if (err == ENOENT && last) return done(std::move(c));  // the caller decides
      if (err == ENOENT && create_mode && ++created <= 128) {
        Status made = makeDir(dirs.back().get(), c, *create_mode, joinHostPath(names));
        if (!made && made.error().code() != ErrorCode::kAlreadyExists) {
          return std::move(made).error();
        }
        pending.push_back(std::move(c));  // open it on the next round
        continue;
      }
      return base::errnoError(joinHostPath(names, c), err);
    }
    struct stat st;
    if (::fstat(child.get(), &st) != 0) return base::errnoError(joinHostPath(names, c), errno);

    if (S_ISLNK(st.st_mode)) {
      if (++hops > LocalHostFs::kMaxSymlinkHops) {
        return base::errnoError(joinHostPath(names, c), ELOOP);
      }
      auto target = readLink(child.get());  // the object just opened, not the name again
      if (!target) return std::move(target).error().wrap("readlink " + joinHostPath(names, c));
      if (target->empty()) return base::errnoError(joinHostPath(names, c), ENOENT);
      last_link = "symlink " + joinHostPath(names, c) + " -> " + *target;
      if (target->front() == '/') {  // a host path: restart at the root
        dirs.resize(1);
        names.clear();
      }
      std::vector<std::string> parts = splitComponents(*target);
      pending.insert(pending.end(), parts.rbegin(), parts.rend());
      continue;
    }
    if (last) return done(std::move(c));
    if (!S_ISDIR(st.st_mode)) return base::errnoError(joinHostPath(names, c), ENOTDIR);
    dirs.push_back(std::move(child));
    names.push_back(std::move(c));
  }
  return done("");
}

// Removes a temp file unless disarmed (after the rename consumed it).
class TempGuard {
 public:
  TempGuard(int dir, std::string name) : dir_(dir), name_(std::move(name)) {}
  TempGuard(const TempGuard&) = delete;
  TempGuard& operator=(const TempGuard&) = delete;
  ~TempGuard() {
    if (armed_) ::unlinkat(dir_, name_.c_str(), 0);
  }
  void disarm() { armed_ = false; }

 private:
  int dir_;
  std::string name_;
  bool armed_ = true;
};

Status checkMode(std::uint32_t mode, std::string_view what) {
  if ((mode & ~07777u) != 0) {
    return Error(std::string(what) + " " + octal(mode) + " has bits outside 07777",
                 ErrorCode::kInvalidArgument);
  }
  return base::ok();
}

// Replaces the file at `path` in nine steps: (1) look at the current file, (2) stop if content,
// owner and mode match, or fix owner/mode in place if only they differ, (3) sweep this target's
// abandoned temps, (4) create the temp file, (5) set its owner and mode, (6) write the data,
// (7) fsync and close it, (8) rename it over the target, (9) fsync the directory. Until (8)
// the target is untouched and a failure removes the temp file.
// The nine numbered steps above, in order, sharing the descriptors they open; kept whole.
Result<Changed> writeFile(int root_fd, const base::Clock& clock, std::string_view path,
                          std::string_view content, const WriteOptions& options) {
  if (options.mode) EKCO_TRY(checkMode(*options.mode, "mode"));
  if (options.create_parents) EKCO_TRY(checkMode(options.parent_mode, "parent mode"));
  auto resolved = walk(root_fd, path, Final::kNoFollow,
                       options.create_parents ? std::optional(options.parent_mode) : std::nullopt);
  if (!resolved) return std::move(resolved).error();
  const int dir = resolved->dir.get();
  const std::string& name = resolved->name;
  if (name.empty()) return bareErrno(EISDIR);
  if (LocalHostFs::isTempName(name)) {
    return Error("name has the pattern of ekco's temp files", ErrorCode::kInvalidArgument);
  }

  // (1) Look at what is there. A symlink is replaced, not followed, and passes on nothing.
  struct stat st;
  bool existing = false;
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode)) return bareErrno(EISDIR);
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
      return Error("exists and is not a regular file", ErrorCode::kInvalidArgument);
    }
    existing = S_ISREG(st.st_mode);
  } else if (errno != ENOENT) {
    return base::errnoError("stat", errno);
  }

  // (2) Same content: done, or fix owner/mode in place.
  std::uint32_t mode = options.mode.value_or(0644);
  std::optional<Owner> owner = options.owner;
  if (existing) {
    UniqueFd cur(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat cst;
    // A failed open or a different object means it changed under us: just replace it.
    if (cur.valid() && ::fstat(cur.get(), &cst) == 0 && S_ISREG(cst.st_mode)) {
      if (!options.mode) mode = cst.st_mode & 07777;
      if (!owner) owner = Owner{.uid = cst.st_uid, .gid = cst.st_gid};
      if (static_cast<std::uint64_t>(cst.st_size) == content.size()) {
        auto old = readAll(cur.get(), content.size(), content.size());
        if (!old) return std::move(old).error().wrap("read current content");
        if (*old == content) {
          const bool owner_ok = *owner == Owner{.uid = cst.st_uid, .gid = cst.st_gid};
          const bool mode_ok = (cst.st_mode & 07777) == mode;
          if (owner_ok && mode_ok) return Changed::kNo;
          if (!owner_ok && ::fchown(cur.get(), owner->uid, owner->gid) != 0) {
            return base::errnoError("chown", errno);
          }
          // After fchown too: it may have cleared setuid/setgid bits.
          if (::fchmod(cur.get(), mode) != 0) return base::errnoError("chmod", errno);
          if (::fsync(cur.get()) != 0) return base::errnoError("fsync", errno);
          return Changed::kYes;
        }
      }
    }
  }

  // (3) Sweep temps of this target left by writers that died (best effort: the write does not
  // depend on it).
  const std::string prefix = tempPrefix(name);
  (void)sweepDir(
      dir,
      [&](const std::string& n) {
        return n.size() == prefix.size() + kTempRandomHex && n.starts_with(prefix) &&
               LocalHostFs::isTempName(n);
      },
      clock.wallNow(), LocalHostFs::kStaleTempAge);

  // (4) Create the temp file: O_EXCL so it is ours, O_NOFOLLOW so it is not a planted link,
  // 0600 until (5) sets the real mode.
  std::string tmp;
  UniqueFd fd;
  for (int attempt = 0; attempt < 8 && !fd.valid(); ++attempt) {
    tmp = prefix + randomHex();
    fd = UniqueFd(
        ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid() && errno != EEXIST) return base::errnoError("create temp file " + tmp, errno);
  }
  if (!fd.valid()) return base::errnoError("create temp file " + tmp, EEXIST);
  TempGuard guard(dir, tmp);

  // (5) Owner, then mode (fchown may clear setuid/setgid), before any data is written.
  if (owner) {
    struct stat tst;
    if (::fstat(fd.get(), &tst) != 0) return base::errnoError("stat temp file", errno);
    if ((tst.st_uid != owner->uid || tst.st_gid != owner->gid) &&
        ::fchown(fd.get(), owner->uid, owner->gid) != 0) {
      return base::errnoError("chown temp file", errno);
    }
  }
  if (::fchmod(fd.get(), mode) != 0) return base::errnoError("chmod temp file", errno);

  // (6) Data, (7) made durable before it becomes visible under the target name.
  EKCO_TRY(writeAll(fd.get(), content));
  if (::fsync(fd.get()) != 0) return base::errnoError("fsync temp file", errno);
  if (::close(fd.release()) != 0) return base::errnoError("close temp file", errno);

  // (8) The switch: readers see the old file or the new one.
  if (::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
    return base::errnoError("rename temp file over target", errno);
  }
  guard.disarm();

  // (9) Make the rename durable.
  EKCO_TRY(syncDir(dir, resolved->where));
  return Changed::kYes;
}

}  // namespace

Result<std::unique_ptr<LocalHostFs>> LocalHostFs::open(std::string_view root,
                                                       const base::Clock& clock) {
  if (root.empty() || root.front() != '/') {
    return Error("host root " + std::string(root) + ": not an absolute path",
                 ErrorCode::kInvalidArgument);
  }
  std::string normalized(root);
  while (normalized.size() > 1 && normalized.back() == '/') normalized.pop_back();
  const int fd = ::open(normalized.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return base::errnoError("open host root " + normalized, errno);
  return std::unique_ptr<LocalHostFs>(new LocalHostFs(std::move(normalized), fd, clock));
}

LocalHostFs::~LocalHostFs() { ::close(root_fd_); }

bool LocalHostFs::isTempName(std::string_view name) {
  if (name.size() < 2 + kTempMarker.size() + kTempRandomHex || name.front() != '.') return false;
  std::string_view tail = name.substr(name.size() - kTempRandomHex);
  std::string_view marker =
      name.substr(name.size() - kTempRandomHex - kTempMarker.size(), kTempMarker.size());
  return marker == kTempMarker && std::all_of(tail.begin(), tail.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string LocalHostFs::realPath(std::string_view path) const {
  if (root_ == "/") return std::string(path);
  if (path.empty() || path == "/") return root_;
  std::string out = root_;
  if (path.front() != '/') out.push_back('/');
  out.append(path);
  return out;
}

Result<std::string> LocalHostFs::read(std::string_view path) const {
  const std::string context = "read " + std::string(path);
  auto resolved = walk(root_fd_, path, Final::kFollow);
  if (!resolved) return std::move(resolved).error().wrap(context);
  const char* name = resolved->name.empty() ? "." : resolved->name.c_str();
  // O_NONBLOCK: opening a FIFO planted here must not hang the agent.
  UniqueFd fd(::openat(resolved->dir.get(), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return bareErrno(errno).wrap(context);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return bareErrno(errno).wrap(context);
  if (S_ISDIR(st.st_mode)) return bareErrno(EISDIR).wrap(context);
  if (!S_ISREG(st.st_mode)) {
    return Error(context + ": not a regular file", ErrorCode::kInvalidArgument);
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxReadBytes) {
    return Error(
        context + ": larger than " + base::describeBytes(kMaxReadBytes) + "; not reading it",
        ErrorCode::kInvalidArgument);
  }
  auto content = readAll(fd.get(), static_cast<std::size_t>(st.st_size), kMaxReadBytes);
  if (!content) return std::move(content).error().wrap(context);
  return content;
}

Result<bool> LocalHostFs::exists(std::string_view path) const {
  const std::string context = "exists " + std::string(path);
  auto resolved = walk(root_fd_, path, Final::kFollow);
  if (!resolved) {
    if (resolved.error().code() == ErrorCode::kNotFound) return false;
    return std::move(resolved).error().wrap(context);
  }
  if (resolved->name.empty()) return true;
  struct stat st;
  if (::fstatat(resolved->dir.get(), resolved->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    return true;
  }
  if (errno == ENOENT) return false;
  return bareErrno(errno).wrap(context);
}

Result<FileInfo> LocalHostFs::stat(std::string_view path) const {
  const std::string context = "stat " + std::string(path);
  auto resolved = walk(root_fd_, path, Final::kFollow);
  if (!resolved) return std::move(resolved).error().wrap(context);
  struct stat st;
  const int rc = resolved->name.empty() ? ::fstat(resolved->dir.get(), &st)
                                        : ::fstatat(resolved->dir.get(), resolved->name.c_str(),
                                                    &st, AT_SYMLINK_NOFOLLOW);
  if (rc != 0) return bareErrno(errno).wrap(context);
  return toFileInfo(st);
}

Result<Changed> LocalHostFs::write(std::string_view path, std::string_view content,
                                   const WriteOptions& options) {
  auto changed = writeFile(root_fd_, clock_, path, content, options);
  if (!changed) return std::move(changed).error().wrap("write " + std::string(path));
  return changed;
}

Status LocalHostFs::remove(std::string_view path) {
  const std::string context = "remove " + std::string(path);
  auto resolved = walk(root_fd_, path, Final::kNoFollow);
  if (!resolved) {
    if (resolved.error().code() == ErrorCode::kNotFound) return base::ok();  // parent absent
    return std::move(resolved).error().wrap(context);
  }
  if (resolved->name.empty()) return bareErrno(EISDIR).wrap(context);
  if (::unlinkat(resolved->dir.get(), resolved->name.c_str(), 0) != 0) {
    if (errno == ENOENT) return base::ok();
    return bareErrno(errno).wrap(context);
  }
  Status synced = syncDir(resolved->dir.get(), resolved->where);
  if (!synced) return std::move(synced).error().wrap(context);
  return base::ok();
}

Status LocalHostFs::removeEmptyDir(std::string_view path) {
  const std::string context = "remove directory " + std::string(path);
  auto resolved = walk(root_fd_, path, Final::kNoFollow);
  if (!resolved) {
    if (resolved.error().code() == ErrorCode::kNotFound) return base::ok();  // parent absent
    return std::move(resolved).error().wrap(context);
  }
  if (resolved->name.empty()) return bareErrno(EBUSY).wrap(context);  // the root itself
  if (::unlinkat(resolved->dir.get(), resolved->name.c_str(), AT_REMOVEDIR) != 0) {
    if (errno == ENOENT) return base::ok();
    return bareErrno(errno).wrap(context);
  }
  Status synced = syncDir(resolved->dir.get(), resolved->where);
  if (!synced) return std::move(synced).error().wrap(context);
  return base::ok();
}

Status LocalHostFs::makeDirs(std::string_view path, std::uint32_t mode) {
  const std::string context = "mkdir " + std::string(path);
  Status valid = checkMode(mode, "mode");
  if (!valid) return std::move(valid).error().wrap(context);
  auto resolved = walk(root_fd_, path, Final::kFollow, mode);
  if (!resolved) return std::move(resolved).error().wrap(context);
  if (resolved->name.empty()) return base::ok();  // the root, or a ".." that ended on a dir
  const int dir = resolved->dir.get();
  for (int attempt = 0; attempt < 2; ++attempt) {
    struct stat st;
    if (::fstatat(dir, resolved->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISDIR(st.st_mode)) return base::ok();
      return Error(context + ": exists and is not a directory", ErrorCode::kAlreadyExists);
    }
    if (errno != ENOENT) return bareErrno(errno).wrap(context);
    Status made = makeDir(dir, resolved->name, mode, resolved->where);
    if (made) return base::ok();
    if (made.error().code() != ErrorCode::kAlreadyExists) {
      return std::move(made).error().wrap(context);
    }
    // Someone else created it meanwhile: look again.
  }
  return bareErrno(EEXIST).wrap(context);
}

Result<std::vector<std::string>> LocalHostFs::list(std::string_view dir) const {
  const std::string context = "list " + std::string(dir);
  auto resolved = walk(root_fd_, dir, Final::kFollow);
  if (!resolved) return std::move(resolved).error().wrap(context);
  auto fd = openDirForReading(resolved->dir.get(),
                              resolved->name.empty() ? std::string(".") : resolved->name);
  if (!fd) return std::move(fd).error().wrap(context);
  auto names = readDirNames(std::move(*fd));
  if (!names) return std::move(names).error().wrap(context);
  return names;
}

namespace {

// The directory a walk ended on, as an O_PATH descriptor.
Result<UniqueFd> openResolvedDir(Resolved resolved) {
  if (resolved.name.empty()) return std::move(resolved.dir);
  UniqueFd fd(::openat(resolved.dir.get(), resolved.name.c_str(),
                       O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return bareErrno(errno);
  return fd;
}

}  // namespace

Result<UniqueFd> LocalHostFs::openDirectory(std::string_view path) const {
  const std::string context = "open directory " + std::string(path);
  auto resolved = walk(root_fd_, path, Final::kFollow);
  if (!resolved) return std::move(resolved).error().wrap(context);
  auto fd = openResolvedDir(std::move(*resolved));
  if (!fd) return std::move(fd).error().wrap(context);
  return fd;
}

Result<std::size_t> LocalHostFs::sweepStaleTemps(std::string_view dir,
                                                 std::chrono::seconds older_than) {
  const std::string context = "sweep temp files in " + std::string(dir);
  auto resolved = walk(root_fd_, dir, Final::kFollow);
  if (!resolved) {
    if (resolved.error().code() == ErrorCode::kNotFound) return std::size_t{0};
    return std::move(resolved).error().wrap(context);
  }
  auto target = openResolvedDir(std::move(*resolved));
  if (!target) {
    if (target.error().code() == ErrorCode::kNotFound) return std::size_t{0};
    return std::move(target).error().wrap(context);
  }
  auto removed = sweepDir(target->get(), isTempName, clock_.wallNow(), older_than);
  if (!removed) return std::move(removed).error().wrap(context);
  return removed;
}

namespace {

class LocalFileLock final : public FileLock {
 public:
  explicit LocalFileLock(UniqueFd fd) : fd_(std::move(fd)) {}

 private:
  UniqueFd fd_;
};

}  // namespace

Result<std::unique_ptr<FileLock>> LocalHostFs::tryLock(std::string_view path, std::uint32_t mode) {
  const std::string context = "lock " + std::string(path);
  Status valid = checkMode(mode, "mode");
  if (!valid) return std::move(valid).error().wrap(context);
  auto resolved = walk(root_fd_, path, Final::kNoFollow);
  if (!resolved) return std::move(resolved).error().wrap(context);
  if (resolved->name.empty()) return bareErrno(EISDIR).wrap(context);
  const int dir = resolved->dir.get();
  const char* name = resolved->name.c_str();
  // O_NONBLOCK: a FIFO planted here must not hang the open.
  constexpr int kFlags = O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  UniqueFd fd;
  for (int attempt = 0; attempt < 8 && !fd.valid(); ++attempt) {
    fd = UniqueFd(::openat(dir, name, kFlags | O_CREAT | O_EXCL, 0600));
    if (fd.valid()) {
      if (::fchmod(fd.get(), mode) != 0) return bareErrno(errno).wrap(context);
      break;
    }
    if (errno != EEXIST) return bareErrno(errno).wrap(context);
    fd = UniqueFd(::openat(dir, name, kFlags));
    if (!fd.valid() && errno != ENOENT) return bareErrno(errno).wrap(context);
    // ENOENT: removed between the two opens; create it again.
  }
  if (!fd.valid()) return bareErrno(ENOENT).wrap(context);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return bareErrno(errno).wrap(context);
  if (!S_ISREG(st.st_mode)) {
    return Error(context + ": not a regular file", ErrorCode::kInvalidArgument);
  }
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) {
      return Error(context + ": held by another process", ErrorCode::kUnavailable);
    }
    return bareErrno(errno).wrap(context);
  }
  return std::unique_ptr<FileLock>(std::make_unique<LocalFileLock>(std::move(fd)));
}

}  // namespace ekco::hostfs
