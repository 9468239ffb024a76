#include "agent/cli/agent_cmd.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <ostream>
#include <thread>

#include "agent/edge/command_env.h"
#include "base/clock.h"
#include "base/log/log.h"
#include "base/os/thread.h"

namespace ekco::agent {

namespace {

// Restores the signal mask when the command returns (tests run it in-process).
class SignalMask {
 public:
  explicit SignalMask(const sigset_t& block) { pthread_sigmask(SIG_BLOCK, &block, &old_); }
  ~SignalMask() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalMask(const SignalMask&) = delete;
  SignalMask& operator=(const SignalMask&) = delete;

 private:
  sigset_t old_{};
};

}  // namespace

int runAgentCommand(const Config& config, const std::string& config_source,
                    const AgentCommandArgs& args, const CliEnv& env) {
  auto node = resolveNodeName(args.node_name, envValue(env.environment, "NODE_NAME"), hostName());
  if (!node) {
    *env.err << "error: " << node.error().message() << "\n";
    return kExitUsage;
  }
  AgentOptions options;
  options.config = config;
  options.config_source = config_source;
  options.kubeconfig = args.kubeconfig;
  options.node_name = *node;
  options.host_root = args.host_root.empty() ? "/" : args.host_root;
  options.socket_path = args.socket;
  options.dry_run = args.dry_run;
  options.env = kubeEnvironment(env.environment);
  options.working_dir = workingDir();

  // Every thread the agent starts inherits this mask, so only the waiter below sees the signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  SignalMask mask(signals);

  base::SystemClock clock;
  auto agent = Agent::create(std::move(options), clock);
  if (!agent) {
    *env.err << "error: " << agent.error().message() << "\n";
    return kExitFailure;
  }
  std::atomic<bool> done{false};
  std::thread waiter = base::startThread("signals", [&] {
    while (!done.load()) {
      const timespec wait{0, 200'000'000};
      const int sig = sigtimedwait(&signals, nullptr, &wait);
      if (sig > 0) {
        base::logInfo("signal received", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
        (*agent)->requestStop();
        return;
      }
    }
  });
  const int rc = (*agent)->run();
  done.store(true);
  waiter.join();
  return rc;
}

}  // namespace ekco::agent
