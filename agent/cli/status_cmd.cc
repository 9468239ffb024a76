#include "agent/cli/status_cmd.h"

#include <filesystem>
#include <functional>
#include <ostream>
#include <vector>

#include <fmt/format.h>

#include "agent/cli/cli.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"

namespace ekco::agent {

using nlohmann::json;

namespace {

constexpr std::string_view kNone = "-";
// Where each problem the table can show is explained, with what to do (issue 38).
constexpr std::string_view kProblemsPointer =
    "see docs/operations.md#troubleshooting: what each problem means and what to do";
// Shares its value with kExitUsage: a probe cannot tell the two apart, and need not.
constexpr int kExitUnreachable = 2;

// One table cell: control characters (an error's newlines) become spaces so a row stays a line.
std::string cell(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return text.empty() ? std::string(kNone) : text;
}

// obj[key] as text: strings as they are (empty is "-"), booleans yes/no, numbers; anything else
// (missing, null, object, array, obj not an object) is "-".
std::string field(const json& obj, std::string_view key) {
  if (!obj.is_object()) return std::string(kNone);
  auto it = obj.find(key);
  if (it == obj.end()) return std::string(kNone);
  const json& v = *it;
  if (v.is_string()) return cell(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer() || v.is_number_unsigned()) return kube::jsonDump(v);
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  return std::string(kNone);
}

// obj[key] as a time relative to now; a string that is not RFC 3339 is shown as it is.
std::string timeField(const json& obj, std::string_view key, base::WallTime now) {
  const json& v = kube::jsonField(obj, key);
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) return field(obj, key);
  auto t = kube::parseRfc3339(v.get_ref<const std::string&>());
  return t ? formatRelativeTime(*t, now) : cell(v.get<std::string>());
}

// Rows under a header, columns padded to their widest cell (the last column is not padded).
std::string renderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths(header.size(), 0);
  auto measure = [&widths](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  std::string out;
  auto line = [&](const std::vector<std::string>& row) {
    std::string text;
    for (std::size_t i = 0; i < row.size(); ++i) {
      text += row[i];
      if (i + 1 < row.size()) text += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out += text + "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

// A section of the document that should be an array of objects: the table, "none" when empty,
// "-" when missing or not an array.
std::string renderSection(const json& status, std::string_view key, std::string_view title,
                          const std::vector<std::string>& header,
                          const std::function<std::vector<std::string>(const json&)>& row) {
  const json& items = kube::jsonField(status, key);
  if (!items.is_array()) return fmt::format("{}: -\n", title);
  if (items.empty()) return fmt::format("{}: none\n", title);
  std::vector<std::vector<std::string>> rows;
  for (const json& item : items) rows.push_back(row(item));
  return renderTable(header, rows);
}

std::string durationText(std::chrono::seconds d) {
  const long long s = d.count();
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) {
    return s % 60 == 0 ? fmt::format("{}m", s / 60) : fmt::format("{}m{}s", s / 60, s % 60);
  }
  if (s < 86400) {
    const long long m = s / 60 % 60;
    return m == 0 ? fmt::format("{}h", s / 3600) : fmt::format("{}h{}m", s / 3600, m);
  }
  const long long h = s / 3600 % 24;
  return h == 0 ? fmt::format("{}d", s / 86400) : fmt::format("{}d{}h", s / 86400, h);
}

}  // namespace

std::string formatRelativeTime(base::WallTime time, base::WallTime now) {
  const auto diff = std::chrono::duration_cast<std::chrono::seconds>(time - now);
  if (diff.count() == 0) return "now";
  if (diff.count() < 0) return durationText(-diff) + " ago";
  return "in " + durationText(diff);
}

std::string shutdownInhibitorLine(const json& inhibitor) {
  std::string line;
  if (kube::jsonField(inhibitor, "held") == true) {
    line = "held";
  } else if (field(inhibitor, "state") == "released") {
    line = "released after the drain (" + field(inhibitor, "last_drain") + ")";
  } else {
    line = "not held";
    if (const std::string error = field(inhibitor, "last_error"); !error.empty() && error != "-") {
      line += " (" + cell(error) + ")";
    }
    line += "; ekco-reboot.service's stop job drains";
  }
  if (kube::jsonField(inhibitor, "inhibit_delay_max").is_string()) {
    line += ", logind InhibitDelayMaxSec " + field(inhibitor, "inhibit_delay_max") +
            " for a drain of up to " + field(inhibitor, "drain_bound");
    if (kube::jsonField(inhibitor, "delay_too_short") == true) {
      line +=
          " (warning: too short: logind goes on before a long drain ends; raise it in "
          "/etc/systemd/logind.conf.d/)";
    }
  }
  return line;
}

std::string systemTrustLine(const json& trust) {
  const json& bundle = kube::jsonField(trust, "ca_bundle");
  std::string line = bundle.is_string() ? field(trust, "ca_bundle") : "none";
  std::string notes;
  if (kube::jsonField(trust, "source").is_string()) notes = field(trust, "source");
  if (const json& problem = kube::jsonField(trust, "problem");
      problem.is_string() && !problem.get_ref<const std::string&>().empty()) {
    notes += (notes.empty() ? "" : "; ") + std::string("warning: ") + field(trust, "problem");
  }
  if (!notes.empty()) line += " (" + notes + ")";
  return line;
}

std::string renderStatusTable(const json& status, const Readiness& readiness, base::WallTime now) {
  std::string out;
  const json& lease = kube::jsonField(status, "lease");
  std::string renewed = timeField(lease, "renew_time", now);
  if (const json& t = kube::jsonField(lease, "renew_time");
      t.is_string() && renewed != field(lease, "renew_time")) {
    renewed += " (" + field(lease, "renew_time") + ")";
  }
  std::vector<std::pair<std::string, std::string>> head = {
      {"node", field(status, "node")},
      {"version", field(status, "version")},
      {"ready", readiness.ready ? "yes" : "no (" + cell(readiness.reason) + ")"},
      {"api reachable", field(status, "api_reachable")},
      {"leader", field(status, "leader")},
      {"is leader",
       field(status, "is_leader") + (kube::jsonField(status, "leader_candidate") == false
                                         ? " (never: leader_election_candidate is false)"
                                         : "")},
      {"lease holder", field(lease, "holder")},
      {"lease renewed", renewed},
      {"lease transitions", field(lease, "transitions")},
  };
  // Maintenance mode (agent/maintenance/maintenance.h), from agents that report it.
  if (const json& m = kube::jsonField(status, "maintenance"); m.is_object()) {
    std::string line = kube::jsonField(m, "on") == true ? "on (" + field(m, "reason") + ")" : "off";
    if (kube::jsonField(m, "on") == true && kube::jsonField(m, "until").is_string()) {
      line += ", until " + timeField(m, "until", now);
    }
    if (kube::jsonField(m, "synced") == false) line = "not read yet";
    head.emplace_back("maintenance", line);
  }
  // The shutdown inhibitor (agent/features/reboot/shutdown_inhibitor.h), from agents that report
  // it.
  if (const json& i = kube::jsonField(status, "shutdown_inhibitor"); i.is_object()) {
    head.emplace_back("shutdown inhibitor", shutdownInhibitorLine(i));
  }
  // The CA bundle of transfers without a CA of their own (kube/transport/system_trust.h).
  if (const json& t = kube::jsonField(status, "system_trust"); t.is_object()) {
    head.emplace_back("system CA bundle", systemTrustLine(t));
  }
  std::size_t width = 0;
  for (const auto& [name, value] : head) width = std::max(width, name.size());
  for (const auto& [name, value] : head) {
    out += fmt::format("{}:{}{}\n", name, std::string(width - name.size() + 2, ' '), value);
  }

  out += "\n";
  out += renderSection(
      status, "caches", "caches", {"CACHE", "SYNCED", "OBJECTS", "LAST ERROR"}, [](const json& c) {
        return std::vector<std::string>{field(c, "name"), field(c, "synced"), field(c, "objects"),
                                        field(c, "last_error")};
      });
  out += "\n";
  out += renderSection(
      status, "controllers", "controllers",
      {"CONTROLLER", "SCOPE", "LAST RUN", "LAST RESULT", "NEXT RUN", "RUNS", "ERRORS",
       "LAST ERROR"},
      [now](const json& c) {
        return std::vector<std::string>{
            field(c, "name"),
            field(c, "scope"),
            timeField(c, "last_run", now),
            kube::jsonField(c, "paused").is_string() ? "paused: " + field(c, "paused")
            : kube::jsonField(c, "closing").is_string()
                ? "closing in maintenance: " + field(c, "closing") + "; " + field(c, "last_result")
                : field(c, "last_result"),
            timeField(c, "next_run", now),
            field(c, "runs"),
            field(c, "errors"),
            field(c, "last_error")};
      });
  out += "\n";
  out += renderSection(
      status, "host_checks", "host checks", {"HOST CHECK", "OK", "MESSAGE"}, [](const json& h) {
        return std::vector<std::string>{field(h, "name"), field(h, "ok"), field(h, "message")};
      });
  // The control-plane-certificates controller's view (on a control-plane node only).
  if (const json& certs = kube::jsonField(status, "certificates");
      certs.is_object() && kube::jsonField(certs, "control_plane") == true) {
    out += "\n";
    out += renderSection(
        certs, "certificates", "certificates",
        {"CERTIFICATE", "EXPIRES", "DAYS LEFT", "CA", "RENEW", "PROBLEM"}, [](const json& c) {
          const bool missing = kube::jsonField(c, "missing") == true;
          return std::vector<std::string>{field(c, "name"),
                                          missing ? std::string("missing") : field(c, "expires"),
                                          field(c, "days_left"),
                                          field(c, "ca"),
                                          kube::jsonField(c, "due") == true ? "yes" : "no",
                                          kube::jsonField(c, "problem").is_string()
                                              ? field(c, "problem")
                                              : field(c, "not_renewable")};
        });
    const json& renewal = kube::jsonField(certs, "renewal");
    std::string line = field(renewal, "state");
    if (kube::jsonField(renewal, "message").is_string()) line += ": " + field(renewal, "message");
    if (kube::jsonField(renewal, "next_attempt").is_string())
      line += " (next attempt " + timeField(renewal, "next_attempt", now) + ")";
    out += fmt::format("certificate renewal: {}\n", line);
  }
  // The cluster-certificates controller's view (control-plane nodes: those with the CA key).
  if (const json& secrets = kube::jsonField(status, "cluster_certificates");
      secrets.is_object() && kube::jsonField(secrets, "control_plane") == true) {
    out += "\n";
    out += renderSection(
        secrets, "secrets", "cluster certificates",
        {"SECRET", "NAME", "EXPIRES", "DAYS LEFT", "RENEW", "NOTE"}, [](const json& c) {
          const bool present = kube::jsonField(c, "present") == true;
          std::string note = field(c, "problem");
          if (note == kNone) note = field(c, "note");
          return std::vector<std::string>{field(c, "secret"),
                                          field(c, "name"),
                                          present ? field(c, "expires") : std::string("absent"),
                                          field(c, "days_left"),
                                          kube::jsonField(c, "due") == true ? "yes" : "no",
                                          note};
        });
    if (const json& errors = kube::jsonField(kube::jsonField(secrets, "last"), "errors");
        errors.is_array() && !errors.empty()) {
      std::string text;
      for (const json& e : errors)
        text += (text.empty() ? "" : "; ") +
                cell(e.is_string() ? e.get<std::string>() : kube::jsonDump(e));
      out += fmt::format("cluster certificate renewal failed ({}): {}\n",
                         timeField(kube::jsonField(secrets, "last"), "at", now), text);
    }
  }
  // A change of the API address (`ekco change-load-balancer`): on the leader, the request and
  // each step; on every node, its own last step.
  if (const json& change = kube::jsonField(status, "api_address");
      change.is_object() && kube::jsonField(change, "request").is_object()) {
    const json& request = kube::jsonField(change, "request");
    out += "\n";
    out += fmt::format("API address change to {} (request {}): {}\n", field(request, "server"),
                       field(request, "id"), field(change, "summary"));
    out += renderSection(kube::jsonField(change, "progress"), "steps", "steps",
                         {"STEP", "NODE", "STATE", "WHY"}, [](const json& e) {
                           return std::vector<std::string>{field(e, "step"), field(e, "node"),
                                                           field(e, "state"), field(e, "why")};
                         });
  }
  if (const json& mine = kube::jsonField(status, "api_address_node");
      mine.is_object() && kube::jsonField(mine, "step").is_string()) {
    out += fmt::format("this node's API address step: {} {} ({})\n", field(mine, "step"),
                       field(mine, "state"), field(mine, "why"));
  }
  // Only when enable_internal_load_balancer is on (the agent sends null otherwise).
  if (const json& lb = kube::jsonField(status, "internal_load_balancer"); lb.is_object()) {
    std::string backends;
    if (const json& list = kube::jsonField(lb, "backends"); list.is_array()) {
      for (const json& b : list) {
        if (!backends.empty()) backends += ", ";
        backends += b.is_string() ? cell(b.get<std::string>()) : cell(kube::jsonDump(b));
      }
    }
    std::string source = field(lb, "source");
    if (kube::jsonField(lb, "written_at").is_string())
      source += " (written " + timeField(lb, "written_at", now) + ")";
    std::string reload = field(lb, "last_reload");
    if (kube::jsonField(lb, "reloaded_at").is_string())
      reload += " (" + timeField(lb, "reloaded_at", now) + ")";
    out += "\n";
    out += fmt::format("internal load balancer ({}):\n", field(lb, "bind"));
    out += fmt::format("  backends:     {}\n", backends.empty() ? std::string(kNone) : backends);
    out += fmt::format("  from:         {}\n", source);
    out += fmt::format("  last reload:  {}\n", reload);
    out += fmt::format("  problem:      {}\n", field(lb, "problem"));
  }
  // The leader's node-recovery view: nodes in planned shutdown, tainted out-of-service by ekco
  // (or by a person), and since when.
  if (const json& nr = kube::jsonField(status, "node_recovery"); nr.is_object()) {
    out += "\n";
    out += renderSection(
        nr, "nodes", "node recovery", {"NODE", "STATE", "SINCE", "REASON"}, [now](const json& n) {
          return std::vector<std::string>{field(n, "node"), field(n, "state"),
                                          timeField(n, "since", now), field(n, "reason")};
        });
  }
  if (!readiness.ready) out += "\n" + std::string(kProblemsPointer) + "\n";
  return out;
}

std::string statusSocketPath(const StatusOptions& options) {
  if (options.host_root.empty()) return options.socket_path;
  return (std::filesystem::path(options.host_root) /
          std::filesystem::path(options.socket_path).relative_path())
      .string();
}

int runStatus(const StatusOptions& options, std::ostream& out, std::ostream& err,
              const base::Clock& clock) {
  const std::string path = statusSocketPath(options);
  if (!options.probe.empty()) {
    auto answer = queryHealthSocket(path, "/" + options.probe, options.timeout);
    if (!answer) {
      err << "error: cannot reach the ekco agent's health socket: " << answer.error().message()
          << "\n";
      return kExitUnreachable;
    }
    std::string reason = answer->body;
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
    if (answer->status == 200) {
      out << (reason.empty() ? "ok" : reason) << "\n";
      return kExitOk;
    }
    err << options.probe << ": "
        << (reason.empty() ? fmt::format("HTTP {}", answer->status) : reason) << "\n";
    return kExitFailure;
  }
  auto ready = queryHealthSocket(path, "/readyz", options.timeout);
  if (!ready) {
    err << "error: cannot reach the ekco agent's health socket: " << ready.error().message()
        << "\n";
    return kExitUnreachable;
  }
  Readiness readiness;
  readiness.ready = ready->status == 200;
  if (!readiness.ready) {
    std::string reason = ready->body;
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
    readiness.reason =
        reason.empty() ? fmt::format("/readyz answered HTTP {}", ready->status) : reason;
  }

  json doc;
  auto status = queryHealthSocket(path, "/status", options.timeout);
  if (!status) {
    err << "warning: GET /status: " << status.error().message() << "\n";
  } else if (status->status != 200) {
    err << "warning: GET /status on " << path << " answered HTTP " << status->status << "\n";
  } else if (options.json) {
    out << status->body;
    if (status->body.empty() || status->body.back() != '\n') out << "\n";
  } else {
    doc = json::parse(status->body, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      err << "warning: GET /status on " << path << ": the answer is not JSON\n";
      doc = json();
    }
  }

  if (options.json) {
    if (!readiness.ready)
      err << "degraded: " << readiness.reason << " (" << kProblemsPointer << ")\n";
  } else {
    out << renderStatusTable(doc, readiness, clock.wallNow());
  }
  return readiness.ready ? kExitOk : kExitFailure;
}

}  // namespace ekco::agent
