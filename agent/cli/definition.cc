#include "agent/cli/definition.h"

#include <algorithm>
#include <string_view>

#include <CLI/CLI.hpp>

#include "agent/edge/command_config.h"
#include "base/strings.h"

namespace ekco::agent {
namespace {

// "--host-root" -> "HOST_ROOT": the placeholder of an option's value.
std::string metavarOf(std::string_view name) {
  while (!name.empty() && name.front() == '-') name.remove_prefix(1);
  std::string out = base::asciiUpper(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

// An IsMember check's values, from the type name CLI11 shows: "TEXT:{markdown,man}".
std::vector<std::string> memberValues(const std::string& type_name) {
  const auto open = type_name.find('{');
  const auto close = type_name.find('}', open);
  if (open == std::string::npos || close == std::string::npos) return {};
  std::vector<std::string> out;
  std::string_view list(type_name.data() + open + 1, close - open - 1);
  while (!list.empty()) {
    const auto comma = list.find(',');
    out.emplace_back(list.substr(0, comma));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

OptionDef defineOption(const CLI::Option& opt) {
  OptionDef def;
  def.positional = !opt.nonpositional();
  if (def.positional) {
    def.names = {opt.get_name()};
    def.metavar = opt.get_name();
  } else {
    for (const std::string& n : opt.get_lnames()) def.names.push_back("--" + n);
    for (const std::string& n : opt.get_snames()) def.names.push_back("-" + n);
    def.metavar = metavarOf(def.names.front());
  }
  def.flag = opt.get_expected_max() == 0;
  def.repeated = def.positional && opt.get_items_expected_max() > 1;
  def.required = opt.get_required();
  def.help = opt.get_description();
  def.group = opt.get_group();
  def.values = memberValues(opt.get_type_name());
  return def;
}

CommandDef defineCommand(CLI::App& app, const std::string& path,
                         const std::vector<ArgumentValues>& values) {
  CommandDef def{.path = path,
                 .help = app.get_description(),
                 .exit_status = exitStatusOf(app),
                 .options = {},
                 .config_flags = {},
                 .subcommands = {}};
  std::vector<OptionDef> positionals;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt == app.get_help_ptr() || opt == app.get_help_all_ptr()) continue;
    if (opt->get_group().empty()) continue;  // hidden
    if (opt->get_group() == kConfigFlagGroup || opt->get_group() == kIgnoredFlagGroup) {
      def.config_flags.push_back(defineOption(*opt));
      continue;
    }
    OptionDef o = defineOption(*opt);
    for (const ArgumentValues& v : values) {
      if (v.command == path && v.option == o.names.front()) o.values = v.values;
    }
    (o.positional ? positionals : def.options).push_back(std::move(o));
  }
  for (OptionDef& p : positionals) def.options.push_back(std::move(p));
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_group().empty() || sub->get_disabled()) continue;  // hidden
    def.subcommands.push_back(
        defineCommand(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), values));
  }
  return def;
}

void collectLeaves(const CommandDef& c, std::vector<const CommandDef*>& out) {
  if (c.subcommands.empty() && !c.path.empty()) out.push_back(&c);
  for (const CommandDef& sub : c.subcommands) collectLeaves(sub, out);
}

}  // namespace

CommandDef defineCommandLine(CLI::App& root, const std::vector<ArgumentValues>& values) {
  return defineCommand(root, "", values);
}

std::vector<const CommandDef*> leafCommands(const CommandDef& root) {
  std::vector<const CommandDef*> out;
  collectLeaves(root, out);
  return out;
}

}  // namespace ekco::agent
