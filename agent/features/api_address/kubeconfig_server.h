// The API server address in a kubeconfig, read and rewritten as text: `clusters[].cluster.server`
// is found with yaml-cpp and replaced on its own line, so everything else in the file (the CA,
// the embedded client certificate, comments, the order of keys) stays byte for byte.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ekco::agent::api_address {

// Every cluster's server URL, in file order; kParse naming `source` for a file that is not a
// kubeconfig (no clusters, a cluster without a server).
[[nodiscard]] base::Result<std::vector<std::string>> kubeconfigServers(std::string_view text,
                                                                       std::string_view source);

// `text` with every cluster whose server is `from` pointing at `to` instead; the same text when
// none is. kParse naming `source` when a server line cannot be found as yaml-cpp read it (a flow
// mapping, a multi-line scalar: not what kubeadm writes).
[[nodiscard]] base::Result<std::string> withServer(std::string_view text, std::string_view from,
                                                   std::string_view to, std::string_view source);

// ok for what a kubeconfig server may be set to: https://HOST[:PORT] (a DNS name, an IPv4
// address or a bracketed IPv6 one; no path, query, user or whitespace); kInvalidArgument naming
// `what` otherwise.
[[nodiscard]] base::Status checkServerUrl(std::string_view url, std::string_view what);

// The host of such a URL ("localhost", "10.0.0.1", "fd00::1" without brackets).
std::string serverHost(std::string_view url);

}  // namespace ekco::agent::api_address
