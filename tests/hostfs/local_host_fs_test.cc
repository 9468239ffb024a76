#include "hostfs/local_host_fs.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "base/clock.h"
#include "tests/hostfs/local_host_fs_support.h"

// fsync seen from the outside (tests/hostfs/local_host_fs_support.h): this definition takes the
// place of libc's for the whole test binary (the library is linked statically into it), records
// which inodes were synced, in order, and can fail on demand. It forwards to the real system call
// otherwise.
namespace fsync_probe {
std::mutex mu;
bool recording = false;
std::vector<Synced> synced;
std::atomic<int> fail_files_with{0};
std::atomic<int> fail_dirs_with{0};
}  // namespace fsync_probe

extern "C" int fsync(int fd) {
  struct stat st;
  if (::fstat(fd, &st) == 0) {
    const int fail = S_ISDIR(st.st_mode) ? fsync_probe::fail_dirs_with.load()
                                         : fsync_probe::fail_files_with.load();
    if (fail != 0) {
      errno = fail;
      return -1;
    }
    std::lock_guard lock(fsync_probe::mu);
    if (fsync_probe::recording) {
      fsync_probe::synced.push_back({st.st_dev, st.st_ino, S_ISDIR(st.st_mode)});
    }
  }
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

namespace ekco::hostfs {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::LocalHostFsTest;
using testing::lstatOf;
using testing::put;
using testing::ScopedUmask;
using testing::setMtime;
using testing::slurp;
using ::testing::StartsWith;
using testing::TempDir;

// --- reading and writing ---

TEST_F(LocalHostFsTest, ReadReturnsWhatWriteWrote) {
  auto w =
      fs_->write("/etc/haproxy/haproxy.cfg", "global\n  maxconn 100\n", {.create_parents = true});
  ASSERT_TRUE(w) << w.error().message();
  EXPECT_EQ(*w, Changed::kYes);
  EXPECT_EQ(slurp(real("/etc/haproxy/haproxy.cfg")), "global\n  maxconn 100\n");
  auto r = fs_->read("/etc/haproxy/haproxy.cfg");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, "global\n  maxconn 100\n");

  ASSERT_TRUE(fs_->write("/etc/empty", ""));
  EXPECT_EQ(fs_->read("/etc/empty").value(), "");
  std::string binary("a\0b\xff", 4);
  ASSERT_TRUE(fs_->write("/etc/binary", binary));
  EXPECT_EQ(fs_->read("/etc/binary").value(), binary);
}

// Issue 24 defect 11: a file over the bound is refused unread (a 200 MB token file took 1.5 GB).
TEST_F(LocalHostFsTest, AFileOverTheReadBoundIsRefusedUnread) {
  ASSERT_TRUE(fs_->write("/etc/big", "", {.create_parents = true}));
  fs::resize_file(real("/etc/big"), HostFs::kMaxReadBytes + 1);  // sparse: costs no disk
  auto r = fs_->read("/etc/big");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message(), "read /etc/big: larger than 8 MiB; not reading it");
  fs::resize_file(real("/etc/big"), HostFs::kMaxReadBytes);
  auto at_bound = fs_->read("/etc/big");
  ASSERT_TRUE(at_bound) << at_bound.error().message();
  EXPECT_EQ(at_bound->size(), HostFs::kMaxReadBytes);
}

