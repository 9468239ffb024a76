// Listening TCP sockets for the agent's servers (the health server's metrics_address, the
// admission webhook's port).
#pragma once

#include <string>

#include "base/os/unique_fd.h"
#include "base/result.h"

namespace ekco::agent {

// A bound, listening TCP socket on `ip` (IPv4 or IPv6; "::" takes IPv4 too, and falls back to
// "0.0.0.0" on a host without IPv6) and `port` (0: any free port, see boundPort). Errors: an
// address that does not parse or a port out of range (kInvalidArgument, naming it); a port in
// use or not permitted ("bind IP:PORT: ...").
[[nodiscard]] base::Result<base::UniqueFd> listenTcp(const std::string& ip, int port);

// The port a TCP socket is bound to; 0 when it cannot be read.
int boundPort(int fd);

}  // namespace ekco::agent
