#include "pki/csr.h"

#include <arpa/inet.h>
#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <memory>

#include "pki/openssl_ptr.h"

namespace ekco::pki {

namespace {

using detail::PkeyPtr;
using X509ReqPtr = std::unique_ptr<X509_REQ, detail::Deleter<X509_REQ, X509_REQ_free>>;

void freeExtensions(STACK_OF(X509_EXTENSION) * exts) {
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
}
using ExtensionsPtr = std::unique_ptr<STACK_OF(X509_EXTENSION),
                                      detail::Deleter<STACK_OF(X509_EXTENSION), freeExtensions>>;
void freeNames(GENERAL_NAMES* names) { GENERAL_NAMES_free(names); }
using NamesPtr = std::unique_ptr<GENERAL_NAMES, detail::Deleter<GENERAL_NAMES, freeNames>>;

std::string asn1Text(const ASN1_STRING* s) {
  if (s == nullptr) return {};
  unsigned char* utf8 = nullptr;
  const int n = ASN1_STRING_to_UTF8(&utf8, s);
  if (n < 0 || utf8 == nullptr) return {};
  std::string out(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(n));
  OPENSSL_free(utf8);
  return out;
}

// The bytes of an IA5String SAN (dNSName, rfc822Name, URI) as they are.
std::string ia5Text(const ASN1_IA5STRING* s) {
  if (s == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                     static_cast<std::size_t>(ASN1_STRING_length(s)));
}

std::string keyType(const EVP_PKEY* key) {
  switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_RSA:
    case EVP_PKEY_RSA_PSS:
      return "RSA";
    case EVP_PKEY_EC:
      return "EC";
    case EVP_PKEY_ED25519:
      return "ED25519";
    case EVP_PKEY_ED448:
      return "ED448";
    default:
      break;
  }
  const char* name = OBJ_nid2sn(EVP_PKEY_get_base_id(key));
  return name != nullptr ? name : "unknown";
}

std::string otherKind(int type) {
  switch (type) {
    case GEN_OTHERNAME:
      return "otherName";
    case GEN_X400:
      return "x400Address";
    case GEN_DIRNAME:
      return "directoryName";
    case GEN_EDIPARTY:
      return "ediPartyName";
    case GEN_RID:
      return "registeredID";
    default:
      return "unknown";
  }
}

}  // namespace

std::string CertificateRequest::subjectText() const {
  std::string out;
  for (const auto& [key, value] : subject) {
    if (!out.empty()) out += ", ";
    out += key + "=" + value;
  }
  return out;
}

base::Result<CertificateRequest> parseCertificateRequest(std::string_view pem,
                                                         std::string_view source) {
  const std::string where(source);
  auto fail = [&](std::string_view what) {
    ERR_clear_error();  // OpenSSL's queue is per thread: leave nothing for the next caller
    return base::Error(where + ": " + std::string(what), base::ErrorCode::kParse);
  };
  if (pem.empty()) return fail("empty certificate request");
  detail::BioPtr bio = detail::readBio(pem);
  if (!bio) return fail("certificate request too large");
  X509ReqPtr req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  if (!req) return fail("not a PEM certificate request");

  CertificateRequest out;
  // (1) The public key, and the proof that the requester holds its private key.
  EVP_PKEY* key = X509_REQ_get0_pubkey(req.get());
  if (key == nullptr) return fail("unreadable public key");
  out.key_type = keyType(key);
  if (X509_REQ_verify(req.get(), key) != 1) return fail("the request's signature does not verify");

  // (2) The subject, attribute by attribute.
  const X509_NAME* subject = X509_REQ_get_subject_name(req.get());
  const int entries = subject != nullptr ? X509_NAME_entry_count(subject) : 0;
  for (int i = 0; i < entries; ++i) {
    const X509_NAME_ENTRY* entry = X509_NAME_get_entry(subject, i);
    const ASN1_OBJECT* object = X509_NAME_ENTRY_get_object(entry);
    const int nid = OBJ_obj2nid(object);
    std::string key_name;
    if (nid != NID_undef && OBJ_nid2sn(nid) != nullptr) {
      key_name = OBJ_nid2sn(nid);
    } else {
      char oid[80] = {};
      OBJ_obj2txt(oid, sizeof(oid), object, 1);
      key_name = oid;
    }
    out.subject.emplace_back(std::move(key_name), asn1Text(X509_NAME_ENTRY_get_data(entry)));
  }

  // (3) The subjectAltNames, from the extensionRequest attribute.
  ExtensionsPtr exts(X509_REQ_get_extensions(req.get()));
  ERR_clear_error();  // a request without extensions leaves an error queued
  const int count = exts ? sk_X509_EXTENSION_num(exts.get()) : 0;
  for (int i = 0; i < count; ++i) {
    X509_EXTENSION* ext = sk_X509_EXTENSION_value(exts.get(), i);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(ext)) != NID_subject_alt_name) continue;
    NamesPtr names(static_cast<GENERAL_NAMES*>(X509V3_EXT_d2i(ext)));
    if (!names) return fail("unreadable subjectAltName extension");
    for (int j = 0; j < sk_GENERAL_NAME_num(names.get()); ++j) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), j);
      switch (name->type) {
        case GEN_DNS:
          out.dns_names.push_back(ia5Text(name->d.dNSName));
          break;
        case GEN_EMAIL:
          out.emails.push_back(ia5Text(name->d.rfc822Name));
          break;
        case GEN_URI:
          out.uris.push_back(ia5Text(name->d.uniformResourceIdentifier));
          break;
        case GEN_IPADD: {
          const ASN1_OCTET_STRING* ip = name->d.iPAddress;
          const int len = ip != nullptr ? ASN1_STRING_length(ip) : 0;
          char text[INET6_ADDRSTRLEN] = {};
          const int family = len == 4 ? AF_INET : len == 16 ? AF_INET6 : 0;
          if (family == 0 ||
              inet_ntop(family, ASN1_STRING_get0_data(ip), text, sizeof(text)) == nullptr) {
            return fail("an IP subjectAltName of " + std::to_string(len) + " bytes (want 4 or 16)");
          }
          out.ip_addresses.emplace_back(text);
          break;
        }
        default:
          out.other_names.push_back(otherKind(name->type));
          break;
      }
    }
  }
  return out;
}

}  // namespace ekco::pki
