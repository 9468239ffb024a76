// kube-controller-manager's csrsigning controller, as kubesim plays it (csr.h: sign,
// signerPass): the signers' request rules, then a certificate from the cluster CA.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tests/kubesim/controllers/csr.h"
#include "tests/kubesim/controllers/csr_fields.h"
#include "tests/kubesim/store/store_support.h"
#include "tests/kubesim/validation/api_time.h"
#include "tests/kubesim/validation/types.h"

namespace ekco::kubesim::csr {

using store_detail::str;

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

bool hasTrue(const json& csr, const std::string& type) {
  for (const json& c : conditions(csr)) {
    if (c.is_object() && c.value("type", "") == type && c.value("status", "") == "True") {
      return true;
    }
  }
  return false;
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

}  // namespace

Result<std::string> sign(const json& csr, const Pki& pki, Clock::time_point now) {
  auto pem = requestPem(csr);
  if (!pem) return pem.error();
  auto req = parseRequest(*pem);
  if (!req) return req.error();
  std::set<std::string> usages;
  for (const json& u : csr["spec"].value("usages", json::array())) {
    if (u.is_string()) usages.insert(u.get<std::string>());
  }
  const std::string signer = str(csr, {"spec", "signerName"});
  if (auto refused = signerRefusal(signer, subjectOf(req->get()), usages)) {
    return Error("invalid certificate request: " + *refused);
  }
  // The CA.
  BioPtr ca_bio = readBio(pki.ca_cert_pem);
  CertPtr ca(PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr));
  BioPtr key_bio = readBio(pki.ca_key_pem);
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
  return bioText(out.get());
}

void signerPass(Store& store, const Pki& pki, Clock::time_point now) {
  auto r = store.findResource("certificates.k8s.io", "v1", "certificatesigningrequests");
  if (!r) return;
  Reply listed = store.list(*r, "", ListOptions{});
  if (listed.code != 200) return;
  for (const json& item : listed.body.value("items", json::array())) {
    const std::string signer = str(item, {"spec", "signerName"});
    if (signer != kServing && signer != kKubeletClient && signer != kClient) continue;
    if (!hasTrue(item, "Approved") || hasTrue(item, "Denied") || hasTrue(item, "Failed") ||
        !str(item, {"status", "certificate"}).empty()) {
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
                                      {"lastUpdateTime", formatApiTime(now, /*micro=*/false)}});
    }
    // A conflict (the object changed meanwhile) is retried on the next pass.
    (void)store.update(*r, "", str(item, {"metadata", "name"}), std::move(next), "status");
  }
}

}  // namespace ekco::kubesim::csr