TEST_F(LocalHostFsTest, SecondIdenticalWriteReturnsNoAndTouchesNothing) {
  ASSERT_TRUE(fs_->write("/etc/a.conf", "same", {.create_parents = true}));
  const auto old = base::WallTime(std::chrono::seconds(1'000'000'000));
  setMtime(real("/etc/a.conf"), old);
  const struct stat before = lstatOf(real("/etc/a.conf"));

  auto w = fs_->write("/etc/a.conf", "same");
  ASSERT_TRUE(w) << w.error().message();
  EXPECT_EQ(*w, Changed::kNo);
  const struct stat after = lstatOf(real("/etc/a.conf"));
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_mtim.tv_sec, 1'000'000'000);
  EXPECT_EQ(after.st_ctim.tv_sec, before.st_ctim.tv_sec);
  EXPECT_EQ(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec);
}

TEST_F(LocalHostFsTest, DifferentContentReplacesTheFileWithANewInode) {
  ASSERT_TRUE(fs_->write("/etc/a.conf", "one", {.create_parents = true}));
  const ino_t first = lstatOf(real("/etc/a.conf")).st_ino;
  auto w = fs_->write("/etc/a.conf", "two");
  ASSERT_TRUE(w) << w.error().message();
  EXPECT_EQ(*w, Changed::kYes);
  EXPECT_EQ(slurp(real("/etc/a.conf")), "two");
  EXPECT_NE(lstatOf(real("/etc/a.conf")).st_ino, first);  // renamed over, not rewritten in place
}

TEST_F(LocalHostFsTest, SameSizeDifferentContentIsAChange) {
  ASSERT_TRUE(fs_->write("/etc/a.conf", "abc", {.create_parents = true}));
  EXPECT_EQ(fs_->write("/etc/a.conf", "abd").value(), Changed::kYes);
  EXPECT_EQ(slurp(real("/etc/a.conf")), "abd");
}

TEST_F(LocalHostFsTest, WriteLeavesNoTempFilesBehind) {
  ASSERT_TRUE(fs_->write("/etc/kubernetes/manifests/haproxy.yaml", "x", {.create_parents = true}));
  ASSERT_TRUE(fs_->write("/etc/kubernetes/manifests/haproxy.yaml", "y"));
  EXPECT_THAT(fs_->list("/etc/kubernetes/manifests").value(), ElementsAre("haproxy.yaml"));
}

// --- modes and owners ---

TEST_F(LocalHostFsTest, NewFileIs0644EvenUnderUmask0027) {
  ScopedUmask mask(0027);
  ASSERT_TRUE(fs_->write("/etc/haproxy.cfg", "x", {.create_parents = true}));
  EXPECT_EQ(lstatOf(real("/etc/haproxy.cfg")).st_mode & 07777, 0644u);
}

TEST_F(LocalHostFsTest, ExplicitModeIsAppliedExactlyUnderUmask0027) {
  ScopedUmask mask(0027);
  ASSERT_TRUE(fs_->write("/etc/a", "x", {.mode = 0664, .create_parents = true}));
  EXPECT_EQ(lstatOf(real("/etc/a")).st_mode & 07777, 0664u);
  ASSERT_TRUE(fs_->write("/etc/key.pem", "k", {.mode = 0600}));
  EXPECT_EQ(lstatOf(real("/etc/key.pem")).st_mode & 07777, 0600u);
  ASSERT_TRUE(fs_->write("/etc/run.sh", "#!/bin/sh\n", {.mode = 04755}));
  EXPECT_EQ(lstatOf(real("/etc/run.sh")).st_mode & 07777, 04755u);
}

TEST_F(LocalHostFsTest, ReplacingKeepsTheModeOfTheOldFile) {
  put(real("/etc/a.conf"), "old");
  ASSERT_EQ(::chmod(real("/etc/a.conf").c_str(), 0640), 0);
  ASSERT_TRUE(fs_->write("/etc/a.conf", "new"));
  EXPECT_EQ(lstatOf(real("/etc/a.conf")).st_mode & 07777, 0640u);
  EXPECT_EQ(slurp(real("/etc/a.conf")), "new");
}

TEST_F(LocalHostFsTest, ExplicitModeOverridesTheOldFilesMode) {
  put(real("/etc/a.conf"), "old");
  ASSERT_EQ(::chmod(real("/etc/a.conf").c_str(), 0644), 0);
  ASSERT_TRUE(fs_->write("/etc/a.conf", "new", {.mode = 0600}));
  EXPECT_EQ(lstatOf(real("/etc/a.conf")).st_mode & 07777, 0600u);
}

TEST_F(LocalHostFsTest, OnlyTheModeDifferingIsFixedInPlaceAndReportedAsAChange) {
  ASSERT_TRUE(fs_->write("/etc/key.pem", "k", {.create_parents = true}));
  const ino_t ino = lstatOf(real("/etc/key.pem")).st_ino;
  auto w = fs_->write("/etc/key.pem", "k", {.mode = 0600});
  ASSERT_TRUE(w) << w.error().message();
  EXPECT_EQ(*w, Changed::kYes);
  EXPECT_EQ(lstatOf(real("/etc/key.pem")).st_mode & 07777, 0600u);
  EXPECT_EQ(lstatOf(real("/etc/key.pem")).st_ino, ino);
  EXPECT_EQ(fs_->write("/etc/key.pem", "k", {.mode = 0600}).value(), Changed::kNo);
}

TEST_F(LocalHostFsTest, ReplacingKeepsTheOwnerOfTheOldFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  put(real("/etc/a.conf"), "old");
  ASSERT_EQ(::chown(real("/etc/a.conf").c_str(), 1234, 5678), 0);
  ASSERT_EQ(::chmod(real("/etc/a.conf").c_str(), 0640), 0);
  ASSERT_TRUE(fs_->write("/etc/a.conf", "new"));
  const struct stat st = lstatOf(real("/etc/a.conf"));
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(slurp(real("/etc/a.conf")), "new");
}

TEST_F(LocalHostFsTest, ExplicitOwnerIsAppliedAndComparedLikeTheMode) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  const Owner etcd{.uid = 1234, .gid = 5678};
  ASSERT_TRUE(fs_->write("/var/lib/etcd/x", "x", {.owner = etcd, .create_parents = true}));
  EXPECT_EQ(lstatOf(real("/var/lib/etcd/x")).st_uid, 1234u);
  EXPECT_EQ(lstatOf(real("/var/lib/etcd/x")).st_gid, 5678u);
  EXPECT_EQ(fs_->write("/var/lib/etcd/x", "x", {.owner = etcd}).value(), Changed::kNo);
  EXPECT_EQ(fs_->write("/var/lib/etcd/x", "x", {.owner = Owner{}}).value(), Changed::kYes);
  EXPECT_EQ(lstatOf(real("/var/lib/etcd/x")).st_uid, 0u);
}

TEST_F(LocalHostFsTest, RefusesModeBitsOutside07777) {
  auto w = fs_->write("/a", "x", {.mode = 0100644});
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), base::ErrorCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(real("/a")));
}

