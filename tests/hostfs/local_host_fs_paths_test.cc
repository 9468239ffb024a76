// LocalHostFs confinement: paths with "..", relative paths, symlinks (absolute ones re-rooted,
// relative ones followed inside the root, loops, forty hops, the final component), the native
// root, realPath, open. (local_host_fs_test.cc: reading, writing, modes, durability, locks.)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hostfs/local_host_fs.h"
#include "tests/hostfs/local_host_fs_support.h"

namespace ekco::hostfs {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::LocalHostFsTest;
using testing::lstatOf;
using testing::put;
using testing::slurp;
using ::testing::StartsWith;
using testing::TempDir;

// --- confinement ---

TEST_F(LocalHostFsTest, RefusesPathsWithADotDotComponent) {
  put(tmp_.outside() / "secret", "DECOY");
  const std::string escape = "/etc/../../outside/secret";
  auto r = fs_->read(escape);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kEscape);
  EXPECT_THAT(r.error().message(), StartsWith("read " + escape + ": "));
  auto w = fs_->write(escape, "pwned", {.create_parents = true});
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), base::ErrorCode::kEscape);
  EXPECT_THAT(w.error().message(), StartsWith("write " + escape + ": "));
  EXPECT_EQ(fs_->remove(escape).error().code(), base::ErrorCode::kEscape);
  EXPECT_EQ(fs_->stat("/..").error().code(), base::ErrorCode::kEscape);
  EXPECT_EQ(fs_->makeDirs("/a/../b").error().code(), base::ErrorCode::kEscape);
  EXPECT_EQ(slurp(tmp_.outside() / "secret"), "DECOY");
  EXPECT_FALSE(fs::exists(real("/etc")));
}

TEST_F(LocalHostFsTest, RefusesRelativePaths) {
  for (const char* p : {"etc/a", "", "./etc/a"}) {
    auto r = fs_->read(p);
    ASSERT_FALSE(r) << p;
    EXPECT_EQ(r.error().code(), base::ErrorCode::kInvalidArgument) << p;
    EXPECT_FALSE(fs_->write(p, "x", {.create_parents = true})) << p;
  }
  EXPECT_THAT(fs_->read("etc/a").error().message(), StartsWith("read etc/a: "));
  EXPECT_TRUE(fs::is_empty(root_));
}

TEST_F(LocalHostFsTest, DotAndRepeatedSlashesAreHarmless) {
  put(real("/etc/a"), "x");
  EXPECT_EQ(fs_->read("//etc/./a").value(), "x");
}

TEST_F(LocalHostFsTest, AbsoluteSymlinkNamesAHostPathAndIsReRooted) {
  put(real("/etc/real.conf"), "inside");
  fs::create_symlink("/etc/real.conf", real("/etc/alias.conf"));
  EXPECT_EQ(fs_->read("/etc/alias.conf").value(), "inside");
}

TEST_F(LocalHostFsTest, AbsoluteSymlinkToARealOutsidePathStaysInsideTheRoot) {
  // The link's text is the decoy's real path; under the root it names a different file.
  const fs::path decoy_dir = tmp_.outside() / "k8s";
  put(decoy_dir / "manifest.yaml", "DECOY");
  put(tmp_.outside() / "secret", "DECOY");
  fs::create_directories(real("/etc"));
  fs::create_symlink(decoy_dir, real("/etc/kubernetes"));
  fs::create_symlink(tmp_.outside() / "secret", real("/etc/secret"));

  auto r = fs_->read("/etc/secret");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kNotFound);

  auto w = fs_->write("/etc/kubernetes/manifest.yaml", "mine", {.create_parents = true});
  ASSERT_TRUE(w) << w.error().message();
  EXPECT_EQ(slurp(decoy_dir / "manifest.yaml"), "DECOY");
  EXPECT_EQ(slurp(root_ / decoy_dir.relative_path() / "manifest.yaml"), "mine");
  EXPECT_EQ(fs_->read("/etc/kubernetes/manifest.yaml").value(), "mine");
}

