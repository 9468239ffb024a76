#include "agent/controllers/kubelet_csr_rules.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "base/strings.h"
#include "pki/csr.h"

namespace ekco::agent {

namespace {

using Kind = KubeletCsrVerdict::Kind;

constexpr std::string_view kNodeUserPrefix = "system:node:";
constexpr std::string_view kNodesGroup = "system:nodes";

// The kubelet-serving usages, as kube-controller-manager's rule states them:
// kubernetes/kubernetes pkg/apis/certificates/helpers.go ValidateKubeletServingCSR accepts
// exactly {digital signature, key encipherment, server auth} (kubeletServingRequiredUsages) or
// exactly {digital signature, server auth} (kubeletServingRequiredUsagesNoRSA), compared as sets.
// The kubelet asks for key encipherment only with an RSA key (pkg/kubelet/certificate/
// kubelet.go: key encipherment is an RSA key-exchange usage, meaningless for ECDSA/Ed25519), so
// ekco is one step stricter: key encipherment is accepted only on an RSA key.
const std::set<std::string> kServingUsagesRsa = {"digital signature", "key encipherment",
                                                 "server auth"};
const std::set<std::string> kServingUsages = {"digital signature", "server auth"};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The canonical text of an IP address (as pki/csr.h writes SANs), or "" when it is none.
std::string canonicalIp(std::string_view text) {
  const std::string s(text);
  unsigned char bytes[16] = {};
  char out[INET6_ADDRSTRLEN] = {};
  if (inet_pton(AF_INET, s.c_str(), bytes) == 1) {
    return inet_ntop(AF_INET, bytes, out, sizeof(out)) != nullptr ? out : "";
  }
  if (inet_pton(AF_INET6, s.c_str(), bytes) == 1) {
    return inet_ntop(AF_INET6, bytes, out, sizeof(out)) != nullptr ? out : "";
  }
  return {};
}

std::string listText(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) {
    if (!out.empty()) out += ", ";
    out += base::quoteForMessage(i);
  }
  return out.empty() ? "none" : out;
}

KubeletCsrVerdict refuse(std::string rule, std::string reason, std::string node) {
  return {.kind = Kind::kRefuse,
          .rule = std::move(rule),
          .reason = std::move(reason),
          .node = std::move(node)};
}

}  // namespace

KubeletCsrVerdict decideKubeletServingCsr(const kube::CertificateSigningRequest& csr,
                                          const NodeLookup& node_of) {
  if (csr.signer_name != kKubeletServingSigner) {
    return {.reason = "signer " + base::quoteForMessage(csr.signer_name) + " is not ekco's"};
  }
  if (csr.approved || csr.denied || csr.failed || csr.issued) {
    return {.reason = csr.denied   ? "already denied"
                      : csr.failed ? "already failed"
                                   : "already approved"};
  }
  // requester
  std::string node;
  if (csr.username.starts_with(kNodeUserPrefix)) node = csr.username.substr(kNodeUserPrefix.size());
  if (node.empty()) {
    return refuse("requester",
                  "the requester " + base::quoteForMessage(csr.username) + " is not a node (" +
                      std::string(kNodeUserPrefix) + "<name>)",
                  "");
  }
  if (std::find(csr.groups.begin(), csr.groups.end(), kNodesGroup) == csr.groups.end()) {
    return refuse("requester",
                  "the requester " + base::quoteForMessage(csr.username) + " is not in group " +
                      std::string(kNodesGroup) + " (groups: " + listText(csr.groups) + ")",
                  node);
  }
  // request
  auto request = pki::parseCertificateRequest(csr.request, "spec.request");
  if (!request) return refuse("request", request.error().message(), node);
  // subject
  const std::string want_cn = std::string(kNodeUserPrefix) + node;
  const bool subject_ok =
      request->subject.size() == 2 &&
      std::count(request->subject.begin(), request->subject.end(),
                 std::pair<std::string, std::string>("O", std::string(kNodesGroup))) == 1 &&
      std::count(request->subject.begin(), request->subject.end(),
                 std::pair<std::string, std::string>("CN", want_cn)) == 1;
  if (!subject_ok) {
    return refuse("subject",
                  "the subject " + base::quoteForMessage(request->subjectText()) +
                      " is not exactly O=system:nodes, CN=" + want_cn + " (the requester)",
                  node);
  }
  // usages
  const std::set<std::string> usages(csr.usages.begin(), csr.usages.end());
  const bool rsa = request->key_type == "RSA";
  if (!(usages == kServingUsages || (rsa && usages == kServingUsagesRsa))) {
    return refuse(
        "usages",
        fmt::format("the usages [{}] are not the kubelet-serving set (digital signature, "
                    "server auth{})",
                    listText(csr.usages),
                    rsa ? "; with an RSA key also key encipherment"
                        : "; key encipherment only with an RSA key, this is " + request->key_type),
        node);
  }
  // sans
  if (!request->emails.empty()) {
    return refuse("sans", "email SANs are not allowed: " + listText(request->emails), node);
  }
  if (!request->uris.empty()) {
    return refuse("sans", "URI SANs are not allowed: " + listText(request->uris), node);
  }
  if (!request->other_names.empty()) {
    return refuse("sans", "SANs of kind " + listText(request->other_names) + " are not allowed",
                  node);
  }
  if (request->dns_names.empty() && request->ip_addresses.empty()) {
    return refuse("sans", "no DNS or IP SAN", node);
  }
  // node
  const kube::NodeRecord* record = node_of ? node_of(node) : nullptr;
  if (record == nullptr) {
    return refuse("node", "Node " + base::quoteForMessage(node) + " does not exist", node);
  }
  // addresses
  std::set<std::string> names;
  std::set<std::string> ips;
  for (const auto& a : record->addresses) {
    if (a.type == "Hostname" || a.type == "InternalDNS" || a.type == "ExternalDNS") {
      names.insert(lower(a.address));
    } else if (a.type == "InternalIP" || a.type == "ExternalIP") {
      if (std::string ip = canonicalIp(a.address); !ip.empty()) ips.insert(std::move(ip));
    }
  }
  std::vector<std::string> foreign;
  for (const auto& d : request->dns_names) {
    if (names.count(lower(d)) == 0) foreign.push_back(d);
  }
  for (const auto& ip : request->ip_addresses) {
    if (ips.count(ip) == 0) foreign.push_back(ip);
  }
  if (!foreign.empty()) {
    return refuse("addresses",
                  "SANs not among Node " + base::quoteForMessage(node) +
                      "'s status.addresses: " + listText(foreign),
                  node);
  }
  return {.kind = Kind::kApprove,
          .reason = fmt::format("requester {} in {}, subject, usages [{}] and SANs [{}] match "
                                "Node {}",
                                csr.username, kNodesGroup, listText(csr.usages), listText([&] {
                                  std::vector<std::string> all = request->dns_names;
                                  all.insert(all.end(), request->ip_addresses.begin(),
                                             request->ip_addresses.end());
                                  return all;
                                }()),
                                node),
          .node = node};
}

}  // namespace ekco::agent