// --- directories ---

TEST_F(LocalHostFsTest, CreatesParentDirectoriesWithExactModeWhenAsked) {
  ScopedUmask mask(0077);
  ASSERT_TRUE(fs_->write("/etc/kubernetes/manifests/haproxy.yaml", "x",
                         {.create_parents = true, .parent_mode = 0755}));
  EXPECT_EQ(lstatOf(real("/etc")).st_mode & 07777, 0755u);
  EXPECT_EQ(lstatOf(real("/etc/kubernetes/manifests")).st_mode & 07777, 0755u);
  EXPECT_EQ(slurp(real("/etc/kubernetes/manifests/haproxy.yaml")), "x");
}

TEST_F(LocalHostFsTest, MissingParentIsNotFoundUnlessAskedToCreateIt) {
  auto w = fs_->write("/etc/nope/x.conf", "x");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), base::ErrorCode::kNotFound);
  EXPECT_THAT(w.error().message(), StartsWith("write /etc/nope/x.conf: "));
  EXPECT_FALSE(fs::exists(real("/etc")));
}

TEST_F(LocalHostFsTest, MakeDirsCreatesWithExactModeAndLeavesExistingDirectoriesAlone) {
  ScopedUmask mask(0077);
  fs::create_directories(real("/opt"));
  ASSERT_EQ(::chmod(real("/opt").c_str(), 0700), 0);
  ASSERT_TRUE(fs_->makeDirs("/opt/ekco/bin", 0750));
  EXPECT_EQ(lstatOf(real("/opt")).st_mode & 07777, 0700u);
  EXPECT_EQ(lstatOf(real("/opt/ekco")).st_mode & 07777, 0750u);
  EXPECT_EQ(lstatOf(real("/opt/ekco/bin")).st_mode & 07777, 0750u);
  EXPECT_TRUE(fs_->makeDirs("/opt/ekco/bin", 0755));  // exists: fine, mode untouched
  EXPECT_EQ(lstatOf(real("/opt/ekco/bin")).st_mode & 07777, 0750u);
  EXPECT_TRUE(fs_->makeDirs("/"));

  put(real("/opt/file"), "x");
  auto m = fs_->makeDirs("/opt/file");
  ASSERT_FALSE(m);
  EXPECT_THAT(m.error().message(), StartsWith("mkdir /opt/file: "));
}

