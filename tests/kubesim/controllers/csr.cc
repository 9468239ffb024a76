#include "tests/kubesim/controllers/csr.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <set>

#include "tests/kubesim/rbac/request_user.h"
#include "tests/kubesim/validation/types.h"

namespace ekco::kubesim::csr {
namespace {

using base::Error;
using base::Result;
using nlohmann::json;
using Clock = std::chrono::system_clock;

constexpr const char* kServing = "kubernetes.io/kubelet-serving";
constexpr const char* kKubeletClient = "kubernetes.io/kube-apiserver-client-kubelet";
constexpr const char* kClient = "kubernetes.io/kube-apiserver-client";
constexpr std::int64_t kMaxSeconds = 365LL * 24 * 3600;  // --cluster-signing-duration 8760h
constexpr std::int64_t kBackdateSeconds = 5 * 60;

struct ReqFree {
  void operator()(X509_REQ* r) const { X509_REQ_free(r); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct ExtsFree {
  void operator()(STACK_OF(X509_EXTENSION) * s) const {
    sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free);
  }
};
struct NamesFree {
  void operator()(GENERAL_NAMES* n) const { GENERAL_NAMES_free(n); }
};
using ReqPtr = std::unique_ptr<X509_REQ, ReqFree>;
using CertPtr = std::unique_ptr<X509, CertFree>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
using BioPtr = std::unique_ptr<BIO, BioFree>;
using ExtsPtr = std::unique_ptr<STACK_OF(X509_EXTENSION), ExtsFree>;
using NamesPtr = std::unique_ptr<GENERAL_NAMES, NamesFree>;

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

std::string text(const json& obj, std::initializer_list<const char*> path) {
  const json* cur = &obj;
  for (const char* p : path) {
    if (!cur->is_object() || !cur->contains(p)) return {};
    cur = &(*cur)[p];
  }
  return cur->is_string() ? cur->get<std::string>() : std::string();
}

json conditions(const json& csr) {
  const json* status = csr.contains("status") ? &csr["status"] : nullptr;
  if (status == nullptr || !status->is_object()) return json::array();
  json c = status->value("conditions", json::array());
  return c.is_array() ? c : json::array();
}

std::size_t countType(const json& conds, const std::string& type) {
  return static_cast<std::size_t>(std::count_if(conds.begin(), conds.end(), [&](const json& c) {
    return c.is_object() && c.value("type", "") == type;
  }));
}

bool hasTrue(const json& csr, const std::string& type) {
  for (const json& c : conditions(csr)) {
    if (c.is_object() && c.value("type", "") == type && c.value("status", "") == "True") {
      return true;
    }
  }
  return false;
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

// certificates.ParseCSR + CheckSignature.
Result<ReqPtr> parseRequest(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  char* name = nullptr;
  char* header = nullptr;
  unsigned char* data = nullptr;
  long len = 0;
  if (!bio || PEM_read_bio(bio.get(), &name, &header, &data, &len) != 1) {
    return Error("PEM block type must be CERTIFICATE REQUEST");
  }
  const std::string type = name;
  OPENSSL_free(name);
  OPENSSL_free(header);
  if (type != "CERTIFICATE REQUEST") {
    OPENSSL_free(data);
    return Error("PEM block type must be CERTIFICATE REQUEST");
  }
  const unsigned char* p = data;
  ReqPtr req(d2i_X509_REQ(nullptr, &p, len));
  OPENSSL_free(data);
  if (!req)
    return Error("asn1: structure error: the request is not a PKCS#10 CertificationRequest");
  KeyPtr key(X509_REQ_get_pubkey(req.get()));
  if (!key || X509_REQ_verify(req.get(), key.get()) != 1) {
    return Error("x509: signature on the certificate request does not verify");
  }
  return req;
}

Result<std::string> requestPem(const json& csr) {
  std::string error;
  auto pem = decodeBase64(text(csr, {"spec", "request"}), &error);
  if (!pem) return Error(error);
  return *pem;
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
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
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
  auto pem = decodeBase64(text(csr, {"status", "certificate"}), &error);
  return pem.value_or("");
}

// The request's identity and SANs, for the signers' rules.
struct Subject {
  std::vector<std::string> orgs{};
  std::string cn{};
  int dns = 0, ip = 0, email = 0, uri = 0;
};

Subject subjectOf(X509_REQ* req) {
  Subject s;
  X509_NAME* name = X509_REQ_get_subject_name(req);
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    const int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(e));
    const ASN1_STRING* v = X509_NAME_ENTRY_get_data(e);
    std::string value(reinterpret_cast<const char*>(ASN1_STRING_get0_data(v)),
                      static_cast<std::size_t>(ASN1_STRING_length(v)));
    if (nid == NID_organizationName) s.orgs.push_back(value);
    if (nid == NID_commonName) s.cn = value;
  }
  ExtsPtr exts(X509_REQ_get_extensions(req));
  if (!exts) return s;
  for (int i = 0; i < sk_X509_EXTENSION_num(exts.get()); ++i) {
    X509_EXTENSION* ext = sk_X509_EXTENSION_value(exts.get(), i);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(ext)) != NID_subject_alt_name) continue;
    NamesPtr names(static_cast<GENERAL_NAMES*>(X509V3_EXT_d2i(ext)));
    for (int j = 0; names && j < sk_GENERAL_NAME_num(names.get()); ++j) {
      switch (sk_GENERAL_NAME_value(names.get(), j)->type) {
        case GEN_DNS:
          ++s.dns;
          break;
        case GEN_IPADD:
          ++s.ip;
          break;
        case GEN_EMAIL:
          ++s.email;
          break;
        case GEN_URI:
          ++s.uri;
          break;
        default:
          break;
      }
    }
  }
  return s;
}

