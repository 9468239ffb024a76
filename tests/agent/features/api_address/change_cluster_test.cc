// `ekco change-load-balancer --internal` on a cluster of real processes (issue 37's proof): three
// primaries and two workers, each with its own host root (a kubeadm PKI on the primaries, its
// apiserver.crt naming the primary's address), a mock systemd on a private D-Bus, a thread as
// kubelet that renews the node's Lease after each restart of kubelet.service, and a real
// `ekco agent` kept running as systemd would (started again when it exits). ekco-kubesim plays
// the three apiservers (one store; each primary's serves that primary's apiserver.crt, read again
// at every handshake); a real HAProxy, from the config cp-1's agent rendered, is the internal load
// balancer. The cluster moves from cp-1's address to https://localhost:<lb>:
//   - run 1: the leader is killed (-9) after the first step, worker-1's agent in the middle of
//     its kubeconfigs step; worker-2 has no kubelet unit, so its step fails: the change stops
//     there, worker-2's files restored, everything before it moved;
//   - run 2, once worker-2's kubelet exists: only worker-2 changes. Each primary's certificate was
//     re-issued once and is served for `localhost` (openssl verifies both), every kubelet
//     restarted once (worker-1's resumed step may restart it a second time).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "agent/features/api_address/change.h"
#include "agent/features/api_address/kubeconfig_server.h"
#include "agent/serve/health_server.h"
#include "base/os/process.h"
#include "kube/decode/timestamp.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/features/certs/kubeadm_pki.h"
#include "tests/agent/process_support.h"
#include "tests/fakes/systemd_bus.h"
#include "tests/kubesim/server/pki.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr const char* kHaproxy = "/usr/sbin/haproxy";

struct ClusterNode {
  std::string name;
  std::string ip;
  bool primary = false;
  fs::path root;
  std::unique_ptr<fakes::SystemdBus> bus;
  std::atomic<bool> has_kubelet{true};
  std::atomic<int> kubelet_delay_ms{200};  // from a restart to the next Lease renewal
  std::jthread kubelet;
  pid_t pid = -1;
  std::optional<Steady::time_point> restart_at;  // when the "systemd" here starts it again
  std::vector<int> exits;                        // exit statuses (-1: killed by a signal)
  std::string socket() const { return root.string() + ".sock"; }
  std::string log() const { return root.string() + ".log"; }
  std::string kubeconfigServer(const std::string& file) const {
    auto s = api_address::kubeconfigServers(
        testing::readWholeFile((root / "etc/kubernetes" / file).string()), file);
    return s ? s->front() : s.error().message();
  }
};

// A port nobody listens on at `ip` now (0 when there is none).
std::uint16_t freePort(const std::string& ip) { return kubesim::freeLoopbackPort(ip).value_or(0); }

class ChangeClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kHaproxy)) GTEST_SKIP() << kHaproxy << " is not installed (scripts/setup)";
    // The agents find their kubeconfig on the host, as from the packages (restored after).
    for (const char* name : {"KUBECONFIG", "KUBERNETES_SERVICE_HOST"}) {
      if (const char* v = ::getenv(name)) saved_env_.emplace_back(name, v);
      ::unsetenv(name);
    }
    for (auto [name, ip, primary] :
         {std::tuple{"cp-1", "127.0.0.11", true}, std::tuple{"cp-2", "127.0.0.12", true},
          std::tuple{"cp-3", "127.0.0.13", true}, std::tuple{"worker-1", "127.0.0.21", false},
          std::tuple{"worker-2", "127.0.0.22", false}}) {
      auto n = std::make_unique<ClusterNode>();
      n->name = name;
      n->ip = ip;
      n->primary = primary;
      n->root = fs::path(dir_.path()) / name;
      fs::create_directories(n->root / "etc/kubernetes");
      if (primary) {
        testing::KubeadmPki pki(n->root);
        pki.make(300);
        pki.apiserverFor(name, ip, 300);
      }
      nodes_.push_back(std::move(n));
    }
    ca_pem_ = testing::readWholeFile((pki(0) / "ca.crt").string());
    ASSERT_NO_FATAL_FAILURE(startApiservers());
    old_ = "https://127.0.0.11:" + std::to_string(port_);
    lb_port_ = freePort("127.0.0.1");
    new_ = "https://localhost:" + std::to_string(lb_port_);
    for (auto& n : nodes_) ASSERT_NO_FATAL_FAILURE(prepareHost(*n));
    std::ofstream(config()) << "leader_election_lease_duration: 3s\n"
                               "leader_election_renew_deadline: 2s\n"
                               "leader_election_retry_period: 500ms\n"
                               "reconcile_interval: 2s\n"
                               // The kubeconfigs carry kubesim's 10-day client certificate,
                               // which a renewal would replace with one kubesim rejects.
                               "rotate_certs: false\n"
                               "disable_reboot_service: true\n"
                               "enable_internal_load_balancer: true\n"
                               "internal_load_balancer_bind: 127.0.0.1:"
                            << lb_port_ << "\n";
    // cp-1 first, so that it leads.
    startAgent(*nodes_[0]);
    ASSERT_TRUE(testing::eventually([&] { return isLeader(*nodes_[0]); }, 30s))
        << testing::readWholeFile(nodes_[0]->log());
    for (std::size_t i = 1; i < nodes_.size(); ++i) startAgent(*nodes_[i]);
    for (auto& n : nodes_) {
      ASSERT_TRUE(testing::eventually([&] { return ready(*n); }, 30s))
          << n->name << ":\n"
          << testing::readWholeFile(n->log());
    }
    // The internal load balancer: HAProxy from the config cp-1's agent rendered.
    const fs::path cfg = nodes_[0]->root / "etc/haproxy/haproxy.cfg";
    ASSERT_TRUE(testing::eventually([&] { return fs::exists(cfg); }, 30s))
        << testing::readWholeFile(nodes_[0]->log());
    haproxy_ =
        testing::spawnLogged({kHaproxy, "-db", "-f", cfg.string()}, dir_.path() + "/haproxy.log");
    ASSERT_TRUE(testing::eventually([&] { return lbAnswers(); }, 20s))
        << testing::readWholeFile(dir_.path() + "/haproxy.log");
  }

  void TearDown() override {
    for (auto& n : nodes_) {
      testing::killAndReap(n->pid);
      // Joined before the server goes: a kubelet thread may be about to renew a Lease.
      n->kubelet.request_stop();
      if (n->kubelet.joinable()) n->kubelet.join();
    }
    testing::killAndReap(haproxy_);
    server_.reset();
    for (const auto& [name, value] : saved_env_) ::setenv(name.c_str(), value.c_str(), 1);
  }

  fs::path pki(std::size_t i) const { return nodes_[i]->root / "etc/kubernetes/pki"; }
  std::string config() const { return dir_.path() + "/config.yaml"; }

  // kubesim as the three primaries' apiservers, all on one port at their own addresses: cp-1's
  // is the main listener.
  void startApiservers() {
    std::vector<json> objects = {kubesim::namespaceObject("kurl"),
                                 kubesim::namespaceObject("kube-node-lease")};
    std::vector<std::string> primaries;
    for (auto& n : nodes_) {
      objects.push_back(kubesim::readyNodeObject(n->name, n->ip, n->primary));
      objects.push_back(kubesim::nodeLeaseObject(
          n->name, kube::formatRfc3339Micro(std::chrono::system_clock::now())));
      if (n->primary) primaries.push_back(n->ip);
    }
    for (int attempt = 0; attempt < 5 && !server_; ++attempt) {
      const std::uint16_t port = freePort("127.0.0.11");
      std::vector<json> with_slice = objects;
      with_slice.push_back(kubesim::kubernetesEndpointSlice("kubernetes", primaries, port));
      kubesim::ServerOptions options{.listen_address = "127.0.0.11",
                                     .port = port,
                                     .out_dir = dir_.path() + "/sim",
                                     .objects = std::move(with_slice),
                                     .serving_cert_file = (pki(0) / "apiserver.crt").string(),
                                     .serving_key_file = (pki(0) / "apiserver.key").string()};
      for (std::size_t i = 1; i < 3; ++i) {
        options.more_apiservers.push_back(
            {.address = nodes_[i]->ip,
             .port = port,
             .serving_cert_file = (pki(i) / "apiserver.crt").string(),
             .serving_key_file = (pki(i) / "apiserver.key").string()});
      }
      auto started = kubesim::Server::start(std::move(options));
      if (started) {
        server_ = std::move(*started);
        port_ = port;
      }
    }
    ASSERT_TRUE(server_) << "kubesim did not start on one port at 127.0.0.11-13";
  }

  // A kubeconfig at `server` trusting the cluster CA, with kubesim's admin credentials.
  std::string kubeconfig(const std::string& server) const {
    kubesim::Pki trust = server_->pki();
    trust.ca_cert_pem = ca_pem_;
    return kubesim::renderKubeconfig(trust, server);
  }

  // kubeadm's files (every kubeconfig at cp-1's address; a primary's controller-manager.conf at
  // its own apiserver), kubelet's unit, systemd and kubelet.
  void prepareHost(ClusterNode& n) {
    const fs::path k8s = n.root / "etc/kubernetes";
    std::ofstream(k8s / "kubelet.conf") << kubeconfig(old_);
    if (n.primary) {
      std::ofstream(k8s / "admin.conf") << kubeconfig(old_);
      const std::string own = "https://" + n.ip + ":" + std::to_string(port_);
      std::ofstream(k8s / "controller-manager.conf") << kubeconfig(own);
      std::ofstream(k8s / "scheduler.conf") << kubeconfig(own);
      fs::create_directories(k8s / "manifests");
      std::ofstream(k8s / "manifests/kube-apiserver.yaml")
          << kubesim::kubeApiserverManifest(n.ip, port_);
    }
    fs::create_directories(n.root / "etc/systemd/system");
    if (n.name != "worker-2") {  // worker-2's kubelet is not there at first
      std::ofstream(n.root / "etc/systemd/system/kubelet.service")
          << "[Service]\nExecStart=/bin/true\n";
    } else {
      n.has_kubelet = false;
    }
    n.bus = std::make_unique<fakes::SystemdBus>();
    ASSERT_EQ(n.bus->start({.root = n.root.string(),
                            .work_dir = dir_.path() + "/bus-" + n.name,
                            .unit_dir = (n.root / "etc/systemd/system").string()}),
              "");
    ClusterNode* raw = &n;
    n.kubelet = std::jthread([this, raw](std::stop_token stop) {
      std::size_t seen = 0;
      while (!stop.stop_requested()) {
        const std::size_t restarts = raw->bus->calls("RestartUnit").size();
        if (restarts > seen) {
          seen = restarts;
          if (raw->has_kubelet) {
            std::this_thread::sleep_for(std::chrono::milliseconds(raw->kubelet_delay_ms.load()));
            (void)server_->put(kubesim::nodeLeaseObject(
                raw->name, kube::formatRfc3339Micro(std::chrono::system_clock::now())));
          }
        }
        std::this_thread::sleep_for(50ms);
      }
    });
  }

  void startAgent(ClusterNode& n) {
    std::vector<std::string> args = {EKCO_BIN,      "agent",   "--config",    config(),
                                     "--node-name", n.name,    "--host-root", n.root.string(),
                                     "--socket",    n.socket()};
    if (!n.primary) args.push_back("--leader-election-candidate=false");
    n.pid = testing::spawnLogged(std::move(args), n.log());
    n.restart_at.reset();
  }

  // systemd's part (Restart=always): an agent that exited is started again after a second.
  void supervise() {
    for (auto& n : nodes_) {
      if (n->pid > 0) {
        int status = 0;
        if (::waitpid(n->pid, &status, WNOHANG) == n->pid) {
          n->exits.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
          n->pid = -1;
          n->restart_at = Steady::now() + 1s;
        }
      } else if (n->restart_at && Steady::now() >= *n->restart_at) {
        startAgent(*n);
      }
    }
  }

  void kill9(ClusterNode& n) {
    ASSERT_GT(n.pid, 0) << n.name;
    ::kill(-n.pid, SIGKILL);  // its group, as systemd's cgroup: a regen-cert child too
  }

  std::optional<json> status(const ClusterNode& n) {
    auto reply = queryHealthSocket(n.socket(), "/status", 2000ms);
    if (!reply || reply->status != 200) return std::nullopt;
    auto parsed = json::parse(reply->body, nullptr, false);
    if (parsed.is_discarded()) return std::nullopt;
    return parsed;
  }
  bool isLeader(const ClusterNode& n) {
    auto s = status(n);
    return s && s->value("is_leader", false) && s->value("ready", false);
  }
  bool ready(const ClusterNode& n) {
    auto s = status(n);
    return s && s->value("ready", false);
  }
  ClusterNode* leader() {
    auto lease = server_->get("leases.coordination.k8s.io", "kurl", "ekco-leader");
    if (!lease) return nullptr;
    const std::string holder = (*lease)["spec"].value("holderIdentity", "");
    for (auto& n : nodes_) {
      if (holder.starts_with(n->name + "_")) return n.get();
    }
    return nullptr;
  }
  // Whether HAProxy forwards to an apiserver (whose certificate does not name localhost yet).
  bool lbAnswers() {
    base::BoostProcessRunner runner(clock_);
    auto r = runner.run({.argv = {"curl", "-sS", "--insecure", new_ + "/readyz"}, .timeout = 10s});
    return r && r->exit_code == 0;
  }

  // The node's answer to its task, parsed.
  std::optional<api_address::NodeResult> answerOf(const ClusterNode& n) {
    auto node = server_->get("nodes", "", n.name);
    if (!node) return std::nullopt;
    const json& a = (*node)["metadata"].value("annotations", json::object());
    auto it = a.find(std::string(api_address::kResultAnnotation));
    if (it == a.end() || !it->is_string()) return std::nullopt;
    auto r = api_address::parseResult(it->get<std::string>());
    return r ? std::optional(*r) : std::nullopt;
  }
  // The steps the ConfigMap's progress shows done, as "step node".
  std::vector<std::string> doneSteps() {
    auto cm = server_->get("configmaps", "kurl", "ekco-api-address");
    if (!cm) return {};
    const json progress =
        json::parse((*cm)["data"].value("progress", std::string("{}")), nullptr, false);
    std::vector<std::string> out;
    if (progress.is_discarded() || !progress.contains("steps")) return out;
    for (const json& s : progress["steps"]) {
      if (s.value("state", "") == "done") {
        out.push_back(s.value("step", "") + " " + s.value("node", ""));
      }
    }
    return out;
  }

  // `ekco change-load-balancer` on cp-1 as a process, while the agents are kept running and
  // `each_turn` runs every 50 ms; its exit status and output.
  std::pair<int, std::string> changeLoadBalancer(const std::function<void()>& each_turn = {}) {
    const std::string out = dir_.path() + "/command-" + std::to_string(++commands_) + ".out";
    const pid_t pid = testing::spawnLogged(
        {EKCO_BIN, "change-load-balancer", "--server", new_, "--internal", "--config", config(),
         "--host-root", nodes_[0]->root.string(), "--timeout", "100s"},
        out);
    int status = 0;
    // Both runs and the set-up stay within ctest's 300 s, so a hang still ends in TearDown.
    const auto deadline = Steady::now() + 110s;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (Steady::now() > deadline) {
        testing::killAndReap(pid);
        ADD_FAILURE() << "change-load-balancer did not end";
        return {-1, testing::readWholeFile(out)};
      }
      supervise();
      if (each_turn) each_turn();
      std::this_thread::sleep_for(50ms);
    }
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, testing::readWholeFile(out)};
  }

  std::string agentLogs() {
    std::string all;
    for (auto& n : nodes_) all += "--- " + n->name + "\n" + testing::readWholeFile(n->log());
    return all;
  }

  testing::TempDir dir_{"ekco-change-cluster"};
  base::SystemClock clock_;
  std::vector<std::unique_ptr<ClusterNode>> nodes_;
  std::string ca_pem_;
  std::unique_ptr<kubesim::Server> server_;
  std::uint16_t port_ = 0;
  std::uint16_t lb_port_ = 0;
  std::string old_, new_;
  pid_t haproxy_ = -1;
  int commands_ = 0;
  std::vector<std::pair<std::string, std::string>> saved_env_;
};

