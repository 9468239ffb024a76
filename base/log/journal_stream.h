// Syslog priority prefixes for a command's own stderr lines when stderr is the journal.
//
// journald reads a service's stderr line by line and takes a leading `<N>` as the line's
// priority (sd-daemon(3)); a line without one is logged at the stream's default, info. The
// one-shot commands (`ekco upgrade`, `shutdown`, `startup`, `purge-node`) print their failures as
// `error: ...`, so under ekco-upgrade.service `journalctl -p err` would not show why an upgrade
// failed. JournalPrefixBuf gives each line the same prefix the agent's log uses: `error:` lines
// <3>, `warning:` and `degraded:` lines <4>, every other line <6> (explicit, so a line that
// happens to start with `<digit>` is not misread as a priority).
#pragma once

#include <streambuf>
#include <string>
#include <string_view>

namespace ekco::base {

// The prefix for one line of a command's stderr: "<3>", "<4>" or "<6>".
std::string_view journalPrefixFor(std::string_view line);

// A streambuf that forwards whole lines to `target`, each with journalPrefixFor(line) in front.
// An unfinished last line is forwarded (prefixed) by the destructor.
class JournalPrefixBuf final : public std::streambuf {
 public:
  explicit JournalPrefixBuf(std::streambuf* target) : target_(target) {}
  ~JournalPrefixBuf() override;
  JournalPrefixBuf(const JournalPrefixBuf&) = delete;
  JournalPrefixBuf& operator=(const JournalPrefixBuf&) = delete;

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  void emitLine(bool with_newline);

  std::streambuf* target_;
  std::string line_;  // the current line, without its newline
};

}  // namespace ekco::base