std::string usageList(const std::set<std::string>& usages) {
  std::string out = "[";
  for (const std::string& u : usages) out += (out.size() > 1 ? " " : "") + u;
  return out + "]";
}

// The signers' request checks (pkg/apis/certificates/helpers.go, csrsigning's
// isRequestForSignerFn); the message becomes the Failed condition's.
std::optional<std::string> signerRefusal(const std::string& signer, const Subject& s,
                                         const std::set<std::string>& usages) {
  const bool node_org = s.orgs == std::vector<std::string>{"system:nodes"};
  const bool node_cn = s.cn.rfind("system:node:", 0) == 0;
  if (signer == kServing) {
    const std::set<std::string> rsa = {"digital signature", "key encipherment", "server auth"};
    const std::set<std::string> no_rsa = {"digital signature", "server auth"};
    if (!node_org) return "subject organization is not system:nodes";
    if (s.dns == 0 && s.ip == 0) return "DNS or IP subjectAltName is required";
    if (s.email > 0) return "Email subjectAltNames are not allowed";
    if (s.uri > 0) return "URI subjectAltNames are not allowed";
    if (usages != rsa && usages != no_rsa) return "usages did not match " + usageList(rsa);
    if (!node_cn) return "subject common name does not begin with 'system:node:'";
    return std::nullopt;
  }
  if (signer == kKubeletClient) {
    const std::set<std::string> rsa = {"client auth", "digital signature", "key encipherment"};
    const std::set<std::string> no_rsa = {"client auth", "digital signature"};
    if (!node_org) return "subject organization is not system:nodes";
    if (s.dns > 0) return "DNS subjectAltNames are not allowed";
    if (s.email > 0) return "Email subjectAltNames are not allowed";
    if (s.ip > 0) return "IP subjectAltNames are not allowed";
    if (s.uri > 0) return "URI subjectAltNames are not allowed";
    if (!node_cn) return "subject common name does not begin with 'system:node:'";
    if (usages != rsa && usages != no_rsa) return "usages did not match " + usageList(rsa);
    return std::nullopt;
  }
  bool client_auth = false;
  for (const std::string& u : usages) {
    if (u == "client auth") {
      client_auth = true;
    } else if (u != "digital signature" && u != "key encipherment") {
      return "invalid usage for client certificate: " + u;
    }
  }
  if (!client_auth) return "invalid usage for client certificate: missing client auth";
  return std::nullopt;
}

bool addExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

