#include "demo/api_address_move.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/features/api_address/kubeconfig_server.h"
#include "base/clock.h"
#include "base/os/process.h"
#include "bench/bench_support.h"
#include "kube/decode/timestamp.h"
#include "tests/fakes/systemd_bus.h"
#include "tests/kubesim/server/pki.h"

namespace ekco::demo {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr const char* kHaproxy = "/usr/sbin/haproxy";
constexpr const char* kNewServer = "https://localhost:6444";
// A token rather than a client certificate: the agents' certificate checks would otherwise
// report (and renew) the nodes' kubeconfig certificates, which kubesim's short-lived PKI signs.
constexpr const char* kAdminToken = "ekco-demo-kubeadm-admin-token";

std::string serverOf(const fs::path& file) {
  auto servers =
      agent::api_address::kubeconfigServers(bench::readFile(file), file.filename().string());
  return servers ? servers->front() : servers.error().message();
}

}  // namespace

struct ApiAddressMove::Impl {
  fs::path work;
  std::vector<MoveNode> primaries;
  base::SystemClock clock;
  std::string ca_pem;

  // openssl in `dir`; what went wrong, or "".
  std::string openssl(std::vector<std::string> args, const fs::path& dir) {
    args.insert(args.begin(), "openssl");
    base::BoostProcessRunner runner(clock);
    auto r = runner.run({.argv = args, .working_dir = dir.string(), .timeout = 60s});
    if (!r) return r.error().message();
    if (r->exit_code != 0) return base::formatArgv(args) + ": " + r->stderr_data;
    return "";
  }

