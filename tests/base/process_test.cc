#include "base/os/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/result.h"
#include "tests/fakes/scripted_process_runner.h"

namespace ekco::base {
namespace {

using namespace std::chrono_literals;
using fakes::ScriptedProcessRunner;
using Argv = std::vector<std::string>;

Result<ProcessResult> run(ProcessRequest request) {
  static SystemClock clock;
  static BoostProcessRunner runner(clock);
  return runner.run(request);
}

Result<ProcessResult> run(Argv argv) { return run(ProcessRequest{.argv = std::move(argv)}); }

// Wall time of a block, for "returns promptly" checks (the runner's own duration is what is
// tested elsewhere).
template <typename F>
std::chrono::milliseconds timed(F&& f) {
  SystemClock clock;
  MonoTime start = clock.monoNow();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock.monoNow() - start);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ekco-process-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

  std::string write(const std::string& name, const std::string& content, mode_t mode) const {
    std::filesystem::path p = path_ / name;
    std::ofstream(p) << content;
    ::chmod(p.c_str(), mode);
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

// Dead: gone from /proc, or a zombie waiting for its (new) parent to reap it.
bool processGone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  auto paren = line.rfind(')');
  return paren == std::string::npos || line.size() < paren + 3 || line[paren + 2] == 'Z';
}

bool goneWithin(pid_t pid, std::chrono::milliseconds limit) {
  for (auto waited = 0ms; waited < limit; waited += 10ms) {
    if (processGone(pid)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return processGone(pid);
}

// --- exit status ---

TEST(BoostProcessRunner, ReportsExitCodeZeroAsSuccess) {
  auto r = run({"/bin/true"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->term_signal, 0);
  EXPECT_FALSE(r->timed_out);
  EXPECT_TRUE(r->success());
}

TEST(BoostProcessRunner, ReportsNonZeroExitAsAResultNotAnError) {
  auto f = run({"/bin/false"});
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_EQ(f->exit_code, 1);
  EXPECT_FALSE(f->success());

  auto r = run({"/bin/sh", "-c", "exit 42"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 42);
  EXPECT_EQ(r->term_signal, 0);
}

TEST(BoostProcessRunner, ReportsTheSignalThatKilledTheChild) {
  auto r = run({"/bin/sh", "-c", "kill -TERM $$"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->term_signal, SIGTERM);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_FALSE(r->timed_out);
  EXPECT_FALSE(r->success());
}

TEST(BoostProcessRunner, MeasuresTheDuration) {
  auto r = run({"/bin/sleep", "0.2"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_GE(r->duration, 200ms);
  EXPECT_LT(r->duration, 2s);
}

// --- output and input ---

TEST(BoostProcessRunner, CapturesStdoutAndStderrSeparately) {
  auto r = run({"/bin/sh", "-c", "echo out; echo err >&2; echo more out"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->stdout_data, "out\nmore out\n");
  EXPECT_EQ(r->stderr_data, "err\n");
}

TEST(BoostProcessRunner, CapturesMegabytesOnBothStreamsWithoutDeadlock) {
  // Alternating 3 MB writes: a runner that read one stream to the end before the other would
  // leave the child blocked on the other, full pipe.
  auto r = run({"/bin/sh", "-c",
                "head -c 3000000 /dev/zero >&2; head -c 3000000 /dev/zero;"
                "head -c 3000000 /dev/zero >&2; head -c 3000000 /dev/zero"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_data.size(), 6'000'000u);
  EXPECT_EQ(r->stderr_data.size(), 6'000'000u);
  EXPECT_EQ(r->stdout_data.find_first_not_of('\0'), std::string::npos);
  EXPECT_FALSE(r->output_truncated);
}

TEST(BoostProcessRunner, DeliversStdinWhileReadingOutput) {
  // 5 MB through cat: the runner must read cat's output while still writing its input.
  std::string input;
  for (int i = 0; input.size() < 5'000'000; ++i) input += std::to_string(i) + "\n";
  auto r = run(ProcessRequest{.argv = {"/bin/cat"}, .stdin_data = input});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_data.size(), input.size());
  EXPECT_TRUE(r->stdout_data == input);
}

TEST(BoostProcessRunner, ChildWithoutStdinDataReadsEndOfFile) {
  // Not the agent's stdin: cat would otherwise wait on the test's terminal.
  auto r = run(ProcessRequest{.argv = {"/bin/cat"}, .timeout = 5s});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_data, "");
}

TEST(BoostProcessRunner, ChildThatIgnoresStdinNeitherFailsTheRunNorKillsTheAgent) {
  // /bin/true exits without reading; writing the rest raises SIGPIPE, which must not reach the
  // test process and must not stay blocked or pending afterwards.
  auto r = run(ProcessRequest{.argv = {"/bin/true"}, .stdin_data = std::string(5'000'000, 'x')});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  sigset_t mask;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  EXPECT_FALSE(sigismember(&mask, SIGPIPE));
  sigset_t pending;
  sigpending(&pending);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE));
}

TEST(BoostProcessRunner, DiscardsOutputBeyondTheLimitWithoutBlockingTheChild) {
  auto r = run(ProcessRequest{.argv = {"/bin/sh", "-c", "head -c 1000000 /dev/zero"},
                              .max_output_bytes = 1000});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_data.size(), 1000u);
  EXPECT_TRUE(r->output_truncated);
}

TEST(BoostProcessRunner, StreamsOutputLinesWhileTheChildRuns) {
  // The child waits for a file the callback creates on its first line: it only finishes if the
  // line is passed while it runs.
  TempDir dir;
  const std::string go = (dir.path() / "go").string();
  std::vector<std::string> out_lines;
  std::vector<std::string> err_lines;
  ProcessRequest request{.argv = {"/bin/sh", "-c",
                                  "echo first; i=0; while [ ! -e '" + go +
                                      "' ] && [ $i -lt 200 ]; do "
                                      "sleep 0.05; i=$((i+1)); done; [ -e '" +
                                      go +
                                      "' ] || exit 7; "
                                      "echo err >&2; printf '\\n'; printf 'no newline'"},
                         .timeout = 30s};
  request.on_output_line = [&](OutputStream stream, std::string_view line) {
    (stream == OutputStream::kStdout ? out_lines : err_lines).emplace_back(line);
    if (line == "first") std::ofstream{go} << "go";
  };
  auto r = run(request);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(out_lines, (std::vector<std::string>{"first", "", "no newline"}));
  EXPECT_EQ(err_lines, (std::vector<std::string>{"err"}));
  EXPECT_EQ(r->stdout_data, "first\n\nno newline");  // still captured
}

TEST(BoostProcessRunner, HeartbeatsWhileASilentChildRuns) {
  // The child prints nothing and waits for a file the heartbeat creates: it only finishes if the
  // heartbeat comes while it runs.
  TempDir dir;
  const std::string go = (dir.path() / "go").string();
  std::vector<std::chrono::milliseconds> beats;
  ProcessRequest request{.argv = {"/bin/sh", "-c",
                                  "i=0; while [ ! -e '" + go +
                                      "' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; "
                                      "[ -e '" +
                                      go + "' ] || exit 7"},
                         .timeout = 30s};
  request.heartbeat_interval = 100ms;
  request.on_heartbeat = [&](std::chrono::milliseconds elapsed) {
    beats.push_back(elapsed);
    std::ofstream{go} << "go";
  };
  auto r = run(request);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  ASSERT_FALSE(beats.empty());
  EXPECT_GE(beats.front(), 100ms);
  for (std::size_t i = 1; i < beats.size(); ++i) EXPECT_GE(beats[i] - beats[i - 1], 100ms);
}

TEST(BoostProcessRunner, NoHeartbeatForAChildThatEndsFirst) {
  int beats = 0;
  ProcessRequest request{.argv = {"/bin/true"}, .timeout = 30s};
  request.heartbeat_interval = 10s;
  request.on_heartbeat = [&](std::chrono::milliseconds) { ++beats; };
  auto r = run(request);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(beats, 0);
  EXPECT_LT(r->duration, 5s);  // the wait for the next heartbeat does not outlive the child
}

TEST(BoostProcessRunner, StreamsLongLinesInPiecesAndOutputBeyondTheCaptureLimit) {
  std::vector<std::size_t> sizes;
  ProcessRequest request{.argv = {"/bin/sh", "-c", "head -c 150000 /dev/zero | tr '\\0' x; echo"},
                         .max_output_bytes = 1000};
  request.on_output_line = [&](OutputStream, std::string_view line) {
    sizes.push_back(line.size());
  };
  auto r = run(request);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->stdout_data.size(), 1000u);
  EXPECT_EQ(sizes, (std::vector<std::size_t>{kMaxOutputLine, kMaxOutputLine,
                                             150000 - 2 * kMaxOutputLine}));
}

// --- arguments ---

TEST(BoostProcessRunner, PassesArgumentsLiterallyWithoutAShell) {
  auto echo = run({"/bin/echo", "$HOME; rm -rf x"});
  ASSERT_TRUE(echo) << echo.error().message();
  EXPECT_EQ(echo->stdout_data, "$HOME; rm -rf x\n");

  auto printf = run({"/usr/bin/printf", "[%s]", "a b", "", "*", "`id`", "'\"", "\\n", "$(id)"});
  ASSERT_TRUE(printf) << printf.error().message();
  EXPECT_EQ(printf->stdout_data, "[a b][][*][`id`]['\"][\\n][$(id)]");
}

TEST(BoostProcessRunner, KeepsArgv0AsGiven) {
  auto r = run({"cat", "/proc/self/cmdline"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->stdout_data, std::string("cat\0/proc/self/cmdline\0", 23));
}

TEST(BoostProcessRunner, RejectsEmptyArgvAndNulBytes) {
  auto empty = run(Argv{});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code(), ErrorCode::kInvalidArgument);

  auto nul = run({"/bin/echo", std::string("a\0b", 3)});
  ASSERT_FALSE(nul);
  EXPECT_EQ(nul.error().code(), ErrorCode::kInvalidArgument);

  auto bad_env = run(ProcessRequest{.argv = {"/bin/true"}, .env = {{"A=B", "c"}}});
  ASSERT_FALSE(bad_env);
  EXPECT_EQ(bad_env.error().code(), ErrorCode::kInvalidArgument);
}

// --- environment ---

TEST(BoostProcessRunner, InheritsTheAgentsEnvironmentAndAddsToIt) {
  ::setenv("EKCO_PROCESS_TEST_INHERITED", "from-agent", 1);
  auto r = run(ProcessRequest{.argv = {"/usr/bin/env"}, .env = {{"EKCO_ADDED", "1"}}});
  ::unsetenv("EKCO_PROCESS_TEST_INHERITED");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_NE(r->stdout_data.find("\nEKCO_PROCESS_TEST_INHERITED=from-agent\n"), std::string::npos)
      << r->stdout_data;
  EXPECT_NE(r->stdout_data.find("\nEKCO_ADDED=1\n"), std::string::npos) << r->stdout_data;
}

TEST(BoostProcessRunner, AddedVariablesOverrideInheritedOnes) {
  ::setenv("EKCO_PROCESS_TEST_OVERRIDE", "old", 1);
  auto r =
      run(ProcessRequest{.argv = {"/usr/bin/env"}, .env = {{"EKCO_PROCESS_TEST_OVERRIDE", "new"}}});
  ::unsetenv("EKCO_PROCESS_TEST_OVERRIDE");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_NE(r->stdout_data.find("EKCO_PROCESS_TEST_OVERRIDE=new\n"), std::string::npos);
  EXPECT_EQ(r->stdout_data.find("EKCO_PROCESS_TEST_OVERRIDE=old"), std::string::npos);
}

TEST(BoostProcessRunner, ReplacesTheWholeEnvironmentWhenNotInheriting) {
  ::setenv("EKCO_PROCESS_TEST_HIDDEN", "x", 1);
  auto r = run(ProcessRequest{.argv = {"/usr/bin/env"},
                              .inherit_env = false,
                              .env = {{"A", "1"}, {"EMPTY", ""}, {"SPACES", "a b"}}});
  ::unsetenv("EKCO_PROCESS_TEST_HIDDEN");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->stdout_data, "A=1\nEMPTY=\nSPACES=a b\n");

  auto none = run(ProcessRequest{.argv = {"/usr/bin/env"}, .inherit_env = false});
  ASSERT_TRUE(none) << none.error().message();
  EXPECT_EQ(none->stdout_data, "");
}

// --- finding the program ---

TEST(BoostProcessRunner, FindsBareProgramNamesInPath) {
  auto r = run({"echo", "hello"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->stdout_data, "hello\n");
}

TEST(BoostProcessRunner, LooksBareNamesUpInTheChildsPath) {
  TempDir dir;
  dir.write("ekco-test-tool", "#!/bin/sh\necho tool ran with \"$1\"\n", 0755);
  auto r = run(ProcessRequest{.argv = {"ekco-test-tool", "x"},
                              .env = {{"PATH", "/nonexistent:" + dir.path().string()}}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->stdout_data, "tool ran with x\n");
}

TEST(BoostProcessRunner, UsesTheDefaultPathWhenTheChildHasNone) {
  auto r = run(ProcessRequest{.argv = {"env"}, .inherit_env = false});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
}

TEST(BoostProcessRunner, MissingProgramIsANotFoundErrorNamingIt) {
  auto absolute = run({"/nonexistent/ekco-no-such-program", "arg"});
  ASSERT_FALSE(absolute);
  EXPECT_EQ(absolute.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(absolute.error().message().find("/nonexistent/ekco-no-such-program"), std::string::npos)
      << absolute.error().message();

  auto bare = run({"ekco-no-such-program"});
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(bare.error().message().find("ekco-no-such-program"), std::string::npos);
}

TEST(BoostProcessRunner, NonExecutableProgramIsPermissionDenied) {
  TempDir dir;
  std::string path = dir.write("ekco-not-executable", "#!/bin/sh\necho no\n", 0644);
  auto absolute = run({path});
  ASSERT_FALSE(absolute);
  EXPECT_EQ(absolute.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_NE(absolute.error().message().find(path), std::string::npos);

  auto bare =
      run(ProcessRequest{.argv = {"ekco-not-executable"}, .env = {{"PATH", dir.path().string()}}});
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.error().code(), ErrorCode::kPermissionDenied);
}

// --- working directory ---

TEST(BoostProcessRunner, RunsInTheWorkingDirectory) {
  TempDir dir;
  auto r =
      run(ProcessRequest{.argv = {"/bin/sh", "-c", "pwd -P"}, .working_dir = dir.path().string()});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->stdout_data, std::filesystem::canonical(dir.path()).string() + "\n");
}

TEST(BoostProcessRunner, MissingWorkingDirectoryIsAnErrorNotASilentFallback) {
  auto r = run(ProcessRequest{.argv = {"/bin/true"}, .working_dir = "/nonexistent/ekco-dir"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.error().message().find("/nonexistent/ekco-dir"), std::string::npos)
      << r.error().message();
}

// --- what the child gets ---

TEST(BoostProcessRunner, RunsTheChildInItsOwnProcessGroup) {
  // Field 5 of /proc/self/stat is the process group; cut runs in the shell's group.
  auto r = run({"/bin/sh", "-c", "echo $$; cut -d' ' -f5 /proc/self/stat"});
  ASSERT_TRUE(r) << r.error().message();
  auto newline = r->stdout_data.find('\n');
  ASSERT_NE(newline, std::string::npos);
  std::string shell_pid = r->stdout_data.substr(0, newline);
  EXPECT_EQ(r->stdout_data, shell_pid + "\n" + shell_pid + "\n");
  EXPECT_NE(std::stoi(shell_pid), static_cast<int>(::getpgrp()));
}

TEST(BoostProcessRunner, ChildStartsWithDefaultSignalsAndNoBlockedSignals) {
  // The calling thread blocks and ignores signals; the child must not inherit either.
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  sigaddset(&block, SIGTERM);
  sigset_t old_mask;
  ::pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_usr2 {};
  ::sigaction(SIGUSR2, &ignore, &old_usr2);

  auto r = run({"/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"});

  ::sigaction(SIGUSR2, &old_usr2, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->stdout_data, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

TEST(BoostProcessRunner, ChildDoesNotInheritTheAgentsOtherDescriptors) {
  int leaky = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaky, 3);
  auto r = run({"/usr/bin/test", "-e", "/proc/self/fd/" + std::to_string(leaky)});
  ::close(leaky);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 1) << "fd " << leaky << " leaked into the child";
}

// --- timeouts and leftovers ---

TEST(BoostProcessRunner, TimeoutKillsTheWholeProcessGroup) {
  // The background sleep keeps stdout open: the runner must not wait for it.
  Result<ProcessResult> r = Error("not run");
  auto elapsed = timed([&] {
    r = run(ProcessRequest{.argv = {"/bin/sh", "-c", "sleep 100 & echo $!; sleep 100"},
                           .timeout = 300ms});
  });
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_LT(elapsed, 2s);
  EXPECT_GE(elapsed, 300ms);
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->term_signal, SIGKILL);
  EXPECT_FALSE(r->success());
  ASSERT_FALSE(r->stdout_data.empty());
  pid_t grandchild = std::stoi(r->stdout_data);
  EXPECT_TRUE(goneWithin(grandchild, 1s)) << "grandchild " << grandchild << " survived";
}

TEST(BoostProcessRunner, TimeoutSendsSigtermFirstWhenAGraceIsSet) {
  Result<ProcessResult> r = Error("not run");
  auto elapsed = timed([&] {
    r = run(ProcessRequest{
        .argv = {"/bin/sh", "-c", "trap 'echo got TERM; exit 3' TERM; sleep 100 & wait"},
        .timeout = 500ms,  // time for the shell to install its trap, even on a loaded machine
        .kill_grace = 5s});
  });
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_LT(elapsed, 2s) << "waited out the grace although the child had exited";
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stdout_data, "got TERM\n");
}

TEST(BoostProcessRunner, SigkillFollowsTheGraceWhenSigtermIsIgnored) {
  Result<ProcessResult> r = Error("not run");
  auto elapsed = timed([&] {
    r = run(ProcessRequest{.argv = {"/bin/sh", "-c", "trap '' TERM; sleep 100"},
                           .timeout = 500ms,  // time for the shell to install its trap
                           .kill_grace = 200ms});
  });
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_GE(elapsed, 700ms);
  EXPECT_LT(elapsed, 2500ms);
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->term_signal, SIGKILL);
}

// A HostJob deleted while its command runs (agent/features/host_jobs/host_jobs.h).
TEST(BoostProcessRunner, CancellationStopsTheGroupSigtermFirstAndSaysSo) {
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(500ms);  // time for the shell to install its trap
    cancel = true;
  });
  Result<ProcessResult> r = Error("not run");
  auto elapsed = timed([&] {
    r = run(ProcessRequest{
        .argv = {"/bin/sh", "-c", "trap 'echo got TERM; exit 3' TERM; sleep 100 & wait"},
        .kill_grace = 5s,
        .cancelled = [&] { return cancel.load(); }});
  });
  canceller.join();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_LT(elapsed, 3s);
  EXPECT_TRUE(r->cancelled);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stdout_data, "got TERM\n");
  EXPECT_FALSE(r->success());

