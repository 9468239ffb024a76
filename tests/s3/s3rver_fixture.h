// A real S3 server for tests: s3rver (npm, tests/s3/s3rver, installed by scripts/setup) with
// MinIO's /minio/health/* beside it (tests/s3/s3rver/serve.js), on 127.0.0.1 and a free port.
// Credentials: s3rver's fixed S3RVER / S3RVER. s3rver checks the access key but not the
// signature (our signer is proven against botocore in sigv4_botocore_test.cc).
// multipartPut() uploads in parts with botocore (tests/s3/botocore_multipart_put.py), as S3
// clients do large objects: serve.js then lists it with MinIO's ETag "<md5>-N".
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

extern char** environ;

namespace ekco::s3::testing {

inline constexpr const char* kS3rverKey = "S3RVER";

class S3rver {
 public:
  // Starts it on a free port with its data in `dir`; nullptr (and `error`) when it does not come
  // up within 20 s.
  static std::unique_ptr<S3rver> start(const std::string& dir, std::string* error) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      *error = "pipe failed";
      return nullptr;
    }
    const std::string root = std::string(EKCO_SOURCE_DIR) + "/tests/s3/s3rver";
    const std::string script = root + "/serve.js";
    std::vector<std::string> args = {"node", "--openssl-legacy-provider", script, dir, "127.0.0.1",
                                     "0"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addchdir_np(&actions, root.c_str());
    pid_t pid = -1;
    const int rc = posix_spawnp(&pid, "node", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
      close(fds[0]);
      *error = "cannot start node";
      return nullptr;
    }
    auto server = std::unique_ptr<S3rver>(new S3rver(pid, dir));
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    while (std::chrono::steady_clock::now() < deadline && line.find('\n') == std::string::npos) {
      char buf[128];
      const ssize_t n = read(fds[0], buf, sizeof buf);
      if (n > 0) {
        line.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0) {
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    close(fds[0]);
    if (line.rfind("listening ", 0) != 0) {
      *error = "s3rver did not start: " + line;
      return nullptr;
    }
    server->port_ = std::stoi(line.substr(10));
    return server;
  }

  ~S3rver() { stop(); }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  int port() const { return port_; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }
  // What /minio/health/* answers from now on.
  void setHealth(int status) const { std::ofstream(dir_ + ".health") << status; }
  // What /minio/health/cluster?maintenance=true answers from now on (else as setHealth).
  void setMaintenanceHealth(int status) const {
    std::ofstream(dir_ + ".health-maintenance") << status;
  }

 private:
  S3rver(pid_t pid, std::string dir) : pid_(pid), dir_(std::move(dir)) {}
  pid_t pid_ = -1;
  int port_ = 0;
  std::string dir_;
};

// Uploads the file at `path` to `bucket`/`key` on `server` as a multipart upload of `parts` parts;
// the ETag the server answered ("<md5>-<parts>"), or "" when the upload failed.
inline std::string multipartPut(const S3rver& server, const std::string& bucket,
                                const std::string& key, const std::string& path, int parts) {
  auto quote = [](const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  };
  const std::string cmd = "/usr/bin/python3 " EKCO_SOURCE_DIR
                          "/tests/s3/botocore_multipart_put.py " +
                          quote(server.host()) + " " + quote(bucket) + " " + quote(key) + " " +
                          quote(path) + " " + std::to_string(parts);
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return "";
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p.get()) != nullptr) out += buf;
  if (pclose(p.release()) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace ekco::s3::testing
