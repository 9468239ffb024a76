#include "agent/features/csr_approval/kubelet_csr_rules.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "base/ip_address.h"
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
  auto ip = base::parseIpAddress(text);
  return ip ? ip->text() : std::string();
}

// A host name as a kubelet reports one: letters, digits, '-', '_' and '.'. Anything else (a
// wildcard '*' above all, which a TLS client matches against a whole label) is refused.
bool isHostName(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

std::string joinNodes(const std::set<std::string>& nodes) {
  std::string out;
  for (const auto& n : nodes) {
    if (!out.empty()) out += ", ";
    out += base::quoteForMessage(n);
  }
  return out;
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

std::string sanKey(std::string_view san) {
  if (auto ip = base::parseIpAddress(san)) return ip->unmapped().text();
  std::string_view name = san;
  if (name.size() > 1 && name.back() == '.') name.remove_suffix(1);
  return lower(name);
}

SanClaims sanClaims(const std::vector<kube::NodeRecord>& nodes,
                    const std::map<std::string, std::vector<std::string>>& approved) {
  SanClaims claims;
  std::set<std::string> present;
  for (const auto& n : nodes) {
    const std::string name = n.name.str();
    present.insert(name);
    claims.names[sanKey(name)].insert(name);
    for (const auto& a : n.addresses) claims.addresses[sanKey(a.address)].insert(name);
  }
  for (const auto& [node, sans] : approved) {
    if (present.count(node) == 0) continue;
    for (const auto& san : sans) claims.approved[sanKey(san)].insert(node);
  }
  return claims;
}

KubeletCsrVerdict decideKubeletServingCsr(const kube::CertificateSigningRequest& csr,
                                          const KubeletCsrPolicy& policy) {
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
  std::vector<std::string> not_hosts;
  for (const auto& d : request->dns_names) {
    if (!isHostName(d)) not_hosts.push_back(d);
  }
  if (!not_hosts.empty()) {
    return refuse("sans",
                  "DNS SANs that are not host names (letters, digits, '-', '_' and '.'; no "
                  "wildcard): " +
                      listText(not_hosts),
                  node);
  }
  // node
  const kube::NodeRecord* record = policy.node ? policy.node(node) : nullptr;
  if (record == nullptr) {
    return refuse("node", "Node " + base::quoteForMessage(node) + " does not exist", node);
  }
  std::vector<std::string> requested = request->dns_names;
  requested.insert(requested.end(), request->ip_addresses.begin(), request->ip_addresses.end());
  std::set<std::string> own;  // the sanKeys of the Node's own status.addresses
  for (const auto& a : record->addresses) own.insert(sanKey(a.address));
  // apiserver
  if (policy.apiserver == nullptr) {
    return refuse("apiserver",
                  "the API server's names and addresses are not known, so no SAN can be "
                  "checked against them",
                  node);
  }
  std::vector<std::string> apiserver;
  for (const auto& san : requested) {
    const std::string key = sanKey(san);
    if (auto it = policy.apiserver->service.find(key); it != policy.apiserver->service.end()) {
      apiserver.push_back(base::quoteForMessage(san) + " (" + it->second + ")");
    } else if (auto e = policy.apiserver->endpoint.find(key);
               e != policy.apiserver->endpoint.end() &&
               !(record->control_plane && own.count(key) != 0)) {
      apiserver.push_back(
          base::quoteForMessage(san) + " (" + e->second +
          (record->control_plane
               ? ", not one of this control-plane Node's status.addresses)"
               : "; Node " + base::quoteForMessage(node) + " is not a control-plane node)"));
    }
  }
  if (!apiserver.empty()) {
    std::string text;
    for (const auto& a : apiserver) text += (text.empty() ? "" : ", ") + a;
    return refuse("apiserver", "SANs that name the API server: " + text, node);
  }
  // other-node
  std::vector<std::string> others;
  if (policy.claims != nullptr) {
    const SanClaims& c = *policy.claims;
    auto holders = [&](const std::map<std::string, std::set<std::string>>& m,
                       const std::string& key) {
      std::set<std::string> out;
      if (auto it = m.find(key); it != m.end()) {
        for (const auto& n : it->second) {
          if (n != node) out.insert(n);
        }
      }
      return out;
    };
    for (const auto& san : requested) {
      const std::string key = sanKey(san);
      const std::string q = base::quoteForMessage(san);
      if (auto h = holders(c.names, key); !h.empty()) {
        others.push_back(q + " (the name of Node " + joinNodes(h) + ")");
      } else if (auto a = holders(c.approved, key); !a.empty()) {
        others.push_back(q + " (last approved for Node " + joinNodes(a) + ")");
      } else if (auto s = holders(c.addresses, key); !s.empty()) {
        auto mine = c.approved.find(key);
        if (mine == c.approved.end() || mine->second.count(node) == 0) {
          others.push_back(q + " (in the status.addresses of Node " + joinNodes(s) + ")");
        }
      }
    }
  }
  if (!others.empty()) {
    std::string text;
    for (const auto& o : others) text += (text.empty() ? "" : ", ") + o;
    return refuse("other-node", "SANs of another node: " + text, node);
  }
  // ip-prefixes
  if (!policy.allowed_ip_prefixes.empty()) {
    std::vector<std::string> outside;
    for (const auto& text : request->ip_addresses) {
      auto ip = base::parseIpAddress(text);
      const bool inside =
          ip && std::any_of(policy.allowed_ip_prefixes.begin(), policy.allowed_ip_prefixes.end(),
                            [&](const base::IpPrefix& p) { return p.contains(ip->unmapped()); });
      if (!inside) outside.push_back(text);
    }
    if (!outside.empty()) {
      std::string allowed;
      for (const auto& p : policy.allowed_ip_prefixes) {
        allowed += (allowed.empty() ? "" : ", ") + p.text();
      }
      return refuse(
          "ip-prefixes",
          "IP SANs outside kubelet_csr_allowed_ip_prefixes (" + allowed + "): " + listText(outside),
          node);
    }
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
  std::set<std::string> keys;
  for (const auto& san : requested) keys.insert(sanKey(san));
  return {.kind = Kind::kApprove,
          .reason = fmt::format("requester {} in {}, subject, usages [{}] and SANs [{}] match "
                                "Node {}",
                                csr.username, kNodesGroup, listText(csr.usages),
                                listText(requested), node),
          .node = node,
          .sans = std::vector<std::string>(keys.begin(), keys.end())};
}

}  // namespace ekco::agent
