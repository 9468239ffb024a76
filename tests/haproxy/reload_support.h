// What the HAProxy reload tests share: a temp directory, file helpers, pid lists.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "haproxy/reload.h"

namespace ekco::haproxy {

inline void PrintTo(const ProcessIdentity& p, std::ostream* os) {
  *os << "{pid " << p.pid << ", start " << p.start_time << "}";
}

namespace testing {

// A fresh directory under the test temp dir, removed at the end.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("ekco-reload-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void writeFile(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  ASSERT_TRUE(out.good()) << path;
}

inline std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// As the agent writes: a temp file renamed over the target, so the inode changes.
inline void replaceFile(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  writeFile(tmp, content);
  std::filesystem::rename(tmp, path);
}

inline ino_t inodeOf(const std::filesystem::path& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

inline std::vector<int> masterPids(const std::vector<HaproxyProcess>& masters) {
  std::vector<int> out;
  for (const HaproxyProcess& m : masters) out.push_back(m.pid);
  return out;
}

inline std::vector<int> workerPids(const HaproxyProcess& master) {
  std::vector<int> out;
  for (const ProcessIdentity& w : master.workers) out.push_back(w.pid);
  return out;
}

}  // namespace testing
}  // namespace ekco::haproxy
