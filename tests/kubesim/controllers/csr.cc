#include "tests/kubesim/controllers/csr.h"

#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "tests/kubesim/controllers/csr_fields.h"
#include "tests/kubesim/rbac/request_user.h"
#include "tests/kubesim/store/store_support.h"
#include "tests/kubesim/validation/types.h"

namespace ekco::kubesim::csr {

using store_detail::str;

namespace {

using nlohmann::json;

const std::vector<std::string>& validUsages() {
  static const std::vector<std::string> usages = {"any",
                                                  "cert sign",
                                                  "client auth",
                                                  "code signing",
                                                  "content commitment",
                                                  "crl sign",
                                                  "data encipherment",
                                                  "decipher only",
                                                  "digital signature",
                                                  "email protection",
                                                  "encipher only",
                                                  "ipsec end system",
                                                  "ipsec tunnel",
                                                  "ipsec user",
                                                  "key agreement",
                                                  "key encipherment",
                                                  "microsoft sgc",
                                                  "netscape sgc",
                                                  "ocsp signing",
                                                  "s/mime",
                                                  "server auth",
                                                  "signing",
                                                  "timestamping"};
  return usages;
}

std::size_t countType(const json& conds, const std::string& type) {
  return static_cast<std::size_t>(std::count_if(conds.begin(), conds.end(), [&](const json& c) {
    return c.is_object() && c.value("type", "") == type;
  }));
}

// Go's %#v of a []byte, as field.Invalid renders spec.request.
std::string goBytes(std::string_view bytes) {
  std::string out = "[]byte{";
  char buf[8];
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s0x%x", i == 0 ? "" : ", ",
                  static_cast<unsigned>(static_cast<unsigned char>(bytes[i])));
    out += buf;
  }
  return out + "}";
}

// ValidateSignerName (k8s.io/kubernetes/pkg/apis/core/validation).
std::vector<FieldError> signerNameErrors(const std::string& name) {
  const std::string path = "spec.signerName";
  if (name.empty()) return {requiredValue(path)};
  if (name == "kubernetes.io/legacy-unknown") {
    return {invalidValue(path, name, "the legacy signerName is not allowed via this API version")};
  }
  const auto slash = name.find('/');
  if (slash == std::string::npos || name.find('/', slash + 1) != std::string::npos) {
    return {invalidValue(path, name,
                         "must be a fully qualified domain and path of the form "
                         "'example.com/signer-name'")};
  }
  std::vector<FieldError> out;
  const std::string domain = name.substr(0, slash);
  const std::string rest = name.substr(slash + 1);
  std::size_t labels = 0;
  std::size_t pos = 0;
  while (true) {
    const auto dot = domain.find('.', pos);
    const std::string label = domain.substr(pos, dot == std::string::npos ? dot : dot - pos);
    ++labels;
    auto errs = dns1123Label(label);
    if (!errs.empty()) {
      for (const std::string& e : errs) {
        out.push_back(invalidValue(path, domain, "validating label " + goQuote(label) + ": " + e));
      }
      break;
    }
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  if (labels < 2) {
    out.push_back(invalidValue(path, domain,
                               "should be a domain with at least two segments separated by dots"));
  }
  for (const std::string& e : dns1123Subdomain(rest)) out.push_back(invalidValue(path, rest, e));
  return out;
}

// validateConditions; `allow_both`: the stored object already has both (tolerated).
void conditionErrors(const json& csr, bool allow_both, std::vector<FieldError>& out) {
  const json conds = conditions(csr);
  std::set<std::string> seen;
  bool approved = false;
  bool denied = false;
  for (std::size_t i = 0; i < conds.size(); ++i) {
    const json& c = conds[i];
    const std::string at = "status.conditions[" + std::to_string(i) + "]";
    const std::string type = c.is_object() ? c.value("type", "") : "";
    const std::string status = c.is_object() ? c.value("status", "") : "";
    if (type.empty()) out.push_back(requiredValue(at + ".type"));
    const bool true_only = type == "Approved" || type == "Denied" || type == "Failed";
    if (status.empty()) {
      out.push_back(requiredValue(at + ".status"));
    } else if (true_only && status != "True") {
      out.push_back(notSupported(at + ".status", status, {"True"}));
    } else if (!true_only && status != "True" && status != "False" && status != "Unknown") {
      out.push_back(notSupported(at + ".status", status, {"False", "True", "Unknown"}));
    }
    if (!allow_both) {
      if (type == "Approved") {
        approved = true;
        if (denied) {
          out.push_back(invalidValue(at + ".type", type,
                                     "Approved and Denied conditions are mutually exclusive"));
        }
      } else if (type == "Denied") {
        denied = true;
        if (approved) {
          out.push_back(invalidValue(at + ".type", type,
                                     "Approved and Denied conditions are mutually exclusive"));
        }
      }
    }
    if (!seen.insert(type).second) {
      out.push_back(FieldError{.type = "FieldValueDuplicate",
                               .field = at + ".type",
                               .value = goQuote(type),
                               .detail = ""});
    }
  }
}

// validateCertificate: one or more CERTIFICATE blocks that parse.
std::optional<std::string> certificateError(const std::string& pem) {
  if (pem.empty()) return std::nullopt;
  BioPtr bio = readBio(pem);
  int blocks = 0;
  while (true) {
    char* name = nullptr;
    char* header = nullptr;
    unsigned char* data = nullptr;
    long len = 0;
    if (PEM_read_bio(bio.get(), &name, &header, &data, &len) != 1) break;
    const std::string type = name;
    const bool headers = header != nullptr && header[0] != '\0';
    const unsigned char* p = data;
    CertPtr cert(d2i_X509(nullptr, &p, len));
    OPENSSL_free(name);
    OPENSSL_free(header);
    OPENSSL_free(data);
    if (type != "CERTIFICATE")
      return "only CERTIFICATE PEM blocks are allowed, found " + goQuote(type);
    if (headers) return "no PEM block headers are permitted";
    if (!cert) return "x509: malformed certificate";
    ++blocks;
  }
  if (blocks == 0) return "must contain at least one CERTIFICATE PEM block";
  return std::nullopt;
}

std::string certificateOf(const json& csr) {
  std::string error;
  auto pem = decodeBase64(str(csr, {"status", "certificate"}), &error);
  return pem.value_or("");
}

}  // namespace

