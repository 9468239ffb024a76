// Throw-away PKI for the test API server: a CA, a serving certificate for 127.0.0.1/localhost
// and an admin client certificate (CN=kubernetes-admin, O=system:masters), all generated at
// start with OpenSSL 3, EC P-256 keys, valid for ten days.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace ekco::kubesim {

struct Pki {
  std::string ca_cert_pem{};
  std::string ca_key_pem{};
  std::string server_cert_pem{};
  std::string server_key_pem{};
  std::string client_cert_pem{};
  std::string client_key_pem{};
};

[[nodiscard]] base::Result<Pki> generatePki();

// Standard base64 with padding, no line breaks (kubeconfig "*-data" fields).
std::string base64Encode(std::string_view data);

// The kubeconfig text: one cluster, one user with inline certificate data, current-context set.
std::string renderKubeconfig(const Pki& pki, std::string_view server_url);
// The same cluster, with a user that authenticates with a bearer token.
std::string renderTokenKubeconfig(const Pki& pki, std::string_view server_url,
                                  std::string_view user_name, std::string_view token);

}  // namespace ekco::kubesim
