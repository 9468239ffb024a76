#include "agent/features/webhook/webhook_probe.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "agent/features/webhook/webhook_objects.h"
#include "agent/features/webhook/webhook_server.h"
#include "kube/decode/json_fields.h"
#include "kube/transport/curl_transport.h"

namespace ekco::agent::webhook {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

namespace {

constexpr std::string_view kProbeUid = "ekco-endpoint-probe";

std::string probeReview(std::string_view ns) {
  const json review = {{"apiVersion", "admission.k8s.io/v1"},
                       {"kind", "AdmissionReview"},
                       {"request",
                        {{"uid", kProbeUid},
                         {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                         {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                         {"namespace", ns},
                         {"operation", "CREATE"},
                         {"object",
                          {{"apiVersion", "v1"},
                           {"kind", "Pod"},
                           {"metadata", {{"name", "ekco-endpoint-probe"}, {"namespace", ns}}},
                           {"spec", {{"containers", json::array()}}}}}}}};
  return kube::jsonDump(review);
}

}  // namespace

Probe httpsProbe(const base::Clock& clock, std::chrono::milliseconds timeout) {
  return [&clock, timeout](const ProbeTarget& target) -> base::Status {
    const std::string host =
        target.address.find(':') != std::string::npos ? "[" + target.address + "]" : target.address;
    auto transport = kube::CurlTransport::create(
        {.server = fmt::format("https://{}:{}", host, target.port),
         .ca_pem = target.ca_pem,
         .tls_server_name = serviceDnsNames(target.ns)[0],
         .source = "webhook probe"},
        nullptr, clock,
        {.connect_timeout = timeout, .max_response_bytes = 64 << 10, .max_idle_handles = 0});
    if (!transport) return std::move(transport).error();
    auto answer = (*transport)
                      ->send({.method = "POST",
                              .target = std::string(kImageOverridesPath),
                              .headers = {{"Content-Type", "application/json"}},
                              .body = probeReview(target.ns),
                              .timeout = timeout});
    if (!answer) return std::move(answer).error();
    if (answer->status != 200) {
      return Error(fmt::format("HTTP {}", answer->status), ErrorCode::kUnavailable);
    }
    const json review = json::parse(answer->body, nullptr, false);
    const json& response = kube::jsonField(review, "response");
    const json& uid = kube::jsonField(response, "uid");
    const json& allowed = kube::jsonField(response, "allowed");
    if (!uid.is_string() || uid.get<std::string>() != kProbeUid || !allowed.is_boolean() ||
        !allowed.get<bool>()) {
      return Error("the answer is not an AdmissionReview allowing the probe",
                   ErrorCode::kUnavailable);
    }
    return base::ok();
  };
}

}  // namespace ekco::agent::webhook
