// What the LocalHostFs tests share: the fsync probe (defined in local_host_fs_test.cc, where
// fsync itself is replaced), a temp root with decoys outside it, file helpers, the fixture.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"

// Which inodes fsync was called on, in order, while recording; errno values to fail it with.
namespace fsync_probe {
struct Synced {
  dev_t dev;
  ino_t ino;
  bool is_dir;
};
extern std::mutex mu;
extern bool recording;
extern std::vector<Synced> synced;
extern std::atomic<int> fail_files_with;  // errno to fail fsync of regular files with, 0: don't
extern std::atomic<int> fail_dirs_with;
}  // namespace fsync_probe

namespace ekco::hostfs::testing {

// A fresh directory under /tmp holding root/ (the host root) and outside/ (decoys that must
// never be touched), removed at the end.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ekco-hostfs-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    if (made == nullptr) std::abort();
    base_ = made;
    std::filesystem::create_directories(root());
    std::filesystem::create_directories(outside());
  }
  ~TempDir() { std::filesystem::remove_all(base_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::filesystem::path root() const { return base_ / "root"; }
  std::filesystem::path outside() const { return base_ / "outside"; }

 private:
  std::filesystem::path base_;
};

inline void put(const std::filesystem::path& p, const std::string& content) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline struct stat lstatOf(const std::filesystem::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) ADD_FAILURE() << "lstat " << p << ": " << std::strerror(errno);
  return st;
}

// Sets the process umask for the lifetime of the object.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }

 private:
  mode_t old_;
};

inline void setMtime(const std::filesystem::path& p, base::WallTime t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch());
  struct timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = static_cast<time_t>(ns.count() / 1'000'000'000);
  ts[0].tv_nsec = ts[1].tv_nsec = static_cast<long>(ns.count() % 1'000'000'000);
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << p;
}

class LocalHostFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = LocalHostFs::open(root_.string(), clock_);
    ASSERT_TRUE(opened) << opened.error().message();
    fs_ = std::move(*opened);
  }
  void TearDown() override {
    fsync_probe::fail_files_with = 0;
    fsync_probe::fail_dirs_with = 0;
    std::lock_guard lock(fsync_probe::mu);
    fsync_probe::recording = false;
    fsync_probe::synced.clear();
  }

  // Where a host path lives in the test's root.
  std::filesystem::path real(std::string_view host_path) const {
    return root_ / host_path.substr(1);
  }

  TempDir tmp_;
  std::filesystem::path root_ = tmp_.root();
  base::SystemClock clock_;
  std::unique_ptr<LocalHostFs> fs_;
};

}  // namespace ekco::hostfs::testing
