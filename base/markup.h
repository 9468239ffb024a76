// Text for the two formats the manual is generated in (ekco-config(5) and ekco(8) in roff;
// docs/configuration.md and docs/commands.md in Markdown), escaped so that what a table or a
// help text says is what the reader sees.
#pragma once

#include <string>
#include <string_view>

namespace ekco::base {

// roff body text: a backslash is \e, a hyphen \-, and a line does not start with a control
// character ('.' or ').
std::string roffText(std::string_view s);

// Markdown text, also fit for a table cell: a | is escaped everywhere, and outside `code`
// spans <, > and & are entities (a help text's "<time>" is not an HTML tag).
std::string markdownText(std::string_view s);

}  // namespace ekco::base
