// A temporary directory used as a filesystem root in tests, removed at the end of the test.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"

namespace ekco::kube::testing {

class TempRoot {
 public:
  TempRoot() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ekco-kube-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    dir_ = pattern;
    auto fs = hostfs::LocalHostFs::open(dir_, clock_);
    if (!fs) ADD_FAILURE() << fs.error().message();
    fs_ = std::move(*fs);
  }
  ~TempRoot() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempRoot(const TempRoot&) = delete;
  TempRoot& operator=(const TempRoot&) = delete;

  // Writes `content` at the absolute path `path` under the root, creating directories.
  void write(std::string_view path, std::string_view content) const {
    const std::filesystem::path real = dir_ + std::string(path);
    std::filesystem::create_directories(real.parent_path());
    std::ofstream(real, std::ios::binary | std::ios::trunc) << content;
  }
  // Copies a file of tests/testdata/kube to `path` under the root.
  void copyFixture(std::string_view fixture, std::string_view path) const {
    std::ifstream in(std::string(EKCO_TESTDATA_DIR) + "/kube/" + std::string(fixture),
                     std::ios::binary);
    EXPECT_TRUE(in) << fixture;
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    write(path, text);
  }

  const hostfs::HostFs& fs() const { return *fs_; }
  const std::string& dir() const { return dir_; }

 private:
  base::ManualClock clock_;
  std::string dir_;
  std::unique_ptr<hostfs::LocalHostFs> fs_;
};

}  // namespace ekco::kube::testing