  // The CA in `work`, copied into each primary's pki/; each primary's apiserver pair signed by
  // it, naming kubeadm's names and the primary's address (RSA 2048, as kubeadm makes them).
  std::string makePki() {
    const fs::path ca_dir = work / "ca";
    fs::create_directories(ca_dir);
    std::string why = openssl(
        {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
         "-subj", "/CN=kubernetes", "-days", "3650", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign"},
        ca_dir);
    if (!why.empty()) return why;
    ca_pem = bench::readFile(ca_dir / "ca.crt");
    for (const MoveNode& p : primaries) {
      const fs::path pki = p.root / "etc/kubernetes/pki";
      fs::create_directories(pki);
      fs::copy_file(ca_dir / "ca.crt", pki / "ca.crt", fs::copy_options::overwrite_existing);
      fs::copy_file(ca_dir / "ca.key", pki / "ca.key", fs::copy_options::overwrite_existing);
      std::ofstream(pki / "apiserver.ext")
          << "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
             "basicConstraints=critical,CA:FALSE\nauthorityKeyIdentifier=keyid\n"
             "subjectAltName=DNS:"
          << p.name
          << ",DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1,IP:"
          << p.ip << "\n";
      for (const auto& args : std::vector<std::vector<std::string>>{
               {"genrsa", "-traditional", "-out", "apiserver.key", "2048"},
               {"req", "-new", "-key", "apiserver.key", "-subj", "/CN=kube-apiserver", "-out",
                "apiserver.csr"},
               {"x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "365", "-extfile", "apiserver.ext", "-out",
                "apiserver.crt"}}) {
        why = openssl(args, pki);
        if (!why.empty()) return why;
      }
      fs::remove(pki / "apiserver.csr");
      fs::remove(pki / "apiserver.ext");
    }
    return "";
  }

  // A kubeconfig at `server` trusting the cluster CA, authenticating with kAdminToken.
  std::string kubeconfig(const std::string& server) const {
    return kubesim::renderTokenKubeconfig({.ca_cert_pem = ca_pem}, server, "admin", kAdminToken);
  }
};

std::unique_ptr<ApiAddressMove> ApiAddressMove::prepare(const fs::path& work,
                                                        const std::vector<MoveNode>& primaries,
                                                        std::string& why) {
  std::unique_ptr<ApiAddressMove> move(new ApiAddressMove());
  move->impl_ = std::make_unique<Impl>();
  move->impl_->work = work;
  move->impl_->primaries = primaries;
  why = move->impl_->makePki();
  if (!why.empty()) return nullptr;
  return move;
}

ApiAddressMove::~ApiAddressMove() = default;

std::vector<kubesim::ApiserverListener> ApiAddressMove::apiservers() const {
  std::vector<kubesim::ApiserverListener> out;
  for (const MoveNode& p : impl_->primaries) {
    const fs::path pki = p.root / "etc/kubernetes/pki";
    out.push_back({.address = p.ip,
                   .port = 6443,
                   .serving_cert_file = (pki / "apiserver.crt").string(),
                   .serving_key_file = (pki / "apiserver.key").string()});
  }
  return out;
}

kubesim::TokenUser ApiAddressMove::adminToken() const {
  return {.token = kAdminToken, .user = "kubernetes-admin", .groups = {"system:masters"}};
}

void ApiAddressMove::writeHostFiles(const MoveNode& node) const {
  const fs::path k8s = node.root / "etc/kubernetes";
  fs::create_directories(k8s);
  const std::string first = "https://" + impl_->primaries.front().ip + ":6443";
  std::ofstream(k8s / "kubelet.conf") << impl_->kubeconfig(first);
  if (node.primary) {
    std::ofstream(k8s / "admin.conf") << impl_->kubeconfig(first);
    fs::create_directories(k8s / "manifests");
    std::ofstream(k8s / "manifests/kube-apiserver.yaml")
        << kubesim::kubeApiserverManifest(node.ip, 6443);
  }
  fs::create_directories(node.root / "etc/systemd/system");
  std::ofstream(node.root / "etc/systemd/system/kubelet.service")
      << "[Unit]\nDescription=kubelet\n[Service]\nExecStart=/usr/bin/kubelet\n";
}

void ApiAddressMove::run(const Run& r) {
  const MoveNode& cp1 = r.nodes.front();
  if (!fs::exists(kHaproxy)) {
    r.say("HAProxy is not installed (scripts/setup installs it): no load balancer to move onto");
    return;
  }
  // systemd and kubelet on every node.
  struct Host {
    const MoveNode* node;
    std::unique_ptr<fakes::SystemdBus> bus;
    // Until the bus is stopped here: a Ctrl-C meanwhile kills its processes (the demo's cleanup
    // runs on the signal thread and exits; dbus-daemon has left the demo's process group).
    std::shared_ptr<std::atomic<bool>> running = std::make_shared<std::atomic<bool>>(true);
    std::jthread kubelet;
  };
  std::vector<Host> hosts;
  // On every way out of here the buses are stopped by their destructors: the cleanup hooks must
  // not kill those processes' ids again later.
  struct Stopped {
    std::vector<Host>& hosts;
    ~Stopped() {
      for (Host& h : hosts) h.running->store(false);
    }
  } stopped{hosts};
  for (const MoveNode& n : r.nodes) {
    Host h{.node = &n, .bus = std::make_unique<fakes::SystemdBus>(), .kubelet = {}};
    const std::string failed =
        h.bus->start({.root = n.root.string(),
                      .work_dir = (impl_->work / ("bus-" + n.name)).string(),
                      .unit_dir = (n.root / "etc/systemd/system").string(),
                      .mock_template = (r.source / "tests/units/systemd_mock.py").string()});
    bench::g_children.onCleanup(
        [running = h.running, mock = h.bus->mockPid(), daemon = h.bus->daemonPid()] {
          if (!running->exchange(false)) return;
          if (mock > 0) ::kill(mock, SIGKILL);
          if (daemon > 0) ::kill(daemon, SIGKILL);
        });
    if (!failed.empty()) {
      h.running->store(false);  // stopped by its destructor, now
      r.problem("systemd for " + n.name + ": " + failed);
      return;
    }
    hosts.push_back(std::move(h));
  }
  for (Host& h : hosts) {
    h.kubelet = std::jthread([&h, api = r.api](std::stop_token stop) {
      std::size_t seen = 0;
      while (!stop.stop_requested()) {
        const std::size_t restarts = h.bus->calls("RestartUnit").size();
        if (restarts > seen) {
          seen = restarts;
          std::this_thread::sleep_for(300ms);  // kubelet starting
          (void)api->put(kubesim::nodeLeaseObject(
              h.node->name, kube::formatRfc3339Micro(std::chrono::system_clock::now())));
        }
        std::this_thread::sleep_for(50ms);
      }
    });
  }
  r.say(
      fmt::format("systemd on each of {} nodes (a mock on a private D-Bus), its kubelet renewing "
                  "the node's Lease after each restart; kubeconfigs at {}",
                  r.nodes.size(), serverOf(cp1.root / "etc/kubernetes/kubelet.conf")));
  // The load balancer: HAProxy from the config cp-1's agent keeps.
  const fs::path cfg = cp1.root / "etc/haproxy/haproxy.cfg";
  const std::string haproxy_log = (impl_->work / "haproxy.log").string();
  const pid_t haproxy = bench::g_children.spawn({kHaproxy, "-db", "-f", cfg.string()}, haproxy_log);
  if (haproxy <= 0) {
    r.problem("cannot start HAProxy");
    return;
  }
  base::BoostProcessRunner runner(impl_->clock);
  const bool lb_up = bench::eventually(
      [&] {
        auto got =
            runner.run({.argv = {"curl", "-sS", "--insecure", "https://127.0.0.1:6444/readyz"},
                        .timeout = 5s});
        return got && got->exit_code == 0;
      },
      20s, 200ms);
  // Ours: another HAProxy on 6444 (a kURL host's) would answer while ours exited.
  if (!lb_up || !bench::g_children.running(haproxy)) {
    r.problem("HAProxy does not answer at 127.0.0.1:6444: " + bench::readFile(haproxy_log));
    return;
  }
  r.say("HAProxy runs cp-1's /etc/haproxy/haproxy.cfg: 127.0.0.1:6444 -> the live apiservers");

  // The command, its output said as it comes.
  std::vector<std::string> args = {
      r.ekco,   "change-load-balancer", "--server",        kNewServer,  "--internal", "--config",
      r.config, "--host-root",          cp1.root.string(), "--timeout", "3m"};
  for (const std::string& e : r.exclude) {
    args.push_back("--exclude");
    args.push_back(e);
  }
  r.say(fmt::format(
      "on cp-1: ekco change-load-balancer --server {} --internal{}", kNewServer,
      r.exclude.empty() ? "" : fmt::format(" --exclude {}", fmt::join(r.exclude, " "))));
  const fs::path out = impl_->work / "change-load-balancer.out";
  const pid_t pid = bench::g_children.spawn(args, out.string());
  if (pid <= 0) {
    r.problem("cannot start ekco change-load-balancer");
    return;
  }
  std::size_t said = 0;
  std::string result;  // its `Result:` line
  const auto sayNew = [&] {
    const std::string text = bench::readFile(out);
    std::size_t end = 0;
    while ((end = text.find('\n', said)) != std::string::npos) {
      const std::string line = text.substr(said, end - said);
      said = end + 1;
      // The plan's numbered lines and the configuration line are skipped: the steps follow.
      if (line.starts_with("  ") || line.starts_with("time=")) continue;
      r.say("  | " + line);
      if (line.starts_with("Result: ")) result = line;
    }
  };
  const auto deadline = std::chrono::steady_clock::now() + 200s;
  bool killed = false;
  while (bench::g_children.running(pid)) {
    if (!killed && std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);  // reaped by running() a turn later
      killed = true;
      r.problem("ekco change-load-balancer did not end within 200 s");
    }
    sayNew();
    std::this_thread::sleep_for(100ms);
  }
  sayNew();
  if (result != "Result: success") {
    r.problem("the move did not succeed: " + (result.empty() ? "no result" : result));
  }

