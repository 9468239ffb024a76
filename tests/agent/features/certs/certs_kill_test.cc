// kill -9 at random points of certificate renewals (agent/features/certs/certs.h): certs_renewer
// renews three certificates round after round and is SIGKILLed after a random delay; then the
// repair runs (as at the next start) and every pair on disk must be whole — each certificate
// matches its key, and is the original or a renewed one. Seed: EKCO_CERTS_KILL_SEED.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "agent/features/certs/certs.h"
#include "hostfs/local_host_fs.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/features/certs/kubeadm_pki.h"

extern char** environ;

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;

constexpr int kTrials = 12;
constexpr int kMaxKillDelayMs = 600;

TEST(CertsKill, EveryPairIsWholeAfterAKillAtARandomPointAndTheRepair) {
  std::uint32_t seed = static_cast<std::uint32_t>(std::random_device{}());
  if (const char* s = std::getenv("EKCO_CERTS_KILL_SEED")) seed = std::stoul(s);
  std::printf("EKCO_CERTS_KILL_SEED=%u\n", seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay(0, kMaxKillDelayMs);
  base::SystemClock clock;
  int restored_total = 0;
  int renewed_total = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    testing::TempDir root{"ekco-certs-kill"};
    testing::KubeadmPki pki{root.path()};
    pki.make(10);

    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::string bin = CERTS_RENEWER;
    std::vector<char*> argv = {bin.data(), const_cast<char*>(root.path().c_str()), nullptr};
    pid_t pid = -1;
    ASSERT_EQ(::posix_spawn(&pid, bin.c_str(), &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    char buf[8];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    ::close(fds[0]);
    ASSERT_GT(n, 0) << "certs_renewer did not start";
    std::this_thread::sleep_for(std::chrono::milliseconds(delay(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    ASSERT_TRUE(WIFSIGNALED(status)) << "certs_renewer ended by itself: status " << status;

    auto opened = hostfs::LocalHostFs::open(root.path(), clock);
    ASSERT_TRUE(opened);
    InspectOptions options;
    options.now = clock.wallNow();
    auto restored = repairInterruptedRenewals(**opened, options);
    ASSERT_TRUE(restored) << restored.error().message();
    restored_total += static_cast<int>(restored->size());
    const Inspection in = inspectCertificates(**opened, options);
    for (const CertState& s : in.certificates) {
      if (s.missing) continue;
      EXPECT_TRUE(s.problem.empty()) << s.name << ": " << s.problem;
      if (s.cert && s.left > std::chrono::hours(24 * 300)) ++renewed_total;
    }
  }
  std::printf("%d trials: %d pairs renewed before the kill, %d restored by the repair\n", kTrials,
              renewed_total, restored_total);
}

}  // namespace
}  // namespace ekco::agent