TEST_F(LocalHostFsTest, RefusesToWriteOverADirectory) {
  fs::create_directories(real("/etc/dir"));
  auto w = fs_->write("/etc/dir", "x");
  ASSERT_FALSE(w);
  EXPECT_THAT(w.error().message(), StartsWith("write /etc/dir: "));
  EXPECT_TRUE(fs::is_directory(real("/etc/dir")));
  EXPECT_FALSE(fs_->write("/", "x"));
}

TEST_F(LocalHostFsTest, ListReturnsSortedNamesIncludingDotFiles) {
  put(real("/d/b"), "");
  put(real("/d/a"), "");
  put(real("/d/.hidden"), "");
  fs::create_directories(real("/d/c"));
  EXPECT_THAT(fs_->list("/d").value(), ElementsAre(".hidden", "a", "b", "c"));
  EXPECT_THAT(fs_->list("/").value(), ElementsAre("d"));
  EXPECT_EQ(fs_->list("/missing").error().code(), base::ErrorCode::kNotFound);
}

// --- exists, stat, remove ---

TEST_F(LocalHostFsTest, ExistsIsFalseForMissingPathsAndDanglingSymlinks) {
  put(real("/etc/a"), "x");
  fs::create_symlink("/etc/missing", real("/etc/dangling"));
  EXPECT_TRUE(fs_->exists("/etc/a").value());
  EXPECT_TRUE(fs_->exists("/etc").value());
  EXPECT_TRUE(fs_->exists("/").value());
  EXPECT_FALSE(fs_->exists("/etc/b").value());
  EXPECT_FALSE(fs_->exists("/nodir/b").value());
  EXPECT_FALSE(fs_->exists("/etc/dangling").value());
  EXPECT_EQ(fs_->exists("/etc/../a").error().code(), base::ErrorCode::kEscape);
}

