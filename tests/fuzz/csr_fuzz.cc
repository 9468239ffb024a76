// PKCS#10 certificate requests (pki/csr.h): the `spec.request` of every kubelet-serving
// CertificateSigningRequest, written by whoever may create CSRs, goes through
// parseCertificateRequest before ekco decides on it.
//
// The input is tried twice: as PEM text, and as DER bytes put in PEM armor (so mutations reach
// OpenSSL's ASN.1 decoder, not only the PEM reader). Checks: a rejected request gets one line
// starting with its source; an accepted one has a known key type, and every IP SAN is the
// canonical text of an IPv4 or IPv6 address.
#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "pki/certificate.h"
#include "pki/csr.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using ekco::fuzz::check;

void parse(std::string_view pem) {
  auto csr = ekco::pki::parseCertificateRequest(pem, "spec.request");
  if (!csr) {
    ekco::fuzz::checkOneLine(csr.error().message(), "parseCertificateRequest error");
    check(csr.error().message().starts_with("spec.request: "),
          "parseCertificateRequest error does not name its source", csr.error().message());
    return;
  }
  check(!csr->key_type.empty(), "an accepted request without a key type");
  for (const std::string& ip : csr->ip_addresses) {
    unsigned char bytes[16];
    char text[INET6_ADDRSTRLEN];
    const int family = ip.find(':') == std::string::npos ? AF_INET : AF_INET6;
    check(inet_pton(family, ip.c_str(), bytes) == 1, "an IP SAN that is no address", ip);
    check(inet_ntop(family, bytes, text, sizeof(text)) != nullptr && ip == text,
          "an IP SAN not in canonical form", ip);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = ekco::fuzz::asText(data, size);
  parse(text);
  const std::string armored = "-----BEGIN CERTIFICATE REQUEST-----\n" +
                              ekco::pki::base64Encode(text) +
                              "\n-----END CERTIFICATE REQUEST-----\n";
  parse(armored);
  return 0;
}