TEST_F(ChangeClusterTest, FivePeersMoveToTheLoadBalancerThroughKillsAndAFailedNode) {
  ClusterNode& cp1 = *nodes_[0];
  ClusterNode& worker1 = *nodes_[3];
  ClusterNode& worker2 = *nodes_[4];
  worker1.kubelet_delay_ms = 3000;  // its kubeconfigs step lasts long enough to be killed in
  const std::string worker2_before =
      testing::readWholeFile((worker2.root / "etc/kubernetes/kubelet.conf").string());

  // Run 1: the leader killed after the first step, worker-1's agent in the middle of its step.
  std::string killed_leader;
  std::string leader_identity;
  bool killed_worker = false;
  auto [code, out] = changeLoadBalancer([&] {
    if (killed_leader.empty() && !doneSteps().empty()) {
      if (ClusterNode* l = leader(); l != nullptr && l->pid > 0) {
        killed_leader = l->name;
        leader_identity = (*server_->get("leases.coordination.k8s.io", "kurl",
                                         "ekco-leader"))["spec"]["holderIdentity"];
        kill9(*l);
      }
    }
    if (!killed_worker && worker1.pid > 0) {
      auto a = answerOf(worker1);
      if (a && a->step == api_address::Step::kKubeconfigs &&
          a->state == api_address::StepState::kRunning) {
        killed_worker = true;
        kill9(worker1);
      }
    }
  });
  ASSERT_EQ(code, 1) << out << agentLogs();
  ASSERT_FALSE(killed_leader.empty()) << out;
  ASSERT_TRUE(killed_worker) << out;
  EXPECT_THAT(out, HasSubstr("Moving the API address from " + old_ + " to " + new_ +
                             " (the internal load balancer)"));
  EXPECT_THAT(out, HasSubstr("Result: worker-2: kubeconfigs: "));
  EXPECT_THAT(out, HasSubstr("restored"));
  // Everything before worker-2 moved; worker-2's files are as they were.
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(nodes_[i]->kubeconfigServer("kubelet.conf"), new_) << nodes_[i]->name;
  }
  EXPECT_EQ(testing::readWholeFile((worker2.root / "etc/kubernetes/kubelet.conf").string()),
            worker2_before);
  // Another agent process leads now.
  auto lease = server_->get("leases.coordination.k8s.io", "kurl", "ekco-leader");
  ASSERT_TRUE(lease);
  EXPECT_NE((*lease)["spec"].value("holderIdentity", ""), leader_identity);

  // Run 2, with worker-2's kubelet there: only worker-2 changes.
  const std::size_t worker2_calls = worker2.bus->logSize();
  ASSERT_EQ(worker2.bus->addMockUnit("kubelet.service"), "");
  worker2.has_kubelet = true;
  std::tie(code, out) = changeLoadBalancer();
  ASSERT_EQ(code, 0) << out << agentLogs();
  EXPECT_THAT(out, HasSubstr("Moving the API address from " + new_ + " to " + new_));
  EXPECT_THAT(out, HasSubstr("kubeconfigs worker-2: done"));
  EXPECT_THAT(out, HasSubstr("\nResult: success\n"));
  // worker-2's agent stops to be started again after its answer, which may be after the command
  // ended: systemd's part goes on until every agent's last start read the new address.
  const auto lastStart = [](const ClusterNode& n) {
    const std::string log = testing::readWholeFile(n.log());
    const auto at = log.rfind("msg=\"agent started\"");
    return at == std::string::npos ? std::string() : log.substr(at, log.find('\n', at) - at);
  };
  EXPECT_TRUE(testing::eventually(
      [&] {
        supervise();
        for (auto& n : nodes_) {
          if (n->pid <= 0 || lastStart(*n).find(" api=" + new_ + " ") == std::string::npos) {
            return false;
          }
        }
        return true;
      },
      20s))
      << agentLogs();

  for (auto& n : nodes_) {
    EXPECT_EQ(n->kubeconfigServer("kubelet.conf"), new_) << n->name;
    if (n->primary) {
      EXPECT_EQ(n->kubeconfigServer("admin.conf"), new_) << n->name;
    }
  }
  // A primary's controller-manager.conf moves only where it used the old address (cp-1's own).
  EXPECT_EQ(cp1.kubeconfigServer("controller-manager.conf"), new_);
  EXPECT_EQ(nodes_[1]->kubeconfigServer("controller-manager.conf"),
            "https://127.0.0.12:" + std::to_string(port_));
  // One kubelet restart per node (worker-1's resumed step may have restarted it again; worker-2
  // once since its kubelet exists).
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(nodes_[i]->bus->calls("RestartUnit").size(), 1U) << nodes_[i]->name;
  }
  EXPECT_GE(worker1.bus->calls("RestartUnit").size(), 1U);
  EXPECT_LE(worker1.bus->calls("RestartUnit").size(), 2U);
  EXPECT_EQ(worker2.bus->calls("RestartUnit", worker2_calls).size(), 1U);
  // Each agent went on from its new kubeconfig: it stopped to be started again (status 1) once,
  // after its kubeconfigs moved (not in run 2 where they had already; worker-1's agent not when
  // it was killed after its files were written: its next start read the new address), and its
  // last start connected through the load balancer.
  for (auto& n : nodes_) {
    const auto stops = std::count(n->exits.begin(), n->exits.end(), 1);
    if (n.get() == &worker1) {
      EXPECT_LE(stops, 1);
    } else {
      EXPECT_EQ(stops, 1) << n->name;
    }
    EXPECT_THAT(lastStart(*n), HasSubstr(" api=" + new_ + " ")) << n->name;
  }
  // Each primary's certificate: re-issued once, names localhost, and is what its apiserver
  // serves.
  base::BoostProcessRunner runner(clock_);
  for (std::size_t i = 0; i < 3; ++i) {
    int backups = 0;
    for (const auto& e : fs::directory_iterator(pki(i) / ".ekco-backup")) {
      backups += e.is_directory();
    }
    EXPECT_EQ(backups, 1) << nodes_[i]->name;
    auto verified =
        runner.run({.argv = {"openssl", "verify", "-CAfile", (pki(i) / "ca.crt").string(),
                             "-verify_hostname", "localhost", (pki(i) / "apiserver.crt").string()},
                    .timeout = 30s});
    ASSERT_TRUE(verified);
    EXPECT_EQ(verified->exit_code, 0) << verified->stdout_data << verified->stderr_data;
    auto served = runner.run(
        {.argv = {"openssl", "s_client", "-connect", nodes_[i]->ip + ":" + std::to_string(port_),
                  "-CAfile", (pki(i) / "ca.crt").string(), "-verify_hostname", "localhost",
                  "-verify_return_error"},
         .timeout = 30s});
    ASSERT_TRUE(served);
    EXPECT_EQ(served->exit_code, 0) << served->stdout_data << served->stderr_data;
    EXPECT_THAT(served->stdout_data, HasSubstr("Verify return code: 0 (ok)"));
  }
}

}  // namespace
}  // namespace ekco::agent