  // Never cancelled: runs to its end.
  auto done = run(ProcessRequest{.argv = {"/bin/true"}, .cancelled = [] { return false; }});
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->success());
  EXPECT_FALSE(done->cancelled);
}

TEST(BoostProcessRunner, HugeTimeoutMeansNone) {
  auto r = run(ProcessRequest{.argv = {"/bin/true"},
                              .timeout = std::chrono::milliseconds::max(),
                              .kill_grace = std::chrono::milliseconds::max()});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->success());
}

TEST(BoostProcessRunner, FinishingWithinTheTimeoutIsNotATimeout) {
  auto r = run(ProcessRequest{.argv = {"/bin/sleep", "0.1"}, .timeout = 5s});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(r->timed_out);
  EXPECT_TRUE(r->success());
  EXPECT_LT(r->duration, 5s);
}

TEST(BoostProcessRunner, KillsLeftoversThatKeepTheOutputOpenAfterTheChildExits) {
  Result<ProcessResult> r = Error("not run");
  auto elapsed = timed([&] { r = run({"/bin/sh", "-c", "sleep 100 & echo $!"}); });
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_LT(elapsed, 2s);
  EXPECT_TRUE(r->success()) << "the child's own status is what counts";
  pid_t leftover = std::stoi(r->stdout_data);
  EXPECT_TRUE(goneWithin(leftover, 1s)) << "leftover " << leftover << " survived";
}

