#include "agent/config/validate.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include <fmt/format.h>

#include "base/ip_address.h"
#include "base/log/log.h"
#include "base/strings.h"
#include "haproxy/image.h"
#include "haproxy/render.h"
#include "kube/transport/curl_transport.h"
#include "units/calendar.h"

namespace ekco::agent {

bool isDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-'; });
}

void checkConfigRules(Config& c, const ConfigProblemFn& problem,
                      const std::function<bool(std::string_view key)>& is_set) {
  if (c.min_ready_master_nodes < 1) {
    problem("min_ready_master_nodes",
            fmt::format("must be at least 1 (got {})", c.min_ready_master_nodes));
  }
  if (c.storm_guard_percent > 100) {
    problem("storm_guard_percent",
            fmt::format("must be at most 100 (got {})", c.storm_guard_percent));
  }
  if (c.min_ceph_pool_replication < 1) {
    problem("min_ceph_pool_replication",
            fmt::format("must be at least 1 (got {})", c.min_ceph_pool_replication));
  }
  if (c.min_ceph_pool_replication > c.max_ceph_pool_replication) {
    problem(is_set("min_ceph_pool_replication") ? "min_ceph_pool_replication"
                                                : "max_ceph_pool_replication",
            fmt::format("min_ceph_pool_replication ({}) is greater than "
                        "max_ceph_pool_replication ({})",
                        c.min_ceph_pool_replication, c.max_ceph_pool_replication));
  }
  // EKCO's form, used as a label selector: key=value, nothing else (a selector's other operators
  // would silently widen or narrow the storage nodes).
  if (!c.rook_storage_nodes_label.empty()) {
    const std::string& l = c.rook_storage_nodes_label;
    const auto eq = l.find('=');
    auto label_char = [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' ||
             ch == '/';
    };
    if (eq == std::string::npos || eq == 0 || l.find('=', eq + 1) != std::string::npos ||
        !std::all_of(l.begin(), l.end(), [&](char ch) { return ch == '=' || label_char(ch); })) {
      problem("rook_storage_nodes_label",
              fmt::format("want key=value, got {}", base::quoteForMessage(l)));
    }
  }
  // A hold-down of seconds would let a node's reboot lower replication (and a decrease is what
  // this key exists to delay); more than a day would keep a shrunk cluster's pools unwritable.
  if (c.ceph_pool_replication_hold_down < std::chrono::minutes(1) ||
      c.ceph_pool_replication_hold_down > std::chrono::hours(24)) {
    problem("ceph_pool_replication_hold_down",
            fmt::format("must be between 1m and 24h (got {})",
                        base::formatDuration(c.ceph_pool_replication_hold_down)));
  }
  for (auto [key, value] :
       {std::pair{"reconcile_interval", c.reconcile_interval},
        std::pair{"rotate_certs_check_interval", c.rotate_certs_check_interval},
        std::pair{"shutdown_unmount_timeout", c.shutdown_unmount_timeout},
        std::pair{"shutdown_out_of_service_grace", c.shutdown_out_of_service_grace},
        std::pair{"startup_api_timeout", c.startup_api_timeout}}) {
    if (value.count() == 0) problem(key, "must be greater than 0");
  }
  // Below these the agent cannot work as configured (issue 24 defect 8): a 1 ns reconcile
  // interval spins a core; the elector counts in milliseconds and writes whole seconds.
  if (c.reconcile_interval.count() > 0 && c.reconcile_interval < kMinReconcileInterval) {
    problem("reconcile_interval",
            fmt::format("must be at least {} (got {})", base::formatDuration(kMinReconcileInterval),
                        base::formatDuration(c.reconcile_interval)));
  }
  // EKCO: a zero reconcile_timeout means 15 minutes.
  if (c.reconcile_timeout.count() == 0) c.reconcile_timeout = std::chrono::minutes(15);

  if (auto r = haproxy::validateImage(c.internal_load_balancer_haproxy_image); !r) {
    problem("internal_load_balancer_haproxy_image", r.error().message());
  }
  if (auto r = haproxy::parseBindAddress(c.internal_load_balancer_bind); !r) {
    problem("internal_load_balancer_bind", r.error().message());
  }
  for (const std::string& entry : c.pod_image_overrides) {
    if (auto r = parseImageOverride(entry); !r) problem("pod_image_overrides", r.error().message());
  }
  for (const std::string& entry : c.kubelet_csr_allowed_ip_prefixes) {
    auto prefix = base::parseIpPrefix(entry);
    if (!prefix) {
      problem("kubelet_csr_allowed_ip_prefixes", prefix.error().message());
    } else if (prefix->hasHostBits()) {
      problem("kubelet_csr_allowed_ip_prefixes",
              fmt::format("{} has bits set past its prefix length (did you mean {}/{}?)",
                          base::quoteForMessage(entry), prefix->network().text(), prefix->length));
    }
  }
  if (c.pod_image_overrides_port < 1 || c.pod_image_overrides_port > 65535) {
    problem("pod_image_overrides_port",
            fmt::format("must be a port from 1 to 65535 (got {})", c.pod_image_overrides_port));
  }
  for (const std::string& ns : c.pod_image_overrides_excluded_namespaces) {
    if (!isDnsLabel(ns)) {
      problem("pod_image_overrides_excluded_namespaces",
              "want namespace names (RFC 1123 labels), got " + base::quoteForMessage(ns));
    }
  }
  if (c.pod_image_overrides_endpoints != "auto" && c.pod_image_overrides_endpoints != "pods" &&
      c.pod_image_overrides_endpoints != "nodes") {
    problem(
        "pod_image_overrides_endpoints",
        "want auto, pods or nodes, got " + base::quoteForMessage(c.pod_image_overrides_endpoints));
  }
  if (!c.auto_upgrade_schedule.empty()) {
    if (auto r = units::parseCalendar(c.auto_upgrade_schedule); !r) {
      // The message reads "invalid calendar event "X": <reason>" (units/calendar.h).
      problem("auto_upgrade_schedule", r.error().message() + " (see man systemd.time)");
    }
  }
  if (!c.auto_upgrade_url.empty()) {
    // The same rule `ekco upgrade` and its fetch apply (kube/transport/curl_transport.h).
    if (std::string why = kube::urlProblem(c.auto_upgrade_url, c.auto_upgrade_allow_http,
                                           "set auto_upgrade_allow_http: true");
        !why.empty()) {
      problem("auto_upgrade_url",
              fmt::format("{} (got {})", why, base::quoteForMessage(c.auto_upgrade_url)));
    }
  }
  if (!c.metrics_address.empty()) {
    if (auto r = haproxy::parseBindAddress(c.metrics_address); !r) {
      problem("metrics_address", r.error().message());
    }
  }
  if (auto lvl = base::parseLogLevel(c.log_level); !lvl) {
    problem("log_level", lvl.error().message());
  }
  for (auto [key, value] : {std::pair{"certificates_dir", &c.certificates_dir},
                            std::pair{"health_socket", &c.health_socket}}) {
    if (value->empty() || value->front() != '/') {
      problem(key, "want an absolute path, got " + base::quoteForMessage(*value));
    }
  }
  if (!c.health_socket.empty() && c.health_socket.front() == '/') {
    if (c.health_socket.back() == '/') {
      problem("health_socket", "want the path of a socket file, not a directory, got " +
                                   base::quoteForMessage(c.health_socket));
    } else if (c.health_socket.size() > kMaxSocketPathBytes) {
      problem("health_socket", fmt::format("a unix socket path has at most {} bytes (got {}: {})",
                                           kMaxSocketPathBytes, c.health_socket.size(),
                                           base::quoteForMessage(c.health_socket)));
    }
  }
  if (c.leader_election_retry_period.count() <= 0) {
    problem("leader_election_retry_period", "must be greater than 0");
  } else if (c.leader_election_retry_period < kMinLeaderElectionRetryPeriod) {
    problem("leader_election_retry_period",
            fmt::format("must be at least {} (got {})",
                        base::formatDuration(kMinLeaderElectionRetryPeriod),
                        base::formatDuration(c.leader_election_retry_period)));
  } else if (c.leader_election_renew_deadline <= c.leader_election_retry_period) {
    problem("leader_election_renew_deadline",
            fmt::format("must be longer than leader_election_retry_period ({})",
                        base::formatDuration(c.leader_election_retry_period)));
  } else if (c.leader_election_lease_duration <= c.leader_election_renew_deadline) {
    problem("leader_election_lease_duration",
            fmt::format("must be longer than leader_election_renew_deadline ({})",
                        base::formatDuration(c.leader_election_renew_deadline)));
  }
  if (!isDnsLabel(c.leader_election_namespace)) {
    problem("leader_election_namespace", "want a namespace name (RFC 1123 label), got " +
                                             base::quoteForMessage(c.leader_election_namespace));
  }
  for (const std::string& ns : c.shutdown_excluded_namespaces) {
    if (!isDnsLabel(ns)) {
      problem("shutdown_excluded_namespaces",
              "want namespace names (RFC 1123 labels), got " + base::quoteForMessage(ns));
    }
  }
  // Other namespaces may be left empty when their add-on is absent (kURL renders
  // minio_namespace from an unset variable), but a set one must be a valid name.
  for (auto [key, value] :
       {std::pair{"rotate_certs_namespace", &c.rotate_certs_namespace},
        std::pair{"registry_cert_namespace", &c.registry_cert_namespace},
        std::pair{"kurl_proxy_cert_namespace", &c.kurl_proxy_cert_namespace},
        std::pair{"kotsadm_kubelet_cert_namespace", &c.kotsadm_kubelet_cert_namespace},
        std::pair{"contour_namespace", &c.contour_namespace},
        std::pair{"minio_namespace", &c.minio_namespace}}) {
    if (!value->empty() && !isDnsLabel(*value)) {
      problem(key, "want a namespace name (RFC 1123 label), got " + base::quoteForMessage(*value));
    }
  }
}

base::Result<std::pair<std::string, std::string>> parseImageOverride(std::string_view entry) {
  size_t eq = entry.find('=');
  auto bad = [&](std::string_view why) {
    return base::Error(fmt::format("malformed entry {}: {} (want original=overridden)",
                                   base::quoteForMessage(entry), why),
                       base::ErrorCode::kInvalidArgument);
  };
  if (eq == std::string_view::npos) return bad("no '='");
  std::string_view from = entry.substr(0, eq);
  std::string_view to = entry.substr(eq + 1);
  if (from.empty()) return bad("empty original image");
  if (to.empty()) return bad("empty overridden image");
  if (to.find('=') != std::string_view::npos) return bad("more than one '='");
  auto has_space = [](std::string_view s) {
    return std::any_of(s.begin(), s.end(),
                       [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); });
  };
  if (has_space(from) || has_space(to)) return bad("image names cannot contain spaces");
  return std::pair{std::string(from), std::string(to)};
}

}  // namespace ekco::agent