std::string timeText(Clock::time_point t) {
  std::time_t tt = Clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
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
                             .value = goBytes(text(csr, {"spec", "request"})),
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
  for (FieldError& e : signerNameErrors(text(csr, {"spec", "signerName"}))) {
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
  const std::string old_cert = text(old, {"status", "certificate"});
  const std::string new_cert = text(next, {"status", "certificate"});
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
  const std::string signer = text(csr, {"spec", "signerName"});
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
  const std::string name = text(csr, {"metadata", "name"});
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

Result<std::string> sign(const json& csr, const Pki& pki, Clock::time_point now) {
  auto pem = requestPem(csr);
  if (!pem) return pem.error();
  auto req = parseRequest(*pem);
  if (!req) return req.error();
  std::set<std::string> usages;
  for (const json& u : csr["spec"].value("usages", json::array())) {
    if (u.is_string()) usages.insert(u.get<std::string>());
  }
  const std::string signer = text(csr, {"spec", "signerName"});
  if (auto refused = signerRefusal(signer, subjectOf(req->get()), usages)) {
    return Error("invalid certificate request: " + *refused);
  }
  // The CA.
  BioPtr ca_bio(BIO_new_mem_buf(pki.ca_cert_pem.data(), static_cast<int>(pki.ca_cert_pem.size())));
  CertPtr ca(PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr));
  BioPtr key_bio(BIO_new_mem_buf(pki.ca_key_pem.data(), static_cast<int>(pki.ca_key_pem.size())));
  KeyPtr ca_key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!ca || !ca_key) return Error("kubesim: cannot read the cluster CA");
  // The validity: expirationSeconds (at least 600) capped at the signing duration and at the
  // CA's own expiry; backdated five minutes for clock skew.
  std::int64_t seconds = kMaxSeconds;
  const json& spec = csr["spec"];
  if (spec.contains("expirationSeconds") && spec["expirationSeconds"].is_number_integer()) {
    seconds =
        std::clamp<std::int64_t>(spec["expirationSeconds"].get<std::int64_t>(), 600, kMaxSeconds);
  }
  const std::time_t not_before = Clock::to_time_t(now) - kBackdateSeconds;
  std::time_t not_after = Clock::to_time_t(now) + seconds;
  CertPtr cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  ASN1_TIME_set(X509_getm_notBefore(cert.get()), not_before);
  ASN1_TIME_set(X509_getm_notAfter(cert.get()), not_after);
  if (X509_cmp_time(X509_get0_notAfter(ca.get()), &not_after) < 0) {
    X509_set1_notAfter(cert.get(), X509_get0_notAfter(ca.get()));
  }
  X509_set_subject_name(cert.get(), X509_REQ_get_subject_name(req->get()));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get()));
  KeyPtr pub(X509_REQ_get_pubkey(req->get()));
  X509_set_pubkey(cert.get(), pub.get());
  // Usages: keyUsage (critical) and extendedKeyUsage, as KeyUsagesFromStrings maps them.
  static const std::map<std::string, std::string> kKeyUsage = {
      {"signing", "digitalSignature"},
      {"digital signature", "digitalSignature"},
      {"content commitment", "nonRepudiation"},
      {"key encipherment", "keyEncipherment"},
      {"key agreement", "keyAgreement"},
      {"data encipherment", "dataEncipherment"},
      {"cert sign", "keyCertSign"},
      {"crl sign", "cRLSign"},
      {"encipher only", "encipherOnly"},
      {"decipher only", "decipherOnly"}};
  static const std::map<std::string, std::string> kExtUsage = {
      {"any", "anyExtendedKeyUsage"},
      {"server auth", "serverAuth"},
      {"client auth", "clientAuth"},
      {"code signing", "codeSigning"},
      {"email protection", "emailProtection"},
      {"s/mime", "emailProtection"},
      {"ipsec end system", "ipsecEndSystem"},
      {"ipsec tunnel", "ipsecTunnel"},
      {"ipsec user", "ipsecUser"},
      {"timestamping", "timeStamping"},
      {"ocsp signing", "OCSPSigning"},
      {"microsoft sgc", "msSGC"},
      {"netscape sgc", "nsSGC"}};
  std::set<std::string> ku;
  std::set<std::string> eku;
  for (const std::string& u : usages) {
    if (auto k = kKeyUsage.find(u); k != kKeyUsage.end()) ku.insert(k->second);
    if (auto e = kExtUsage.find(u); e != kExtUsage.end()) eku.insert(e->second);
  }
  bool ok = addExt(cert.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE");
  if (!ku.empty())
    ok = ok && addExt(cert.get(), ca.get(), NID_key_usage,
                      fmt::format("critical,{}", fmt::join(ku, ",")));
  if (!eku.empty())
    ok = ok &&
         addExt(cert.get(), ca.get(), NID_ext_key_usage, fmt::format("{}", fmt::join(eku, ",")));
  ok = ok && addExt(cert.get(), ca.get(), NID_authority_key_identifier, "keyid");
  ExtsPtr exts(X509_REQ_get_extensions(req->get()));
  for (int i = 0; exts && i < sk_X509_EXTENSION_num(exts.get()); ++i) {
    X509_EXTENSION* ext = sk_X509_EXTENSION_value(exts.get(), i);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(ext)) == NID_subject_alt_name) {
      ok = ok && X509_add_ext(cert.get(), ext, -1) == 1;
    }
  }
  if (!ok) return Error("kubesim: cannot add the certificate's extensions");
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) {
    return Error("kubesim: cannot sign the certificate");
  }
  BioPtr out(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(out.get(), cert.get()) != 1) return Error("kubesim: cannot write PEM");
  char* data = nullptr;
  const long len = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<std::size_t>(len));
}

void signerPass(Store& store, const Pki& pki, Clock::time_point now) {
  auto r = store.findResource("certificates.k8s.io", "v1", "certificatesigningrequests");
  if (!r) return;
  Reply listed = store.list(*r, "", ListOptions{});
  if (listed.code != 200) return;
  for (const json& item : listed.body.value("items", json::array())) {
    const std::string signer = text(item, {"spec", "signerName"});
    if (signer != kServing && signer != kKubeletClient && signer != kClient) continue;
    if (!hasTrue(item, "Approved") || hasTrue(item, "Denied") || hasTrue(item, "Failed") ||
        !text(item, {"status", "certificate"}).empty()) {
      continue;
    }
    json next = item;
    json& status = next["status"];
    if (!status.is_object()) status = json::object();
    auto issued = sign(item, pki, now);
    if (issued) {
      status["certificate"] = encodeBase64(*issued);
    } else {
      if (!status.contains("conditions") || !status["conditions"].is_array()) {
        status["conditions"] = json::array();
      }
      status["conditions"].push_back({{"type", "Failed"},
                                      {"status", "True"},
                                      {"reason", "SignerValidationFailure"},
                                      {"message", issued.error().message()},
                                      {"lastUpdateTime", timeText(now)}});
    }
    // A conflict (the object changed meanwhile) is retried on the next pass.
    (void)store.update(*r, "", text(item, {"metadata", "name"}), std::move(next), "status");
  }
}

}  // namespace ekco::kubesim::csr