bool isCsr(const ResourceInfo& r) {
  return r.group == "certificates.k8s.io" && r.plural == "certificatesigningrequests";
}

void prepareForCreate(json& csr, const UserInfo* user) {
  json& spec = csr["spec"];
  if (!spec.is_object()) spec = json::object();
  for (const char* f : {"username", "uid", "groups", "extra"}) spec.erase(f);
  if (user != nullptr) {
    spec["username"] = user->name;
    spec["groups"] = authenticatedGroups(*user);
  }
  csr["status"] = json::object();
}

std::vector<FieldError> validateCreate(const json& csr) {
  std::vector<FieldError> out;
  auto pem = requestPem(csr);
  if (!pem) {
    out.push_back(FieldError{.type = "FieldValueInvalid",
                             .field = "spec.request",
                             .value = goBytes(str(csr, {"spec", "request"})),
                             .detail = pem.error().message()});
  } else if (auto req = parseRequest(*pem); !req) {
    out.push_back(FieldError{.type = "FieldValueInvalid",
                             .field = "spec.request",
                             .value = goBytes(*pem),
                             .detail = req.error().message()});
  }
  const json& spec = csr.value("spec", json::object());
  const json usages = spec.value("usages", json::array());
  if (!usages.is_array() || usages.empty()) out.push_back(requiredValue("spec.usages"));
  std::set<std::string> seen;
  for (std::size_t i = 0; usages.is_array() && i < usages.size(); ++i) {
    const std::string u = usages[i].is_string() ? usages[i].get<std::string>() : usages[i].dump();
    const std::string at = "spec.usages[" + std::to_string(i) + "]";
    const auto& valid = validUsages();
    if (std::find(valid.begin(), valid.end(), u) == valid.end()) {
      out.push_back(notSupported(at, u, valid));
    }
    if (!seen.insert(u).second) {
      out.push_back(FieldError{
          .type = "FieldValueDuplicate", .field = at, .value = goQuote(u), .detail = ""});
    }
  }
  for (FieldError& e : signerNameErrors(str(csr, {"spec", "signerName"}))) {
    out.push_back(std::move(e));
  }
  if (spec.contains("expirationSeconds") && spec["expirationSeconds"].is_number_integer() &&
      spec["expirationSeconds"].get<std::int64_t>() < 600) {
    out.push_back(invalidValue("spec.expirationSeconds", spec["expirationSeconds"],
                               "may not specify a duration less than 600 seconds (10 minutes)"));
  }
  conditionErrors(csr, false, out);
  if (auto bad = certificateError(certificateOf(csr))) {
    out.push_back(invalidValue("status.certificate", "<certificate data>", *bad));
  }
  return out;
}