TEST(BoostProcessRunner, StopsReadingWhenADaemonOutsideTheGroupHoldsTheOutput) {
  // setsid moves the sleep out of the process group, beyond the runner's reach.
  Result<ProcessResult> r = Error("not run");
  auto elapsed = timed([&] { r = run({"/bin/sh", "-c", "setsid sleep 100 & echo $!"}); });
  ASSERT_TRUE(r) << r.error().message();
  pid_t daemon = std::stoi(r->stdout_data);
  ::kill(daemon, SIGKILL);
  EXPECT_LT(elapsed, 2s);
  EXPECT_TRUE(r->success());
}

// --- concurrency and hygiene ---

TEST(BoostProcessRunner, RunsEightCommandsAtOnceFromThreads) {
  constexpr int kThreads = 8;
  std::vector<std::string> failures(kThreads);
  auto elapsed = timed([&] {
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([i, &failures] {
        std::string id = std::to_string(i);
        auto slow = run({"/bin/sh", "-c", "sleep 0.5; echo out$1; echo err$1 >&2", "sh", id});
        if (!slow || slow->stdout_data != "out" + id + "\n" ||
            slow->stderr_data != "err" + id + "\n") {
          failures[i] = "slow command " + id;
          return;
        }
        std::string input(1'000'000, static_cast<char>('a' + i));
        auto cat = run(ProcessRequest{.argv = {"/bin/cat"}, .stdin_data = input});
        if (!cat || cat->stdout_data != input) failures[i] = "cat " + id;
      });
    }
    for (auto& t : threads) t.join();
  });
  for (const auto& f : failures) EXPECT_EQ(f, "");
  EXPECT_LT(elapsed, 3s) << "8 x 0.5 s ran one after another";
}

