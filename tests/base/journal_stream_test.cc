#include "base/log/journal_stream.h"

#include <ostream>
#include <sstream>

#include <gtest/gtest.h>

namespace ekco::base {
namespace {

TEST(JournalPrefix, ErrorLinesAreErrWarningsWarningAndTheRestInfo) {
  EXPECT_EQ(journalPrefixFor("error: upgrade: HEAD https://k.example/x: HTTP 503"), "<3>");
  EXPECT_EQ(journalPrefixFor("warning: the API is down; drain skipped"), "<4>");
  EXPECT_EQ(journalPrefixFor("degraded: the node cache has not synced"), "<4>");
  EXPECT_EQ(journalPrefixFor("node-1 cordoned"), "<6>");
  EXPECT_EQ(journalPrefixFor("<3> looks like a priority but is text"), "<6>");
  EXPECT_EQ(journalPrefixFor(""), "<6>");
}

TEST(JournalPrefixBuf, PrefixesEveryWholeLineOnceHoweverItWasWritten) {
  std::ostringstream target;
  {
    JournalPrefixBuf buf(target.rdbuf());
    std::ostream err(&buf);
    err << "error: "
        << "purge node-c"
        << ": " << 42 << "\n";
    err << 'w' << "arning: two\nplain line\n";
    err.flush();  // a flush in mid-line must not split the line
    err << "error: unfinished";
    EXPECT_EQ(target.str(), "<3>error: purge node-c: 42\n<4>warning: two\n<6>plain line\n");
  }
  // The destructor forwards the unfinished last line.
  EXPECT_EQ(target.str(),
            "<3>error: purge node-c: 42\n<4>warning: two\n<6>plain line\n<3>error: unfinished");
}

TEST(JournalPrefixBuf, EmptyLinesGetAPrefixToo) {
  std::ostringstream target;
  {
    JournalPrefixBuf buf(target.rdbuf());
    std::ostream err(&buf);
    err << "\n\nerror: x\n";
  }
  EXPECT_EQ(target.str(), "<6>\n<6>\n<3>error: x\n");
}

}  // namespace
}  // namespace ekco::base
