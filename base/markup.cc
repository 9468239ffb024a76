#include "base/markup.h"

namespace ekco::base {

std::string roffText(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out.insert(0, "\\&");
  return out;
}

std::string markdownText(std::string_view s) {
  std::string out;
  bool code = false;
  for (char c : s) {
    if (c == '`') code = !code;
    if (c == '|') {
      out += "\\|";
    } else if (!code && c == '<') {
      out += "&lt;";
    } else if (!code && c == '>') {
      out += "&gt;";
    } else if (!code && c == '&') {
      out += "&amp;";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace ekco::base
