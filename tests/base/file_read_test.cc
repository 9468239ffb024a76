#include "base/os/file_read.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ekco::base {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ReadSmallFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ekco-file-read-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ReadSmallFileTest, ReadsAFileUpToTheBound) {
  std::ofstream(dir_ / "a") << "0123456789";
  auto r = readSmallFile((dir_ / "a").string(), 10);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, "0123456789");
}

// Issue 24 defect 11: nothing over the bound is held.
TEST_F(ReadSmallFileTest, AFileOverTheBoundIsRefusedNamingIt) {
  std::ofstream(dir_ / "a") << "0123456789";
  const std::string path = (dir_ / "a").string();
  auto r = readSmallFile(path, 9);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message(), path + ": larger than 9 bytes; not reading it");
  fs::resize_file(path, std::size_t{3} << 20);
  EXPECT_THAT(readSmallFile(path, std::size_t{1} << 20).error().message(),
              HasSubstr("larger than 1 MiB"));
}

TEST_F(ReadSmallFileTest, APipeIsReadToItsEndAndBoundedToo) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "abcdef", 6), 6);
  ::close(fds[1]);
  auto r = readSmallFile("/proc/self/fd/" + std::to_string(fds[0]), 100);
  ::close(fds[0]);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, "abcdef");

  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "abcdef", 6), 6);
  ::close(fds[1]);
  auto over = readSmallFile("/proc/self/fd/" + std::to_string(fds[0]), 5);
  ::close(fds[0]);
  ASSERT_FALSE(over);
  EXPECT_THAT(over.error().message(), HasSubstr("larger than 5 bytes"));
}

TEST_F(ReadSmallFileTest, MissingFilesAndDirectoriesAreErrors) {
  auto missing = readSmallFile((dir_ / "none").string(), 10);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("open " + (dir_ / "none").string()));
  auto dir = readSmallFile(dir_.string(), 10);
  ASSERT_FALSE(dir);
  EXPECT_EQ(dir.error().message(), dir_.string() + ": is a directory");
}

}  // namespace
}  // namespace ekco::base
