// ekco-kubesim: pods/exec over WebSocket with scripted replies.
#include "tests/kubesim/features/exec_run.h"
#include "tests/kubesim/server/server_impl.h"

namespace ekco::kubesim {

using namespace server_detail;  // NOLINT(google-build-using-namespace): this server's internals

// The exec exchange in protocol order (command and pod, subprotocol, handshake, output
// channels, status, close); kept whole.
int Server::Impl::serveExec(SslStream& stream, Request& req, const ParsedRoute& route,
                            const Query& query, const std::function<void(int)>& answering) {
  std::vector<std::string> command;
  for (const auto& [k, v] : query) {
    if (k == "command") command.push_back(v);
  }
  auto pods = store_.findResource("", "v1", "pods");
  Reply pod = store_.get(*pods, route.ns, route.name);
  std::string container = queryValue(query, "container");
  if (pod.code == 200 && container.empty()) {
    const json& containers =
        pod.body.value("spec", json::object()).value("containers", json::array());
    if (!containers.empty()) container = containers[0].value("name", "");
  }
  std::string offered(req[http::field::sec_websocket_protocol]);
  std::string protocol;
  for (const char* p : {"v5.channel.k8s.io", "v4.channel.k8s.io"}) {
    if (offered.find(p) != std::string::npos) {
      protocol = p;
      break;
    }
  }
  if (pod.code != 200 || !websocket::is_upgrade(req) || protocol.empty() || command.empty()) {
    Reply reply = pod.code != 200 ? pod
                  : command.empty()
                      ? statusReply(400, "BadRequest", "you must specify at least 1 command")
                      : statusReply(400, "BadRequest",
                                    "kubesim serves exec only as a WebSocket upgrade with "
                                    "v5.channel.k8s.io or v4.channel.k8s.io");
    answering(reply.code);
    try {
      writeReply(stream, req, reply, false);
    } catch (const std::exception&) {
    }
    return reply.code;
  }
  ExecReply answer;
  {
    std::lock_guard lock(mu_);
    exec_log_.push_back(
        ExecRecord{.ns = route.ns, .pod = route.name, .container = container, .command = command});
    for (const ExecReply& scripted : options_.exec_script) {
      if (scripted.run && route.name.rfind(scripted.pod_prefix, 0) != 0) continue;
      if (scripted.command_prefix.size() <= command.size() &&
          std::equal(scripted.command_prefix.begin(), scripted.command_prefix.end(),
                     command.begin())) {
        answer = scripted;
        break;
      }
    }
  }
  // Run mode: the command runs for real, outside the lock (exec_run.h).
  if (answer.run) answer = runExecCommand(answer, command);
  answering(101);
  try {
    websocket::stream<SslStream&> ws(stream);
    ws.set_option(websocket::stream_base::decorator([protocol](websocket::response_type& res) {
      res.set(http::field::sec_websocket_protocol, protocol);
    }));
    ws.accept(req);
    ws.binary(true);
    // In frames of at most 32 KiB, as kubelet relays a command's output while it runs.
    auto send = [&](char channel, std::string_view data) {
      constexpr std::size_t kFrameData = 32 * 1024;
      for (std::size_t at = 0; at < data.size(); at += kFrameData) {
        std::string frame(1, channel);
        frame += data.substr(at, kFrameData);
        ws.write(net::buffer(frame));
      }
    };
    if (!answer.stdout_data.empty()) send(1, answer.stdout_data);
    if (!answer.stderr_data.empty()) send(2, answer.stderr_data);
    json status;
    if (answer.exit_code == 0) {
      status = {{"metadata", json::object()}, {"status", "Success"}};
    } else {
      status = {{"metadata", json::object()},
                {"status", "Failure"},
                {"message",
                 "command terminated with non-zero exit code: error executing "
                 "command [" +
                     command[0] + "], exit code " + std::to_string(answer.exit_code)},
                {"reason", "NonZeroExitCode"},
                {"details",
                 {{"causes",
                   {{{"reason", "ExitCode"}, {"message", std::to_string(answer.exit_code)}}}}}}};
    }
    send(3, status.dump());
    ws.close(websocket::close_code::normal);
  } catch (const std::exception&) {
    // The client went away.
  }
  return 101;
}

}  // namespace ekco::kubesim
