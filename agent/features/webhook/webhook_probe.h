// Whether an agent serves the pod image overrides webhook, asked the way kube-apiserver asks:
// an AdmissionReview (a Pod CREATE with no containers, uid "ekco-endpoint-probe") POSTed over
// HTTPS to https://<address>:<port>/pod-image-overrides, the certificate verified against the
// webhook CA for the Service's name (ekco.<ns>.svc). Served means: a 200 whose body is an
// AdmissionReview answering that uid, allowed. The leader lists only the agents that are in the
// Service's endpoints when they run from the packages (agent/features/webhook/webhook_config.h).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::agent::webhook {

struct ProbeTarget {
  std::string address{};  // the node's IPv4 or IPv6 address
  int port = 0;
  std::string ca_pem{};  // the webhook CA
  std::string ns{};      // ekco's namespace: the name verified is ekco.<ns>.svc
};

// ok when it serves; otherwise why not, in one line ("connect: Connection refused", "TLS: ...",
// "HTTP 404", "the answer is not an AdmissionReview for the probe").
using Probe = std::function<base::Status(const ProbeTarget& target)>;

// The real probe (libcurl, kube/transport/curl_transport.h), each call within `timeout`.
Probe httpsProbe(const base::Clock& clock, std::chrono::milliseconds timeout);

}  // namespace ekco::agent::webhook
