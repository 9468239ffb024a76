#include "base/log/journal_stream.h"

namespace ekco::base {

std::string_view journalPrefixFor(std::string_view line) {
  if (line.starts_with("error:")) return "<3>";
  if (line.starts_with("warning:") || line.starts_with("degraded:")) return "<4>";
  return "<6>";
}

JournalPrefixBuf::~JournalPrefixBuf() {
  if (!line_.empty()) emitLine(false);
  target_->pubsync();
}

void JournalPrefixBuf::emitLine(bool with_newline) {
  std::string out(journalPrefixFor(line_));
  out += line_;
  if (with_newline) out += '\n';
  line_.clear();
  // One write per line (stderr is unbuffered), so lines of several writers never interleave.
  target_->sputn(out.data(), static_cast<std::streamsize>(out.size()));
}

JournalPrefixBuf::int_type JournalPrefixBuf::overflow(int_type ch) {
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  const char c = traits_type::to_char_type(ch);
  if (c == '\n') {
    emitLine(true);
  } else {
    line_ += c;
  }
  return ch;
}

std::streamsize JournalPrefixBuf::xsputn(const char* s, std::streamsize n) {
  std::string_view rest(s, static_cast<std::size_t>(n));
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) {
      line_ += rest;
      break;
    }
    line_ += rest.substr(0, nl);
    emitLine(true);
    rest.remove_prefix(nl + 1);
  }
  return n;
}

int JournalPrefixBuf::sync() {
  // Only whole lines go out: a prefix in the middle of a line would be printed literally.
  return target_->pubsync();
}

}  // namespace ekco::base
