// HostFs on the real filesystem under a root directory. The only file in the project that calls
// open/openat/rename/fsync is local_host_fs.cc.
//
// Path resolution. Every operation walks the host path component by component from an O_PATH
// descriptor of the root, opening each component with O_NOFOLLOW relative to the descriptor of
// its parent, so what is checked is what is used (no path strings are re-resolved by the
// kernel). Symlinks are read with readlinkat and expanded by the walk itself:
//   - an absolute target names a host path and restarts at the root (with root /host, a link
//     /host/etc/x -> /etc/y means /host/etc/y);
//   - ".." in a target steps back to the parent directory the walk came from; a ".." that would
//     climb above the root is refused with kEscape (never clamped at the root, unlike
//     openat2(RESOLVE_IN_ROOT));
//   - more than 40 symlinks in one walk fail with ELOOP;
//   - mount points are crossed normally, so /proc under the root works (/proc/self is an
//     ordinary relative symlink); magic links are never jumped through, their text is
//     interpreted like any other target.
// The final component is followed for read/exists/stat/list/sweep/makeDirs, never for write
// and remove: write replaces a symlink with a regular file (default mode 0644 and the writer's
// owner, nothing is taken from the link's target), remove deletes the link.
//
// Writing. write() puts the content into a temp file ".<name>.ekco-tmp.<16 hex>" in the target's
// directory (kubelet ignores dot-files in the manifests directory), created O_EXCL|O_NOFOLLOW,
// owner and mode set with fchown/fchmod before any data, then writes, fsyncs, renames over the
// target and fsyncs the directory. New parent directories are fsynced into their parents too.
// If the directory fsync fails after the rename, the new content is in place but the error is
// still returned (it may not survive a crash).
//
// Temp files. A writer killed mid-write leaves its temp file behind. Each write that changes a
// file removes temps of the same target name older than kStaleTempAge (a live write takes
// milliseconds, so such a temp is certainly abandoned; temps of other targets are left to
// sweepStaleTemps, which callers run on the directories they own). Names matching the temp
// pattern cannot be written.
//
// Thread-safe: the object holds only the root descriptor and the clock.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"
#include "hostfs/host_fs.h"

namespace ekco::hostfs {

class LocalHostFs final : public HostFs {
 public:
  static constexpr std::chrono::minutes kStaleTempAge{10};
  static constexpr int kMaxSymlinkHops = 40;

  // Opens the root directory `root` (an absolute path as seen by this process; symlinks in it
  // are followed, it is the operator's choice). The clock dates temp files for the sweeps.
  static base::Result<std::unique_ptr<LocalHostFs>> open(std::string_view root,
                                                         const base::Clock& clock);
  ~LocalHostFs() override;
  LocalHostFs(const LocalHostFs&) = delete;
  LocalHostFs& operator=(const LocalHostFs&) = delete;

  // True for names write() uses for temp files (".<name>.ekco-tmp.<16 lowercase hex>").
  static bool isTempName(std::string_view name);

  std::string root() const override { return root_; }
  std::string realPath(std::string_view path) const override;

  base::Result<std::string> read(std::string_view path) const override;
  base::Result<bool> exists(std::string_view path) const override;
  base::Result<FileInfo> stat(std::string_view path) const override;
  base::Result<Changed> write(std::string_view path, std::string_view content,
                              const WriteOptions& options = {}) override;
  base::Status remove(std::string_view path) override;
  base::Status makeDirs(std::string_view path, std::uint32_t mode = 0755) override;
  base::Result<std::vector<std::string>> list(std::string_view dir) const override;
  base::Result<std::size_t> sweepStaleTemps(std::string_view dir,
                                            std::chrono::seconds older_than) override;
  base::Result<std::unique_ptr<FileLock>> tryLock(std::string_view path,
                                                  std::uint32_t mode = 0600) override;
  base::Result<base::UniqueFd> openDirectory(std::string_view path) const override;
  base::Status removeEmptyDir(std::string_view path) override;

 private:
  LocalHostFs(std::string root, int root_fd, const base::Clock& clock)
      : root_(std::move(root)), root_fd_(root_fd), clock_(clock) {}

  std::string root_;
  int root_fd_;  // O_PATH|O_DIRECTORY, owned
  const base::Clock& clock_;
};

}  // namespace ekco::hostfs
