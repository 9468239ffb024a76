// The host's filesystem as ekco sees it: absolute host paths ("/etc/haproxy/haproxy.cfg")
// resolved under a host root ("/" natively, "/host" in the DaemonSet pod). Controllers take a
// HostFs&; LocalHostFs is the real one, tests may use a temp directory as the root.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/os/unique_fd.h"
#include "base/result.h"

namespace ekco::hostfs {

// What a write did. kNo means nothing on disk was touched (not even mtime), so callers can skip
// restarts and keep logs quiet.
enum class Changed { kNo, kYes };

enum class FileType { kRegular, kDirectory, kOther };

struct FileInfo {
  FileType type = FileType::kOther;
  std::uint32_t mode = 0;  // permission bits only (07777), e.g. 0644
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint64_t size = 0;
  base::WallTime mtime{};
};

struct Owner {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  bool operator==(const Owner&) const = default;
};

struct WriteOptions {
  // Permission bits (07777) for the file, applied exactly (the umask plays no part). Unset: keep
  // the mode of the file being replaced, or 0644 for a new file.
  std::optional<std::uint32_t> mode = std::nullopt;
  // Unset: keep the owner of the file being replaced, or the writer's own for a new file.
  std::optional<Owner> owner = std::nullopt;
  // Create missing parent directories (with parent_mode, exactly) instead of failing.
  bool create_parents = false;
  std::uint32_t parent_mode = 0755;
};

// An advisory lock held on an open file; destroying it closes the file, which releases the lock.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

// Every path argument is an absolute host path. A path with a ".." component is refused with
// ErrorCode::kEscape, a relative path with kInvalidArgument. Symlinks met on the way are
// followed without ever leaving the root (see LocalHostFs for the exact rules). Error messages
// start with the operation and the host path: "write /etc/haproxy/haproxy.cfg: ...".
class HostFs {
 public:
  virtual ~HostFs() = default;

  // The host root this filesystem is confined to ("/" or "/host").
  virtual std::string root() const = 0;
  // The path as seen by this process ("/host/etc/x" for "/etc/x"), for messages only: it is
  // lexical (symlinks are not resolved), so never open it.
  virtual std::string realPath(std::string_view path) const = 0;

  // What read() takes at most. ekco reads configuration, kubeconfigs, tokens, certificates,
  // manifests and /proc/mounts, all far smaller; a larger file is refused rather than loaded.
  static constexpr std::size_t kMaxReadBytes = std::size_t{8} << 20;

  // Whole content of a regular file. A final symlink is followed. A file larger than
  // kMaxReadBytes is kInvalidArgument ("read /x: larger than 8 MiB; not reading it").
  virtual base::Result<std::string> read(std::string_view path) const = 0;
  // False when the path (or, after following symlinks, its target) does not exist; other
  // failures (escape, permission, I/O) are errors.
  virtual base::Result<bool> exists(std::string_view path) const = 0;
  // A final symlink is followed; a dangling one is kNotFound.
  virtual base::Result<FileInfo> stat(std::string_view path) const = 0;

  // Atomically replaces the file with `content` unless it already has that content, mode and
  // owner (then kNo and nothing is touched). If only mode/owner differ they are fixed in place
  // (kYes). Readers see the old or the new content, never a mix; on failure the target is
  // untouched. The final component is never followed: a symlink there is replaced by a regular
  // file.
  virtual base::Result<Changed> write(std::string_view path, std::string_view content,
                                      const WriteOptions& options = {}) = 0;
  // Removes a file or symlink (not what it points to). An absent path is not an error;
  // a directory is.
  virtual base::Status remove(std::string_view path) = 0;
  // Creates the directory and missing parents with exactly `mode`. Existing directories are
  // left as they are (their mode is not changed); that is not an error.
  virtual base::Status makeDirs(std::string_view path, std::uint32_t mode = 0755) = 0;
  // Names in the directory, sorted, without "." and "..", dot-files included.
  virtual base::Result<std::vector<std::string>> list(std::string_view dir) const = 0;
  // Removes temp files left in `dir` by writers that died mid-write, if their mtime is at least
  // `older_than` ago; returns how many. Only names of the writer's temp pattern are touched.
  // A missing directory has nothing to sweep (0, not an error).
  virtual base::Result<std::size_t> sweepStaleTemps(std::string_view dir,
                                                    std::chrono::seconds older_than) = 0;
  // Opens the file, creating it with exactly `mode` when absent (the parent must exist), and
  // takes an exclusive flock(2) on it without waiting. The lock is held until the returned
  // object is destroyed. The final component is never followed (a symlink there is an error);
  // the file is never removed (removing a lock file races with the next locker). Held by
  // another open file description (another process, or another tryLock in this one):
  // kUnavailable. The default implementation supports no locks (kUnknown).
  virtual base::Result<std::unique_ptr<FileLock>> tryLock(std::string_view path,
                                                          std::uint32_t mode = 0600);
  // An O_PATH descriptor of the directory, resolved like every path here (symlinks followed
  // without leaving the root), for what must be created inside it by other means (a unix
  // socket: bind through /proc/self/fd/N/name). Not a directory: kInvalidArgument. The default
  // implementation supports none (kUnknown).
  virtual base::Result<base::UniqueFd> openDirectory(std::string_view path) const;
  // Removes an empty directory (the final component is never followed). An absent path is not
  // an error; a non-empty directory or a file is. The default implementation supports none.
  virtual base::Status removeEmptyDir(std::string_view path);
};

inline base::Result<std::unique_ptr<FileLock>> HostFs::tryLock(std::string_view path,
                                                               std::uint32_t /*mode*/) {
  return base::Error("lock " + std::string(path) + ": not supported by this filesystem");
}

inline base::Result<base::UniqueFd> HostFs::openDirectory(std::string_view path) const {
  return base::Error("open directory " + std::string(path) + ": not supported by this filesystem");
}

inline base::Status HostFs::removeEmptyDir(std::string_view path) {
  return base::Error("remove directory " + std::string(path) +
                     ": not supported by this filesystem");
}

}  // namespace ekco::hostfs
