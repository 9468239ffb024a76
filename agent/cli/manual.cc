#include "agent/cli/manual.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/edge/command_config.h"
#include "base/markup.h"
#include "base/version_info.h"

namespace ekco::agent {
namespace {

using base::markdownText;
using base::roffText;

// What is not in the command line's definition: exit codes, environment, files. Each entry is
// a term and its text, shared by both formats.
struct Entry {
  std::string_view term;
  std::string_view text;
};

constexpr std::string_view kDescription =
    "ekco keeps the nodes of a kubeadm cluster healthy. On every node, `ekco agent` runs as the "
    "systemd service ekco-agent.service (the packages) or as a DaemonSet pod; one agent, elected "
    "through a Lease, runs the cluster-wide controllers. The other commands act on the node they "
    "run on, or on the cluster through its API. Configuration comes from /etc/ekco/config.yaml, "
    "EKCO_* environment variables and flags, later winning: see ekco-config(5).";

constexpr Entry kExitCodes[] = {
    {"0", "The command did what it was asked."},
    {"1",
     "It ran and failed, or found a problem it reports (a certificate due, a step "
     "refused); `ekco status`: the agent is degraded."},
    {"2",
     "Bad flags or a bad configuration: nothing was done; `ekco status`: the agent did not "
     "answer."},
};

constexpr Entry kEnvironment[] = {
    {"EKCO_KEY",
     "Any configuration key, upper-case (EKCO_MIN_READY_MASTER_NODES=3): see "
     "ekco-config(5)."},
    {"LOG_LEVEL", "EKCO's spelling of log_level, under EKCO_LOG_LEVEL."},
    {"KUBECONFIG", "The kubeconfig, when --kubeconfig is not given."},
    {"KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT",
     "In a pod: the API through the service account's token."},
    {"NODE_NAME", "This node's name, when --node-name is not given (else the host name)."},
    {"JOURNAL_STREAM", "Set by systemd: log lines carry journald priority prefixes."},
};

constexpr Entry kFiles[] = {
    {"/etc/ekco/config.yaml", "The configuration (ekco-config(5))."},
    {"/run/ekco/ekco.sock", "The agent's health socket, read by `ekco status`."},
    {"/etc/kubernetes/admin.conf, /etc/kubernetes/kubelet.conf",
     "The host's kubeconfigs, tried in that order when no other is given."},
    {"/etc/kubernetes/pki", "kubeadm's certificates, which `ekco certs` checks and renews."},
    {"/etc/kubernetes/manifests/haproxy.yaml, /etc/haproxy/haproxy.cfg",
     "The internal load balancer's static pod and configuration."},
    {"/etc/systemd/system/ekco-reboot.service, /opt/ekco/shutdown.sh, /opt/ekco/startup.sh",
     "The reboot unit and its scripts (`ekco render units` shows every unit file)."},
    {"/var/lib/ekco", "The state of `ekco upgrade`."},
    {"/usr/bin/ekco-purge-node", "EKCO's name for `ekco purge-node`."},
};

std::string sentence(std::string s) {
  if (!s.empty() && s.back() != '.' && s.back() != '?' && s.back() != '!') s += '.';
  return s;
}

std::string synopsisOf(const CommandDef& c) {
  std::string out = "ekco " + c.path;
  if (!c.options.empty() && !c.options.front().positional) out += " [OPTIONS]";
  for (const OptionDef& o : c.options) {
    if (!o.positional) continue;
    const std::string arg = o.metavar + (o.repeated ? "..." : "");
    out += o.required ? " " + arg : " [" + arg + "]";
  }
  return out;
}

std::string valuesNote(const OptionDef& o) {
  if (o.values.empty()) return "";
  return fmt::format(" Values: {}.", fmt::join(o.values, ", "));
}

// What a command's configuration flags are, one sentence per group, without listing them.
std::vector<std::string> configFlagNotes(const CommandDef& c, bool man) {
  const auto count = [&c](const char* group) {
    return std::count_if(c.config_flags.begin(), c.config_flags.end(),
                         [group](const OptionDef& o) { return o.group == group; });
  };
  std::vector<std::string> out;
  if (const auto n = count(kConfigFlagGroup); n > 0) {
    out.push_back(fmt::format(
        "Every configuration key as a flag, {} of them (--node-unreachable-toleration=5m, "
        "--purge-dead-nodes): they override the file and the environment. See {}.",
        n, man ? "ekco-config(5)" : "[configuration](configuration.md)"));
  }
  if (const auto n = count(kIgnoredFlagGroup); n > 0) {
    out.push_back(
        fmt::format("{} EKCO settings ekco ignores, accepted as flags with a warning.", n));
  }
  return out;
}

// --- roff --------------------------------------------------------------------------------

// The root's help is "ekco: what it is"; the NAME line wants what it is.
std::string whatItIs(const std::string& help) {
  const auto colon = help.find(": ");
  return colon == std::string::npos ? help : help.substr(colon + 2);
}

// Text for the man page: the Markdown code quotes dropped, then escaped.
std::string manText(std::string_view s) {
  std::string plain;
  for (char c : s) {
    if (c != '`') plain += c;
  }
  return roffText(plain);
}

std::string manOptionTerm(const OptionDef& o) {
  if (o.positional) return fmt::format("\\fI{}\\fR{}", manText(o.metavar), o.repeated ? "..." : "");
  std::vector<std::string> names;
  for (const std::string& n : o.names) names.push_back("\\fB" + manText(n) + "\\fR");
  std::string out = fmt::format("{}", fmt::join(names, ", "));
  if (!o.flag) out += " \\fI" + manText(o.metavar) + "\\fR";
  return out;
}

void manEntries(std::string& out, const char* section, const auto& entries) {
  out += fmt::format(".SH {}\n", section);
  for (const Entry& e : entries) {
    out += fmt::format(".TP\n.B {}\n{}\n", manText(e.term), manText(e.text));
  }
}

std::string man(const CommandDef& root) {
  std::string out = fmt::format(
      ".TH EKCO 8 \"\" \"ekco {}\" \"System Administration\"\n.nh\n.ad l\n"
      ".SH NAME\nekco \\- {}\n"
      ".SH SYNOPSIS\n.B ekco\n[\\fB\\-\\-log\\-level\\fR \\fILEVEL\\fR] \\fICOMMAND\\fR "
      "[\\fIOPTIONS\\fR]\n"
      ".SH DESCRIPTION\n{}\n",
      EKCO_VERSION, manText(whatItIs(root.help)), manText(kDescription));
  out += ".SH GLOBAL OPTIONS\nThey may follow the command.\n";
  for (const OptionDef& o : root.options) {
    out += fmt::format(".TP\n{}\n{}{}\n", manOptionTerm(o), manText(sentence(o.help)),
                       manText(valuesNote(o)));
  }
  out += ".TP\n\\fB\\-\\-help\\fR\nAny command's options (ekco \\fICOMMAND\\fR \\-\\-help).\n";
  out += ".SH COMMANDS\n";
  for (const CommandDef* c : leafCommands(root)) {
    out += fmt::format(".SS \"{}\"\n{}\n", manText(synopsisOf(*c)), manText(sentence(c->help)));
    for (const OptionDef& o : c->options) {
      out += fmt::format(".TP\n{}\n{}{}{}\n", manOptionTerm(o), manText(sentence(o.help)),
                         o.required && !o.positional ? " Required." : "", manText(valuesNote(o)));
    }
    for (const std::string& note : configFlagNotes(*c, true)) {
      out += fmt::format(".PP\n{}\n", manText(note));
    }
    if (!c->exit_status.empty()) {
      out += fmt::format(".PP\nExit status: {}.\n", manText(c->exit_status));
    }
  }
  manEntries(out, "EXIT STATUS", kExitCodes);
  manEntries(out, "ENVIRONMENT", kEnvironment);
  manEntries(out, "FILES", kFiles);
  out += ".SH SEE ALSO\n.BR ekco\\-config (5),\n.BR systemctl (1),\n.BR journalctl (1)\n";
  return out;
}

// --- Markdown ------------------------------------------------------------------------------

std::string mdOptionTerm(const OptionDef& o) {
  if (o.positional) return fmt::format("`{}{}`", o.metavar, o.repeated ? "..." : "");
  std::string out = fmt::format("`{}`", fmt::join(o.names, "`, `"));
  if (!o.flag) out += " " + o.metavar;
  return out;
}

std::string mdEntries(std::string_view heading, const auto& entries) {
  std::string out = fmt::format("\n## {}\n\n| | |\n|---|---|\n", heading);
  for (const Entry& e : entries)
    out += fmt::format("| `{}` | {} |\n", e.term, markdownText(e.text));
  return out;
}

// A command's anchor, its heading's: "ekco certs renew" -> "ekco-certs-renew", as GitHub makes
// it (scripts/check-links resolves it the same way).
std::string mdAnchor(const CommandDef& c) {
  std::string out = "ekco-" + c.path;
  for (char& ch : out) ch = ch == ' ' ? '-' : ch;
  return out;
}

std::string markdown(const CommandDef& root) {
  std::string out =
      "<!-- Generated by `ekco manual --format markdown` from the command line's own definition "
      "(scripts/gen-docs); edit the commands, not this page. -->\n# Commands\n\n" +
      std::string(kDescription) +
      " The same text is the man page ekco(8).\n\n"
      "`ekco [--log-level LEVEL] COMMAND [OPTIONS]`; `ekco COMMAND --help` prints a command's "
      "options.\n\n| command | what it does |\n|---|---|\n";
  const std::vector<const CommandDef*> leaves = leafCommands(root);
  for (const CommandDef* c : leaves) {
    out += fmt::format("| [`ekco {}`](#{}) | {} |\n", c->path, mdAnchor(*c), markdownText(c->help));
  }
  out += "\n## Global options\n\nThey may follow the command.\n\n";
  for (const OptionDef& o : root.options) {
    out +=
        fmt::format("- {}: {}{}\n", mdOptionTerm(o), markdownText(sentence(o.help)), valuesNote(o));
  }
  for (const CommandDef* c : leaves) {
    out += fmt::format("\n## `ekco {}`\n\n`{}`\n\n{}\n", c->path, synopsisOf(*c),
                       markdownText(sentence(c->help)));
    if (!c->options.empty()) out += "\n| option | |\n|---|---|\n";
    for (const OptionDef& o : c->options) {
      out += fmt::format(
          "| {} | {}{}{} |\n", markdownText(mdOptionTerm(o)), markdownText(sentence(o.help)),
          o.required && !o.positional ? " Required." : "", markdownText(valuesNote(o)));
    }
    for (const std::string& note : configFlagNotes(*c, false)) out += "\n" + note + "\n";
    if (!c->exit_status.empty()) {
      out += fmt::format("\nExit status: {}.\n", markdownText(c->exit_status));
    }
  }
  out += mdEntries("Exit status", kExitCodes);
  out += mdEntries("Environment", kEnvironment);
  out += mdEntries("Files", kFiles);
  return out;
}

}  // namespace

std::string renderManual(const CommandDef& root, ManualFormat format) {
  return format == ManualFormat::kMan ? man(root) : markdown(root);
}

}  // namespace ekco::agent