TEST(BoostProcessRunner, ALongRunningCommandDoesNotHoldUpOthers) {
  // The long command is cat blocked opening a FIFO until the test opens its other end.
  TempDir dir;
  std::string fifo = (dir.path() / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::atomic<bool> long_done = false;
  std::thread long_running([&long_done, &fifo] {
    (void)run({"/bin/cat", fifo});
    long_done = true;
  });
  std::this_thread::sleep_for(50ms);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(run({"/bin/true"}));
  EXPECT_FALSE(long_done);
  ::close(::open(fifo.c_str(), O_WRONLY));  // lets cat finish
  long_running.join();
  EXPECT_TRUE(long_done);
}

TEST(BoostProcessRunner, LeavesNoZombieBehind) {
  EXPECT_TRUE(run({"/bin/true"}));
  EXPECT_TRUE(run({"/bin/sh", "-c", "kill -KILL $$"}));
  EXPECT_FALSE(run({"/nonexistent/ekco-no-such-program"}));  // execve fails after fork
  EXPECT_FALSE(run(ProcessRequest{.argv = {"/bin/true"}, .working_dir = "/nonexistent"}));
  EXPECT_TRUE(run(ProcessRequest{.argv = {"/bin/sleep", "100"}, .timeout = 50ms}));
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD) << "the test process still has a child";
}