TEST_F(LocalHostFsTest, OpenDirectoryResolvesUnderTheRootAndRefusesFiles) {
  fs::create_directories(real("/run/ekco"));
  fs::create_directories(tmp_.outside() / "run");
  fs::create_symlink(tmp_.outside() / "run", real("/var-run"));  // re-rooted, like any link
  auto fd = fs_->openDirectory("/run/ekco");
  ASSERT_TRUE(fd) << fd.error().message();
  struct stat by_fd {
  }, by_path{};
  ASSERT_EQ(::fstat(fd->get(), &by_fd), 0);
  ASSERT_EQ(::stat(real("/run/ekco").c_str(), &by_path), 0);
  EXPECT_EQ(by_fd.st_ino, by_path.st_ino);
  auto linked = fs_->openDirectory("/var-run");
  ASSERT_FALSE(linked);  // <root><outside>/run does not exist; the real outside is never used
  EXPECT_EQ(linked.error().code(), base::ErrorCode::kNotFound);
  put(real("/run/file"), "x");
  auto file = fs_->openDirectory("/run/file");
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().code(), base::ErrorCode::kInvalidArgument);
  EXPECT_THAT(file.error().message(), StartsWith("open directory /run/file: "));
  ASSERT_TRUE(fs_->openDirectory("/"));
}

TEST_F(LocalHostFsTest, RelativeSymlinkInsideTheRootIsFollowed) {
  put(real("/opt/k8s/admin.conf"), "conf");
  fs::create_directories(real("/etc"));
  fs::create_symlink("../opt/k8s", real("/etc/kubernetes"));
  EXPECT_EQ(fs_->read("/etc/kubernetes/admin.conf").value(), "conf");
  ASSERT_TRUE(fs_->write("/etc/kubernetes/new.conf", "n"));
  EXPECT_EQ(slurp(real("/opt/k8s/new.conf")), "n");
}

TEST_F(LocalHostFsTest, RefusesSymlinkThatClimbsAboveTheRoot) {
  put(tmp_.outside() / "secret", "DECOY");
  fs::create_directories(real("/etc"));
  // From root/etc, ../.. is the directory holding root/ and outside/.
  fs::create_symlink("../../outside/secret", real("/etc/secret"));
  fs::create_symlink("../../outside", real("/etc/out"));

  auto r = fs_->read("/etc/secret");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kEscape);
  EXPECT_EQ(r.error().message(),
            "read /etc/secret: symlink /etc/secret -> ../../outside/secret climbs above the "
            "host root");

  auto w = fs_->write("/etc/out/secret", "pwned");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), base::ErrorCode::kEscape);
  EXPECT_THAT(w.error().message(), StartsWith("write /etc/out/secret: "));
  EXPECT_EQ(fs_->exists("/etc/out/secret").error().code(), base::ErrorCode::kEscape);
  EXPECT_EQ(fs_->list("/etc/out").error().code(), base::ErrorCode::kEscape);
  EXPECT_EQ(fs_->sweepStaleTemps("/etc/out", std::chrono::seconds(0)).error().code(),
            base::ErrorCode::kEscape);
  EXPECT_EQ(slurp(tmp_.outside() / "secret"), "DECOY");
  EXPECT_THAT(fs_->list("/etc").value(), ElementsAre("out", "secret"));
}

TEST_F(LocalHostFsTest, SymlinkClimbingToExactlyTheRootIsFine) {
  put(real("/a"), "top");
  fs::create_directories(real("/etc/x"));
  fs::create_symlink("../../a", real("/etc/x/up"));
  EXPECT_EQ(fs_->read("/etc/x/up").value(), "top");
}

