// The ekco binary's own stderr lines under systemd: with stderr the journal stream
// ($JOURNAL_STREAM = stderr's dev:inode, as systemd sets it), `error:` lines carry <3> so
// `journalctl -p err -u ekco-upgrade.service` shows why a command failed; elsewhere no prefix.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/agent/process_support.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class JournalPrefixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ekco-journal-prefix-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ / "bad.yaml") << "purge_dead_nodes: sometimes\nno_such_key: 1\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `ekco config check bad.yaml` with stderr to `log`; journal_stream_of_log: whether
  // JOURNAL_STREAM names the log file's dev:inode (as systemd's does stderr's).
  std::string runConfigCheck(bool journal_stream_of_log) {
    const std::string log = (dir_ / "stderr.log").string();
    std::ofstream(log).close();
    struct stat st {};
    EXPECT_EQ(::stat(log.c_str(), &st), 0);
    const std::string stream = "JOURNAL_STREAM=" + std::to_string(st.st_dev) + ":" +
                               std::to_string(journal_stream_of_log ? st.st_ino : st.st_ino + 1);
    const pid_t pid = testing::spawnLogged(
        {EKCO_BIN, "config", "check", (dir_ / "bad.yaml").string()}, log, {stream});
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
    return testing::readWholeFile(log);
  }

  fs::path dir_;
};

TEST_F(JournalPrefixTest, ErrorLinesCarryTheErrPriorityWhenStderrIsTheJournal) {
  const std::string out = runConfigCheck(true);
  EXPECT_THAT(out, HasSubstr("<3>error: "));
  EXPECT_THAT(out, HasSubstr("purge_dead_nodes"));
  // Every line starts with a priority, none with a bare "error:".
  EXPECT_THAT("\n" + out, Not(HasSubstr("\nerror:")));
}

TEST_F(JournalPrefixTest, NoPrefixWhenJournalStreamIsNotStderr) {
  // A JOURNAL_STREAM inherited by a child whose stderr was redirected (the sd-daemon rule).
  const std::string out = runConfigCheck(false);
  EXPECT_THAT(out, HasSubstr("error: "));
  EXPECT_THAT(out, Not(HasSubstr("<3>")));
}

}  // namespace
}  // namespace ekco::agent
