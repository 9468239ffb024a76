#include "tests/kubesim/features/exec_run.h"

#include "base/clock.h"
#include "base/os/process.h"

namespace ekco::kubesim {

ExecReply runExecCommand(const ExecReply& entry, const std::vector<std::string>& command) {
  static const base::SystemClock clock;
  base::BoostProcessRunner runner(clock);
  base::ProcessRequest request{.argv = command, .inherit_env = true, .env = {}};
  for (const auto& [k, v] : entry.run_env) request.env[k] = v;
  request.timeout = entry.run_timeout;
  request.kill_grace = std::chrono::seconds(1);
  ExecReply reply;
  auto ran = runner.run(request);
  if (!ran) {
    reply.exit_code = ran.error().code() == base::ErrorCode::kNotFound ? 127 : 126;
    reply.stderr_data = "kubesim exec: " + ran.error().message() + "\n";
    return reply;
  }
  reply.stdout_data = std::move(ran->stdout_data);
  reply.stderr_data = std::move(ran->stderr_data);
  if (ran->timed_out) {
    reply.exit_code = 124;
  } else if (ran->term_signal != 0) {
    reply.exit_code = 128 + ran->term_signal;
  } else {
    reply.exit_code = ran->exit_code;
  }
  return reply;
}

}  // namespace ekco::kubesim
