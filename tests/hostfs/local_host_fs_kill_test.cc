// The kill test: a writer process (hostfs_writer) rewrites one file in a loop and is SIGKILLed
// at random points while a reader keeps reading. Atomic replacement means every read is one
// whole content, and the file is whole after every kill.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"

extern char** environ;

namespace ekco::hostfs {
namespace {

namespace fs = std::filesystem;

constexpr int kTrials = 200;
constexpr int kMaxKillDelayUs = 20'000;
constexpr std::uint32_t kDefaultSeed = 20240611;  // override with EKCO_KILL_SEED

// Keep in sync with content() in hostfs_writer_main.cc.
std::string killTestContent(char fill, std::size_t size) {
  return std::string(size, fill) + fill + "-END";
}

std::string describe(const std::string& s) {
  if (s.empty()) return "empty";
  return std::to_string(s.size()) + " bytes, starting '" + s.substr(0, 1) + "', ending '" +
         s.substr(s.size() >= 5 ? s.size() - 5 : 0) + "'";
}

// A running hostfs_writer; killed and reaped on destruction if still running.
class Writer {
 public:
  Writer(const std::string& root, const std::string& host_path) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::string bin = HOSTFS_WRITER;
    std::vector<char*> argv = {bin.data(), const_cast<char*>(root.c_str()),
                               const_cast<char*>(host_path.c_str()), nullptr};
    if (::posix_spawn(&pid_, bin.c_str(), &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    ready_fd_ = fds[0];
  }
  ~Writer() {
    kill();
    if (ready_fd_ >= 0) ::close(ready_fd_);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Blocks until the writer says it is about to start writing; false if it died first.
  bool waitReady() {
    if (pid_ <= 0) return false;
    std::string got;
    char buf[16];
    while (got.find('\n') == std::string::npos) {
      ssize_t n = ::read(ready_fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      got.append(buf, static_cast<std::size_t>(n));
    }
    return got == "ready\n";
  }

  // SIGKILLs and reaps the writer; returns its wait status (-1 if it was not running).
  int kill() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int ready_fd_ = -1;
};

TEST(LocalHostFsKill, ReadersSeeOnlyWholeContentsWhileTheWriterIsKilledAtRandomPoints) {
  char tmpl[] = "/tmp/ekco-hostfs-kill-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path root = tmpl;
  struct Cleanup {
    fs::path p;
    ~Cleanup() { fs::remove_all(p); }
  } cleanup{root};

  std::uint32_t seed = kDefaultSeed;
  if (const char* env = std::getenv("EKCO_KILL_SEED"))
    seed = static_cast<std::uint32_t>(std::stoul(env));
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (rerun with EKCO_KILL_SEED=" + std::to_string(seed) + ")");
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_us(0, kMaxKillDelayUs);

  base::SystemClock clock;
  auto opened = LocalHostFs::open(root.string(), clock);
  ASSERT_TRUE(opened) << opened.error().message();
  LocalHostFs& hfs = **opened;
  const std::string dir = "/etc/kubernetes/manifests";
  const std::string path = dir + "/haproxy.yaml";
  const std::string a = killTestContent('A', 256 * 1024);
  const std::string b = killTestContent('B', 384 * 1024);
  // The first write has finished: from here on the file must always be there.
  ASSERT_TRUE(hfs.write(path, a, {.create_parents = true}));

  std::atomic<long> reads{0};
  std::atomic<long> reads_of_b{0};
  std::mutex mu;
  std::string bad_read;  // the first read that was not one whole content
  // A jthread: stopped and joined even when an assertion below returns early.
  std::jthread reader([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      auto r = hfs.read(path);
      std::string problem;
      if (!r) {
        problem = "read failed: " + r.error().message();
      } else if (*r == b) {
        ++reads_of_b;
      } else if (*r != a) {
        problem = "read a torn file: " + describe(*r);
      }
      ++reads;
      if (!problem.empty()) {
        std::lock_guard lock(mu);
        if (bad_read.empty()) bad_read = problem;
        return;
      }
    }
  });

  const base::MonoTime start = clock.monoNow();
  int trial = 0;
  for (; trial < kTrials; ++trial) {
    Writer writer(root.string(), path);
    ASSERT_TRUE(writer.waitReady()) << "trial " << trial << ": writer did not start";
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    const int status = writer.kill();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "trial " << trial << ": writer ended on its own (status " << status << ")";
    auto after = hfs.read(path);
    ASSERT_TRUE(after) << "trial " << trial << ": " << after.error().message();
    ASSERT_TRUE(*after == a || *after == b) << "trial " << trial << ": " << describe(*after);
    std::lock_guard lock(mu);
    if (!bad_read.empty()) break;
  }
  const auto elapsed =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock.monoNow() - start);
  reader.request_stop();
  reader.join();
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(bad_read, "") << "after trial " << trial;
  }
  EXPECT_GT(reads.load(), kTrials);
  EXPECT_GT(reads_of_b.load(), 0) << "the writer never got to write B";

  auto listed = hfs.list(dir);
  ASSERT_TRUE(listed) << listed.error().message();
  std::size_t leftovers = 0;
  for (const std::string& n : *listed) {
    if (n == "haproxy.yaml") continue;
    EXPECT_TRUE(LocalHostFs::isTempName(n)) << "unexpected file " << n;
    ++leftovers;
  }
  // Kills landed mid-write (between temp creation and rename) at least sometimes.
  EXPECT_GT(leftovers, 0u);
  auto swept = hfs.sweepStaleTemps(dir, std::chrono::seconds(0));
  ASSERT_TRUE(swept) << swept.error().message();
  EXPECT_EQ(*swept, leftovers);
  EXPECT_EQ(hfs.list(dir).value(), std::vector<std::string>{"haproxy.yaml"});

  std::printf("[ kill    ] %d trials in %lld ms, %ld reads (%ld of B), %zu temp files swept\n",
              trial, static_cast<long long>(elapsed.count()), reads.load(), reads_of_b.load(),
              leftovers);
}

}  // namespace
}  // namespace ekco::hostfs