TEST_F(LocalHostFsTest, StatReportsTypeModeOwnerSizeAndMtime) {
  put(real("/etc/a"), "12345");
  ASSERT_EQ(::chmod(real("/etc/a").c_str(), 0640), 0);
  setMtime(real("/etc/a"), base::WallTime(std::chrono::seconds(1'600'000'000)));
  fs::create_symlink("a", real("/etc/link"));
  for (const char* p : {"/etc/a", "/etc/link"}) {
    auto st = fs_->stat(p);
    ASSERT_TRUE(st) << st.error().message();
    EXPECT_EQ(st->type, FileType::kRegular);
    EXPECT_EQ(st->mode, 0640u);
    EXPECT_EQ(st->uid, ::geteuid());
    EXPECT_EQ(st->size, 5u);
    EXPECT_EQ(st->mtime, base::WallTime(std::chrono::seconds(1'600'000'000)));
  }
  EXPECT_EQ(fs_->stat("/etc").value().type, FileType::kDirectory);
  auto missing = fs_->stat("/etc/none");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), base::ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().message(), "stat /etc/none: No such file or directory");
}

TEST_F(LocalHostFsTest, RemoveOfAnAbsentPathIsNotAnError) {
  EXPECT_TRUE(fs_->remove("/etc/none"));
  EXPECT_TRUE(fs_->remove("/no/such/dir/file"));
  put(real("/etc/a"), "x");
  EXPECT_TRUE(fs_->remove("/etc/a"));
  EXPECT_FALSE(fs::exists(real("/etc/a")));
  EXPECT_TRUE(fs_->remove("/etc/a"));
}

TEST_F(LocalHostFsTest, RemoveDeletesASymlinkNotItsTarget) {
  put(real("/etc/target"), "keep");
  fs::create_symlink("/etc/target", real("/etc/link"));
  ASSERT_TRUE(fs_->remove("/etc/link"));
  EXPECT_FALSE(fs::is_symlink(real("/etc/link")));
  EXPECT_EQ(slurp(real("/etc/target")), "keep");
}

TEST_F(LocalHostFsTest, RemoveRefusesDirectories) {
  fs::create_directories(real("/etc/dir"));
  auto r = fs_->remove("/etc/dir");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), StartsWith("remove /etc/dir: "));
  EXPECT_TRUE(fs::is_directory(real("/etc/dir")));
}

TEST_F(LocalHostFsTest, RemoveEmptyDirRemovesOnlyEmptyDirectoriesInsideTheRoot) {
  fs::create_directories(real("/var/backup/old"));
  put(real("/var/backup/full/file"), "x");
  EXPECT_TRUE(fs_->removeEmptyDir("/var/backup/old"));
  EXPECT_FALSE(fs::exists(real("/var/backup/old")));
  EXPECT_TRUE(fs_->removeEmptyDir("/var/backup/old"));  // absent: fine
  auto full = fs_->removeEmptyDir("/var/backup/full");
  ASSERT_FALSE(full);
  EXPECT_THAT(full.error().message(), StartsWith("remove directory /var/backup/full: "));
  EXPECT_TRUE(fs::exists(real("/var/backup/full/file")));
  auto file = fs_->removeEmptyDir("/var/backup/full/file");
  EXPECT_FALSE(file);
  // A symlink to a directory outside is not followed: the link stays an error, the target stays.
  const fs::path outside = root_.parent_path() / (root_.filename().string() + "-outside");
  fs::create_directories(outside);
  fs::create_directory_symlink(outside, real("/var/link"));
  EXPECT_FALSE(fs_->removeEmptyDir("/var/link"));
  EXPECT_TRUE(fs::exists(outside));
  fs::remove(outside);
}

// --- durability and failure ---

TEST_F(LocalHostFsTest, FileIsSyncedBeforeItsDirectoryAndNewDirectoriesIntoTheirParents) {
  fs::create_directories(real("/etc"));
  {
    std::lock_guard lock(fsync_probe::mu);
    fsync_probe::recording = true;
  }
  ASSERT_TRUE(fs_->write("/etc/new/sub/x.conf", "x", {.create_parents = true}));
  std::vector<fsync_probe::Synced> synced;
  {
    std::lock_guard lock(fsync_probe::mu);
    fsync_probe::recording = false;
    synced = fsync_probe::synced;
  }
  auto indexOf = [&](const fs::path& p) -> long {
    const struct stat st = lstatOf(p);
    auto it = std::find_if(synced.rbegin(), synced.rend(), [&](const fsync_probe::Synced& s) {
      return s.dev == st.st_dev && s.ino == st.st_ino;
    });
    return it == synced.rend() ? -1 : static_cast<long>(synced.rend() - it) - 1;
  };
  const long file = indexOf(real("/etc/new/sub/x.conf"));
  const long dir = indexOf(real("/etc/new/sub"));
  ASSERT_GE(file, 0) << "file never fsynced";
  ASSERT_GE(dir, 0) << "directory never fsynced";
  EXPECT_LT(file, dir) << "directory must be fsynced after the rename";
  EXPECT_TRUE(synced[static_cast<size_t>(dir)].is_dir);
  EXPECT_GE(indexOf(real("/etc")), 0) << "entry of new dir /etc/new not synced";
  EXPECT_GE(indexOf(real("/etc/new")), 0) << "entry of new dir /etc/new/sub not synced";

  {
    std::lock_guard lock(fsync_probe::mu);
    fsync_probe::synced.clear();
    fsync_probe::recording = true;
  }
  ASSERT_TRUE(fs_->remove("/etc/new/sub/x.conf"));
  {
    std::lock_guard lock(fsync_probe::mu);
    fsync_probe::recording = false;
    synced = fsync_probe::synced;
  }
  EXPECT_GE(indexOf(real("/etc/new/sub")), 0) << "removal not synced";
}

TEST_F(LocalHostFsTest, FailedFileSyncLeavesTheTargetUntouchedAndNoTempFile) {
  ASSERT_TRUE(fs_->write("/etc/x.conf", "old", {.create_parents = true}));
  fsync_probe::fail_files_with = EIO;
  auto w = fs_->write("/etc/x.conf", "new");
  fsync_probe::fail_files_with = 0;
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), base::ErrorCode::kIo);
  EXPECT_EQ(w.error().message(), "write /etc/x.conf: fsync temp file: Input/output error");
  EXPECT_EQ(slurp(real("/etc/x.conf")), "old");
  EXPECT_THAT(fs_->list("/etc").value(), ElementsAre("x.conf"));
}

