#include "agent/edge/command.h"

#include <CLI/CLI.hpp>

namespace ekco::agent {
namespace {
constexpr std::string_view kExitStatusLead = "Exit status: ";
}  // namespace

void setExitStatus(CLI::App* app, std::string_view text) {
  app->footer(std::string(kExitStatusLead) + std::string(text));
}

std::string exitStatusOf(const CLI::App& app) {
  const std::string footer = app.get_footer();
  if (footer.rfind(kExitStatusLead, 0) != 0) return "";
  return footer.substr(kExitStatusLead.size());
}

}  // namespace ekco::agent