// --- helpers ---

TEST(FormatArgv, QuotesOnlyWhatNeedsQuoting) {
  EXPECT_EQ(formatArgv({"kubeadm", "init", "--config=/etc/k.yaml"}),
            "kubeadm init --config=/etc/k.yaml");
  EXPECT_EQ(formatArgv({"sh", "-c", "echo $HOME", "", "it's"}), "sh -c 'echo $HOME' '' 'it'\\''s'");
}

TEST(FailureError, NamesTheCommandHowItEndedAndTheEndOfStderr) {
  ProcessRequest request{.argv = {"kubeadm", "init"}, .timeout = 30s};
  auto exited = failureError(
      request, ProcessResult{
                   .exit_code = 1, .stdout_data = "ignored", .stderr_data = "error: bad config\n"});
  EXPECT_EQ(exited.message(), "kubeadm init: exited with status 1: error: bad config");
  EXPECT_EQ(exited.code(), ErrorCode::kUnknown);

  auto killed = failureError(request, ProcessResult{.exit_code = -1, .term_signal = SIGKILL});
  EXPECT_EQ(killed.message(), "kubeadm init: killed by signal 9 (SIGKILL)");

  auto timed_out =
      failureError(request, ProcessResult{.exit_code = -1, .term_signal = 9, .timed_out = true});
  EXPECT_EQ(timed_out.message(), "kubeadm init: timed out after 30000ms");
  EXPECT_EQ(timed_out.code(), ErrorCode::kTimeout);

  auto long_err = failureError(
      request, ProcessResult{.exit_code = 2, .stderr_data = std::string(5000, 'x') + "END"});
  EXPECT_LT(long_err.message().size(), 1100u);
  EXPECT_TRUE(long_err.message().ends_with("END"));
}