TEST_F(LocalHostFsTest, FailedDirectorySyncIsReportedThoughTheNewContentIsInPlace) {
  ASSERT_TRUE(fs_->write("/etc/x.conf", "old", {.create_parents = true}));
  fsync_probe::fail_dirs_with = EIO;
  auto w = fs_->write("/etc/x.conf", "new");
  fsync_probe::fail_dirs_with = 0;
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().message(), "write /etc/x.conf: fsync directory /etc: Input/output error");
  EXPECT_EQ(slurp(real("/etc/x.conf")), "new");
  EXPECT_THAT(fs_->list("/etc").value(), ElementsAre("x.conf"));
}

// --- messages ---

TEST_F(LocalHostFsTest, ErrorMessagesNameTheHostPath) {
  auto parent = fs_->read("/etc/missing.conf");
  ASSERT_FALSE(parent);
  EXPECT_EQ(parent.error().code(), base::ErrorCode::kNotFound);
  EXPECT_EQ(parent.error().message(), "read /etc/missing.conf: /etc: No such file or directory");

  fs::create_directories(real("/etc"));
  auto r = fs_->read("/etc/missing.conf");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kNotFound);
  EXPECT_EQ(r.error().message(), "read /etc/missing.conf: No such file or directory");

  put(real("/etc/file"), "x");
  auto nested = fs_->read("/etc/file/x");
  ASSERT_FALSE(nested);
  EXPECT_EQ(nested.error().message(), "read /etc/file/x: /etc/file: Not a directory");

  fs::create_directories(real("/etc/dir"));
  EXPECT_EQ(fs_->read("/etc/dir").error().message(), "read /etc/dir: Is a directory");
  EXPECT_EQ(fs_->list("/etc/file").error().message(), "list /etc/file: Not a directory");
}

// --- temp files ---

TEST(LocalHostFsTempNames, MatchOnlyTheWritersPattern) {
  EXPECT_TRUE(LocalHostFs::isTempName(".haproxy.cfg.ekco-tmp.0123456789abcdef"));
  EXPECT_FALSE(LocalHostFs::isTempName("haproxy.cfg.ekco-tmp.0123456789abcdef"));
  EXPECT_FALSE(LocalHostFs::isTempName(".haproxy.cfg.ekco-tmp.0123456789ABCDEF"));
  EXPECT_FALSE(LocalHostFs::isTempName(".haproxy.cfg.ekco-tmp.0123456789abcde"));
  EXPECT_FALSE(LocalHostFs::isTempName(".haproxy.cfg.ekco-tmp.0123456789abcdefg"));
  EXPECT_FALSE(LocalHostFs::isTempName(".ekco-tmp.0123456789abcdef"));
  EXPECT_FALSE(LocalHostFs::isTempName(".haproxy.cfg.swp"));
}

TEST_F(LocalHostFsTest, RefusesToWriteANameThatLooksLikeATempFile) {
  auto w = fs_->write("/.a.ekco-tmp.0123456789abcdef", "x");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), base::ErrorCode::kInvalidArgument);
}

TEST_F(LocalHostFsTest, LongNamesGetTruncatedTempNames) {
  const std::string name(255, 'n');
  ASSERT_TRUE(fs_->write("/" + name, "x"));
  EXPECT_EQ(slurp(real("/" + name)), "x");
  EXPECT_THAT(fs_->list("/").value(), ElementsAre(name));
}

