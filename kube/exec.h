// pods/exec over WebSocket (the Kubernetes "channel" protocols v5.channel.k8s.io and
// v4.channel.k8s.io): run a command in a container and collect stdout, stderr and the exit
// status. ekco runs `ceph osd ...` in the rook-ceph-tools pod this way during a purge.
//
// libcurl 7.88 has no WebSocket support, so this uses Boost.Beast over OpenSSL. It is the only
// file in the project that talks WebSocket; its TLS setup mirrors the REST transport's (same
// Connection: CA, client certificate, bearer token, insecure flag, tls-server-name).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/result.h"
#include "kube/transport/connection.h"
#include "kube/transport/token_source.h"

namespace ekco::kube {

struct ExecRequest {
  std::string ns{};
  std::string pod{};
  std::string container{};  // empty: the pod's only (or default) container
  std::vector<std::string> command{};
  // Sent on the stdin channel, then stdin is closed (v5) — empty: no stdin stream at all.
  std::string stdin_data{};
  // For the whole exchange: connect, TLS, upgrade, and until the command's status arrives.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

// How the command ended. A non-zero exit is a result, not an Error (as with ProcessRunner).
struct ExecResult {
  int exit_code = 0;
  std::string stdout_data{};
  std::string stderr_data{};
  std::string protocol{};  // the subprotocol the server chose
};

class PodExecutor {
 public:
  virtual ~PodExecutor() = default;
  // Errors: kNotFound (no such pod/container), kPermissionDenied / kUnauthenticated, kTimeout,
  // kUnavailable (connection, TLS or upgrade failure), kParse (a status the protocol does not
  // allow). The command not starting at all ("executable file not found") is an Error too.
  [[nodiscard]] virtual base::Result<ExecResult> exec(const ExecRequest& request) = 0;
};

class WebSocketExecutor final : public PodExecutor {
 public:
  // `tokens` supplies the bearer token when the connection has a token file (the REST client's
  // TokenSource, shared so both see a rotated token); it must outlive the executor. Without
  // it, the connection's fixed token (if any) is used, and a token file is an error.
  explicit WebSocketExecutor(Connection connection, TokenSource* tokens = nullptr)
      : connection_(std::move(connection)), tokens_(tokens) {}
  base::Result<ExecResult> exec(const ExecRequest& request) override;

 private:
  Connection connection_;
  TokenSource* tokens_;
};

// The exec URL path and query: /api/v1/namespaces/NS/pods/POD/exec?command=..&command=..
// &container=C&stdout=true&stderr=true[&stdin=true]. Exposed for tests.
std::string execPath(const ExecRequest& request);

// Reads the v4/v5 error-channel Status into an exit code: Success → 0; Failure with reason
// NonZeroExitCode → the ExitCode cause; any other Failure → an Error carrying its message.
base::Result<int> exitCodeFromStatus(std::string_view status_json);

}  // namespace ekco::kube
