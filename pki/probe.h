// What a TLS server presents: the leaf certificate of a handshake, for verifying that a renewed
// serving certificate is the one in use (the apiserver and etcd reload theirs from disk).
#pragma once

#include <chrono>
#include <string>

#include "base/clock.h"
#include "base/result.h"
#include "pki/certificate.h"

namespace ekco::pki {

// Connects to host:port (an IP address or a name), completes a TLS handshake without verifying
// the peer (only its certificate is read; nothing is sent over the connection) and returns the
// certificate it presented. `server_name` is sent as SNI when not empty. kUnavailable when the
// connection or the handshake fails, kTimeout past `timeout` as measured on `clock`'s monotonic
// time (which must outlive the call).
[[nodiscard]] base::Result<Certificate> presentedCertificate(const std::string& host, int port,
                                                             std::chrono::milliseconds timeout,
                                                             const base::Clock& clock,
                                                             const std::string& server_name = "");

}  // namespace ekco::pki