// --- the fake ---

TEST(ScriptedProcessRunner, AnswersExactAndPrefixMatches) {
  ScriptedProcessRunner runner;
  runner.on({"crictl", "ps", "-q"}, ScriptedProcessRunner::exited(0, "abc\n"));
  runner.onPrefix({"systemctl", "restart"}, ScriptedProcessRunner::exited(0, "", "restarted"));

  auto ps = runner.run({.argv = {"crictl", "ps", "-q"}});
  ASSERT_TRUE(ps);
  EXPECT_EQ(ps->stdout_data, "abc\n");
  auto restart = runner.run({.argv = {"systemctl", "restart", "kubelet"}});
  ASSERT_TRUE(restart);
  EXPECT_EQ(restart->stderr_data, "restarted");
  EXPECT_TRUE(runner.unscripted().empty());
}

TEST(ScriptedProcessRunner, ExactMatchBeatsPrefixAndLongestPrefixWins) {
  ScriptedProcessRunner runner;
  runner.onPrefix({"kubeadm"}, ScriptedProcessRunner::exited(1));
  runner.onPrefix({"kubeadm", "certs"}, ScriptedProcessRunner::exited(2));
  runner.on({"kubeadm", "certs", "renew", "all"}, ScriptedProcessRunner::exited(3));

  EXPECT_EQ(runner.run({.argv = {"kubeadm", "version"}})->exit_code, 1);
  EXPECT_EQ(runner.run({.argv = {"kubeadm", "certs", "check-expiration"}})->exit_code, 2);
  EXPECT_EQ(runner.run({.argv = {"kubeadm", "certs", "renew", "all"}})->exit_code, 3);
}