TEST_F(LocalHostFsTest, SweepRemovesOnlyOldFilesOfTheTempPattern) {
  base::ManualClock clock;
  auto opened = LocalHostFs::open(root_.string(), clock);
  ASSERT_TRUE(opened);
  LocalHostFs& fs = **opened;
  const base::WallTime now = clock.wallNow();
  const fs::path dir = real("/etc/kubernetes/manifests");
  auto make = [&](const std::string& name, std::chrono::seconds age) {
    put(dir / name, "junk");
    setMtime(dir / name, now - age);
  };
  make(".haproxy.yaml.ekco-tmp.0123456789abcdef", std::chrono::hours(2));    // stale: swept
  make(".etcd.yaml.ekco-tmp.fedcba9876543210", std::chrono::hours(1));       // exactly 1h: swept
  make(".haproxy.yaml.ekco-tmp.00000000000000aa", std::chrono::minutes(5));  // young
  make("haproxy.yaml", std::chrono::hours(2));                               // not a temp
  make(".haproxy.yaml.ekco-tmp.0123456789ABCDEF", std::chrono::hours(2));    // not the pattern
  make(".haproxy.yaml.swp", std::chrono::hours(2));
  fs::create_directories(dir / ".dir.ekco-tmp.0123456789abcdef");  // not a file
  setMtime(dir / ".dir.ekco-tmp.0123456789abcdef", now - std::chrono::hours(2));

  auto swept = fs.sweepStaleTemps("/etc/kubernetes/manifests", std::chrono::hours(1));
  ASSERT_TRUE(swept) << swept.error().message();
  EXPECT_EQ(*swept, 2u);
  EXPECT_THAT(
      fs.list("/etc/kubernetes/manifests").value(),
      ElementsAre(".dir.ekco-tmp.0123456789abcdef", ".haproxy.yaml.ekco-tmp.00000000000000aa",
                  ".haproxy.yaml.ekco-tmp.0123456789ABCDEF", ".haproxy.yaml.swp", "haproxy.yaml"));
  EXPECT_EQ(fs.sweepStaleTemps("/no/such/dir", std::chrono::hours(1)).value(), 0u);
}

TEST_F(LocalHostFsTest, WriteSweepsStaleTempsOfTheSameTargetOnly) {
  base::ManualClock clock;
  auto opened = LocalHostFs::open(root_.string(), clock);
  ASSERT_TRUE(opened);
  const base::WallTime now = clock.wallNow();
  const fs::path dir = real("/etc");
  auto make = [&](const std::string& name, std::chrono::seconds age) {
    put(dir / name, "junk");
    setMtime(dir / name, now - age);
  };
  make(".a.conf.ekco-tmp.0123456789abcdef", LocalHostFs::kStaleTempAge + std::chrono::seconds(1));
  make(".a.conf.ekco-tmp.00000000000000aa", std::chrono::minutes(1));  // maybe a live writer
  make(".b.conf.ekco-tmp.0123456789abcdef", std::chrono::hours(1));    // another target's
  ASSERT_TRUE((*opened)->write("/etc/a.conf", "x"));
  EXPECT_THAT((*opened)->list("/etc").value(),
              ElementsAre(".a.conf.ekco-tmp.00000000000000aa", ".b.conf.ekco-tmp.0123456789abcdef",
                          "a.conf"));
}

// --- locks ---

TEST_F(LocalHostFsTest, TryLockCreatesTheFileWithTheModeAndExcludesASecondLocker) {
  ASSERT_TRUE(fs_->makeDirs("/var/lib/ekco"));
  auto first = fs_->tryLock("/var/lib/ekco/upgrade.lock", 0600);
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_EQ(fs_->stat("/var/lib/ekco/upgrade.lock").value().mode, 0600u);
  // Another open file description conflicts, even in the same process.
  auto second = fs_->tryLock("/var/lib/ekco/upgrade.lock");
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code(), base::ErrorCode::kUnavailable);
  EXPECT_EQ(second.error().message(), "lock /var/lib/ekco/upgrade.lock: held by another process");
  first->reset();  // released with the descriptor; the file stays
  auto third = fs_->tryLock("/var/lib/ekco/upgrade.lock");
  ASSERT_TRUE(third) << third.error().message();
  EXPECT_TRUE(fs::exists(real("/var/lib/ekco/upgrade.lock")));
}

TEST_F(LocalHostFsTest, TryLockRefusesASymlinkAndAMissingParent) {
  ASSERT_TRUE(fs_->makeDirs("/etc"));
  fs::create_symlink("/etc/target", real("/etc/link.lock"));
  auto link = fs_->tryLock("/etc/link.lock");
  ASSERT_FALSE(link);
  EXPECT_FALSE(fs::exists(real("/etc/target")));
  auto missing = fs_->tryLock("/nope/x.lock");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), base::ErrorCode::kNotFound);
}

}  // namespace
}  // namespace ekco::hostfs