TEST_F(LocalHostFsTest, SymlinkLoopIsAnError) {
  fs::create_directories(real("/etc"));
  fs::create_symlink("b", real("/etc/a"));
  fs::create_symlink("/etc/a", real("/etc/b"));
  fs::create_symlink("self/x", real("/etc/self"));
  for (const char* p : {"/etc/a", "/etc/self", "/etc/a/x"}) {
    auto r = fs_->read(p);
    ASSERT_FALSE(r) << p;
    EXPECT_THAT(r.error().message(), HasSubstr("Too many levels of symbolic links")) << p;
    EXPECT_THAT(r.error().message(), StartsWith(std::string("read ") + p + ": ")) << p;
  }
  EXPECT_FALSE(fs_->write("/etc/a/x", "x"));
}

TEST_F(LocalHostFsTest, FortySymlinkHopsAreAllowed) {
  put(real("/etc/l0"), "end");
  for (int i = 1; i <= 41; ++i) {
    fs::create_symlink("l" + std::to_string(i - 1), real("/etc/l" + std::to_string(i)));
  }
  EXPECT_EQ(fs_->read("/etc/l40").value(), "end");
  EXPECT_FALSE(fs_->read("/etc/l41"));
}

TEST_F(LocalHostFsTest, SymlinkAtTheFinalComponentIsReplacedOnWriteNotFollowed) {
  put(real("/etc/real.conf"), "REAL");
  put(tmp_.outside() / "secret", "DECOY");
  fs::create_symlink("/etc/real.conf", real("/etc/cfg"));
  fs::create_symlink(tmp_.outside() / "secret", real("/etc/abs"));
  fs::create_symlink("../../outside/secret", real("/etc/climb"));
  for (const char* p : {"/etc/cfg", "/etc/abs", "/etc/climb"}) {
    auto w = fs_->write(p, "NEW");
    ASSERT_TRUE(w) << p << ": " << w.error().message();
    EXPECT_FALSE(fs::is_symlink(real(p))) << p;
    EXPECT_EQ(slurp(real(p)), "NEW") << p;
    EXPECT_EQ(lstatOf(real(p)).st_mode & 07777, 0644u) << p;
  }
  EXPECT_EQ(slurp(real("/etc/real.conf")), "REAL");
  EXPECT_EQ(slurp(tmp_.outside() / "secret"), "DECOY");
}

TEST_F(LocalHostFsTest, ReadsProcSelfMountinfoUnderTheNativeRoot) {
  auto native = LocalHostFs::open("/", clock_);
  ASSERT_TRUE(native) << native.error().message();
  EXPECT_EQ((*native)->root(), "/");
  auto mountinfo = (*native)->read("/proc/self/mountinfo");
  ASSERT_TRUE(mountinfo) << mountinfo.error().message();
  EXPECT_THAT(*mountinfo, HasSubstr(" / "));
  EXPECT_TRUE((*native)->exists("/proc/self/status").value());
}

TEST_F(LocalHostFsTest, RealPathPrefixesTheRoot) {
  EXPECT_EQ(fs_->realPath("/etc/haproxy/haproxy.cfg"),
            (root_ / "etc/haproxy/haproxy.cfg").string());
  EXPECT_EQ(fs_->root(), root_.string());
  EXPECT_EQ(fs_->realPath("/"), root_.string());
  auto native = LocalHostFs::open("/", clock_);
  ASSERT_TRUE(native);
  EXPECT_EQ((*native)->realPath("/etc/x"), "/etc/x");
  auto trailing = LocalHostFs::open(root_.string() + "/", clock_);
  ASSERT_TRUE(trailing);
  EXPECT_EQ((*trailing)->root(), root_.string());
}

TEST_F(LocalHostFsTest, OpenRefusesARelativeOrMissingRoot) {
  EXPECT_EQ(LocalHostFs::open("host", clock_).error().code(), base::ErrorCode::kInvalidArgument);
  auto missing = LocalHostFs::open((root_ / "missing").string(), clock_);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), base::ErrorCode::kNotFound);
}

}  // namespace
}  // namespace ekco::hostfs