std::vector<FieldError> prepareUpdate(std::string_view subresource, json& next, const json& old,
                                      const std::string& now) {
  // (1) PrepareForUpdate: the spec never changes; the main resource keeps the status, /approval
  // takes only the conditions.
  next["spec"] = old.value("spec", json::object());
  if (subresource.empty()) {
    if (old.contains("status")) {
      next["status"] = old["status"];
    } else {
      next.erase("status");
    }
  } else if (subresource == "approval") {
    json conds = conditions(next);
    next["status"] = old.value("status", json::object());
    if (!next["status"].is_object()) next["status"] = json::object();
    next["status"]["conditions"] = conds;
  }
  // (2) v1 defaulting (a condition without status is "True") and populateConditionTimestamps.
  if (next.contains("status") && next["status"].is_object() &&
      next["status"].contains("conditions") && next["status"]["conditions"].is_array()) {
    const json old_conds = conditions(old);
    for (json& c : next["status"]["conditions"]) {
      if (!c.is_object()) continue;
      if (c.value("status", "").empty()) c["status"] = "True";
      if (c.value("lastUpdateTime", "").empty()) c["lastUpdateTime"] = now;
      if (c.value("lastTransitionTime", "").empty()) {
        std::string transition = now;
        for (const json& o : old_conds) {
          if (o.value("type", "") == c.value("type", "") &&
              o.value("status", "") == c.value("status", "") &&
              !o.value("lastTransitionTime", "").empty()) {
            transition = o["lastTransitionTime"].get<std::string>();
            break;
          }
        }
        c["lastTransitionTime"] = transition;
      }
    }
  }
  // (3) validateCertificateSigningRequestUpdate.
  std::vector<FieldError> out;
  const json old_conds = conditions(old);
  const json new_conds = conditions(next);
  const bool old_both = countType(old_conds, "Approved") > 0 && countType(old_conds, "Denied") > 0;
  conditionErrors(next, old_both, out);
  for (const char* t : {"Approved", "Denied", "Failed"}) {
    if (countType(new_conds, t) < countType(old_conds, t)) {
      out.push_back(
          forbidden("status.conditions",
                    std::string("updates may not remove a condition of type \"") + t + "\""));
    }
  }
  if (subresource != "approval") {
    for (const char* t : {"Approved", "Denied"}) {
      const std::size_t before = countType(old_conds, t);
      const std::size_t after = countType(new_conds, t);
      if (after > before) {
        out.push_back(
            forbidden("status.conditions",
                      std::string("updates may not add a condition of type \"") + t + "\""));
      } else if (after == before && after > 0) {
        json a = json::array();
        json b = json::array();
        for (const json& c : old_conds)
          if (c.value("type", "") == t) a.push_back(c);
        for (const json& c : new_conds)
          if (c.value("type", "") == t) b.push_back(c);
        if (a != b) {
          out.push_back(
              forbidden("status.conditions",
                        std::string("updates may not modify a condition of type \"") + t + "\""));
        }
      }
    }
  }
  const std::string old_cert = str(old, {"status", "certificate"});
  const std::string new_cert = str(next, {"status", "certificate"});
  if (new_cert != old_cert) {
    if (subresource != "status") {
      out.push_back(forbidden("status.certificate", "updates may not set certificate content"));
    } else if (!old_cert.empty()) {
      out.push_back(
          forbidden("status.certificate", "updates may not modify existing certificate content"));
    } else if (auto bad = certificateError(certificateOf(next))) {
      out.push_back(invalidValue("status.certificate", "<certificate data>", *bad));
    }
  }
  return out;
}

namespace {

// `verb` on the CSR's signer (or its domain's "<domain>/*"), as the CertificateApproval and
// CertificateSigning admission plugins ask it; 403 naming what was refused.
std::optional<Reply> admitSignerVerb(const RbacPolicy& policy, const UserInfo& user,
                                     const json& csr, const std::string& verb) {
  if (user.isMaster()) return std::nullopt;
  const std::string signer = str(csr, {"spec", "signerName"});
  RequestAttributes attrs{.resource_request = true,
                          .verb = verb,
                          .api_group = "certificates.k8s.io",
                          .api_version = "v1",
                          .resource = "signers",
                          .subresource = "",
                          .ns = "",
                          .name = signer,
                          .path = ""};
  if (authorize(policy, user, attrs).allowed) return std::nullopt;
  attrs.name = signer.substr(0, signer.find('/')) + "/*";
  if (authorize(policy, user, attrs).allowed) return std::nullopt;
  const std::string name = str(csr, {"metadata", "name"});
  return statusReply(403, "Forbidden",
                     "certificatesigningrequests.certificates.k8s.io \"" + name +
                         "\" is forbidden: user not permitted to " + verb +
                         " requests with signerName \"" + signer + "\"",
                     name, nullptr);
}

}  // namespace

std::optional<Reply> admitApproval(const RbacPolicy& policy, const UserInfo& user,
                                   const json& csr) {
  return admitSignerVerb(policy, user, csr, "approve");
}

std::optional<Reply> admitSigning(const RbacPolicy& policy, const UserInfo& user, const json& csr) {
  return admitSignerVerb(policy, user, csr, "sign");
}

}  // namespace ekco::kubesim::csr