TEST(ScriptedProcessRunner, GivesQueuedAnswersInOrderThenRepeatsTheLast) {
  ScriptedProcessRunner runner;
  runner.on({"etcdctl", "member", "list"}, Error("connection refused", ErrorCode::kUnavailable));
  runner.on({"etcdctl", "member", "list"}, ScriptedProcessRunner::exited(0, "m1\n"));

  auto first = runner.run({.argv = {"etcdctl", "member", "list"}});
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().code(), ErrorCode::kUnavailable);
  for (int i = 0; i < 3; ++i) {
    auto next = runner.run({.argv = {"etcdctl", "member", "list"}});
    ASSERT_TRUE(next);
    EXPECT_EQ(next->stdout_data, "m1\n");
  }
}

TEST(ScriptedProcessRunner, RecordsEveryRequestWithEnvAndStdin) {
  ScriptedProcessRunner runner;
  runner.onPrefix({"kubectl"}, ScriptedProcessRunner::exited(0));
  (void)runner.run({.argv = {"kubectl", "apply", "-f", "-"},
                    .inherit_env = false,
                    .env = {{"KUBECONFIG", "/etc/kubernetes/admin.conf"}},
                    .stdin_data = "kind: Pod\n",
                    .timeout = 10s});
  (void)runner.run({.argv = {"kubectl", "get", "nodes"}});

  auto requests = runner.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].argv, (Argv{"kubectl", "apply", "-f", "-"}));
  EXPECT_FALSE(requests[0].inherit_env);
  EXPECT_EQ(requests[0].env, (Environment{{"KUBECONFIG", "/etc/kubernetes/admin.conf"}}));
  EXPECT_EQ(requests[0].stdin_data, "kind: Pod\n");
  EXPECT_EQ(requests[0].timeout, 10s);
  EXPECT_EQ(runner.argvs(),
            (std::vector<Argv>{{"kubectl", "apply", "-f", "-"}, {"kubectl", "get", "nodes"}}));
}

