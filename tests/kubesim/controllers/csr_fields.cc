#include "tests/kubesim/controllers/csr_fields.h"
#include "tests/kubesim/store/store_support.h"

#include <openssl/crypto.h>
#include <openssl/pem.h>

#include "tests/kubesim/validation/types.h"

namespace ekco::kubesim::csr {

using store_detail::str;

using base::Error;
using base::Result;
using nlohmann::json;

json conditions(const json& csr) {
  const json* status = csr.contains("status") ? &csr["status"] : nullptr;
  if (status == nullptr || !status->is_object()) return json::array();
  json c = status->value("conditions", json::array());
  return c.is_array() ? c : json::array();
}

// certificates.ParseCSR + CheckSignature.
Result<ReqPtr> parseRequest(const std::string& pem) {
  BioPtr bio = readBio(pem);
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
  auto pem = decodeBase64(str(csr, {"spec", "request"}), &error);
  if (!pem) return Error(error);
  return *pem;
}

}  // namespace ekco::kubesim::csr