  // What changed.
  std::vector<std::string> moved;
  for (const MoveNode& n : r.nodes) {
    std::vector<std::string> files = {"kubelet.conf"};
    if (n.primary) files.push_back("admin.conf");
    bool all = true;
    for (const std::string& f : files) {
      const std::string server = serverOf(n.root / "etc/kubernetes" / f);
      if (server != kNewServer) {
        r.problem(n.name + ": " + f + " points at " + server);
        all = false;
      }
    }
    if (all) moved.push_back(n.name);
  }
  r.say(fmt::format("kubelet.conf (and admin.conf on the primaries) now at {} on {}", kNewServer,
                    fmt::join(moved, ", ")));
  std::vector<std::string> restarts;
  for (const Host& h : hosts) {
    const std::size_t n = h.bus->calls("RestartUnit").size();
    restarts.push_back(fmt::format("{} {}", h.node->name, n));
    if (n != 1) r.problem(fmt::format("{}: kubelet restarted {} times", h.node->name, n));
  }
  r.say(fmt::format("kubelet restarts (RestartUnit kubelet.service over D-Bus): {}",
                    fmt::join(restarts, ", ")));
  for (const MoveNode& n : r.nodes) {
    if (!n.primary) continue;
    const fs::path pki = n.root / "etc/kubernetes/pki";
    auto verified =
        runner.run({.argv = {"openssl", "verify", "-CAfile", (pki / "ca.crt").string(),
                             "-verify_hostname", "localhost", (pki / "apiserver.crt").string()},
                    .timeout = 30s});
    const bool ok = verified && verified->exit_code == 0;
    r.say(n.name +
          ": apiserver.crt names localhost, re-signed by the cluster CA (`openssl verify "
          "-verify_hostname localhost`: " +
          (ok ? "OK" : "FAILED") + ")");
    if (!ok) r.problem(n.name + ": apiserver.crt does not verify for localhost");
  }
  for (Host& h : hosts) {
    h.kubelet.request_stop();
    h.kubelet.join();
    h.bus->stop();
  }
}

}  // namespace ekco::demo