TEST(ScriptedProcessRunner, ResponderComputesTheAnswerFromTheRequest) {
  ScriptedProcessRunner runner;
  runner.on({"cat"}, [](const ProcessRequest& request) -> Result<ProcessResult> {
    return ScriptedProcessRunner::exited(0, request.stdin_data);
  });
  auto r = runner.run({.argv = {"cat"}, .stdin_data = "echoed"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->stdout_data, "echoed");
}

TEST(ScriptedProcessRunner, UnscriptedCallFailsTheTestAndReturnsAnErrorNamingTheArgv) {
  ScriptedProcessRunner runner;
  runner.on({"crictl", "ps"}, ScriptedProcessRunner::exited(0));
  Result<ProcessResult> r = ProcessResult{};
  EXPECT_NONFATAL_FAILURE(r = runner.run({.argv = {"crictl", "rm", "a b"}}),
                          "unscripted command: crictl rm 'a b'");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("crictl rm 'a b'"), std::string::npos);
  EXPECT_EQ(runner.unscripted(), (std::vector<Argv>{{"crictl", "rm", "a b"}}));
  EXPECT_EQ(runner.requests().size(), 1u);
}

TEST(ScriptedProcessRunner, IsSafeToCallFromSeveralThreads) {
  ScriptedProcessRunner runner;
  runner.onPrefix({"echo"}, ScriptedProcessRunner::exited(0));
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&runner, i] {
      for (int j = 0; j < 100; ++j) {
        (void)runner.run({.argv = {"echo", std::to_string(i), std::to_string(j)}});
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(runner.requests().size(), 800u);
}

}  // namespace
}  // namespace ekco::base
