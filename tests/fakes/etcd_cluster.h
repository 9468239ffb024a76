// A real 3-member etcd 3.4 cluster with mutual TLS on loopback, for the tests that need one
// (tests/etcd/cluster_test.cc, tests/agent/purge_e2e_test.cc): members on 127.0.0.11-13 (peer
// https://127.0.0.1x:2380, client https://127.0.0.1x:2379), certificates made with the openssl
// CLI in kubeadm's layout under a temp host root (<hostRoot()>/etc/kubernetes/pki/etcd/: ca.crt,
// server.*, peer.*, healthcheck-client.*). The members need fixed addresses, so clusters of
// concurrent tests (ctest --parallel, other build directories) take turns: an flock held from
// start() until stop().
//
// It does not depend on GoogleTest (the demo, `ekco-demo`, runs one too): failures are Results.
//
//   fakes::EtcdCluster cluster;                  // a member of the test fixture
//   auto started = cluster.start();              // in SetUp: healthy, 3 members listed
//   ASSERT_TRUE(started) << started.error().message();
//   cluster.kill(2);                             // SIGKILL one member
//   cluster.memberList(cluster.endpoint(0));     // `etcdctl member list`
//   cluster.stop();                              // in TearDown (the destructor too)
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/os/process.h"
#include "base/result.h"
#include "etcd/client.h"
#include "etcd/removal.h"
#include "hostfs/local_host_fs.h"

extern char** environ;

namespace ekco::fakes {

inline constexpr const char* kEtcdIps[3] = {"127.0.0.11", "127.0.0.12", "127.0.0.13"};

class EtcdCluster {
 public:
  using Steady = std::chrono::steady_clock;

  // The members' names (kubeadm names them after their nodes).
  explicit EtcdCluster(std::array<std::string, 3> names = {"node-a", "node-b", "node-c"})
      : names_(std::move(names)) {}
  ~EtcdCluster() { stop(); }
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  static double secondsSince(Steady::time_point start) {
    return std::chrono::duration<double>(Steady::now() - start).count();
  }

  static std::string readFile(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Takes the lock, makes the certificates, starts the members and waits (up to 60 s) until
  // every member answers /health and three members are listed. An error says what failed (with
  // the members' logs when they did not become healthy); stop() cleans up either way.
  [[nodiscard]] base::Status start() {
    namespace fs = std::filesystem;
    using base::Error;
    const std::string lock = (fs::temp_directory_path() / "ekco-etcd-cluster-test.lock").string();
    lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lock_fd_ < 0) return Error("open " + lock + ": " + std::strerror(errno));
    const auto waited = Steady::now();
    while (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      if (secondsSince(waited) > 240) return Error("another etcd cluster (test) holds " + lock);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (int i = 0; i < 3; ++i) {
      for (int port : {etcd::kPeerPort, etcd::kClientPort}) {
        const std::string problem = portProblem(kEtcdIps[i], port);
        if (!problem.empty()) return Error(problem);
      }
    }
    std::string tmpl = (fs::temp_directory_path() / "ekco-etcd-test.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      return Error("mkdtemp: " + std::string(std::strerror(errno)));
    dir_ = tmpl;
    pki_ = hostRoot() + "/etc/kubernetes/pki/etcd";
    fs::create_directories(pki_);
    fs::create_directories(dir_ + "/work");

    const auto certs_start = Steady::now();
    EKCO_TRY(makeCertificates());
    if (verbose_) std::cout << "[timing] certificates: " << secondsSince(certs_start) << " s\n";

    const auto started = Steady::now();
    for (int i = 0; i < 3; ++i) EKCO_TRY(startMember(i));

    auto root = hostfs::LocalHostFs::open(hostRoot(), clock_);
    if (!root) return root.error();
    host_ = std::move(*root);
    auto options = etcd::loadClientCertificates(*host_, "/etc/kubernetes/pki");
    if (!options) return options.error();
    options_ = std::move(*options);
    options_.endpoints = endpoints();
    client_ = etcd::makeEtcdClient(options_);

    // Ready: every member answers /health (mutual TLS), and lists three members.
    bool ready = false;
    while (!ready && secondsSince(started) < 60) {
      auto members = client_->listMembers();
      ready = members && members->size() == 3;
      for (int i = 0; ready && i < 3; ++i) {
        for (const auto& m : *members) {
          if (m.name.empty()) ready = false;  // not started yet
          if (m.name == names_[static_cast<std::size_t>(i)]) {
            auto healthy = client_->memberHealthy(m);
            ready = ready && healthy && *healthy;
          }
        }
      }
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!ready)
      return Error("the etcd cluster did not become healthy within 60 s; logs:\n" + logs());
    if (verbose_)
      std::cout << "[timing] 3-member TLS cluster healthy: " << secondsSince(started) << " s\n";
    return base::ok();
  }

  // Whether start() prints its timings to stdout (tests: yes; the demo: no).
  void setVerbose(bool verbose) { verbose_ = verbose; }

  // Kills every member, removes the directory (unless EKCO_KEEP_ETCD_TEST_DIR is set) and
  // releases the lock. Idempotent.
  void stop() {
    for (int i = 0; i < 3; ++i) kill(i);
    if (!dir_.empty() && std::getenv("EKCO_KEEP_ETCD_TEST_DIR") == nullptr) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
    dir_.clear();
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
    lock_fd_ = -1;
  }

  // SIGKILL to member i's process group, and reap it.
  void kill(int i) {
    pid_t& pid = pids_[static_cast<std::size_t>(i)];
    if (pid <= 0) return;
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  bool running(int i) const { return pids_[static_cast<std::size_t>(i)] > 0; }

  const char* ip(int i) const { return kEtcdIps[i]; }
  const std::string& name(int i) const { return names_[static_cast<std::size_t>(i)]; }
  std::string endpoint(int i) const { return std::string("https://") + ip(i) + ":2379"; }
  std::vector<std::string> endpoints() const { return {endpoint(0), endpoint(1), endpoint(2)}; }
  std::string peerUrl(int i) const { return std::string("https://") + ip(i) + ":2380"; }

  const std::string& dir() const { return dir_; }
  // The host root whose etc/kubernetes/pki/etcd holds the certificates (an agent's --host-root).
  std::string hostRoot() const { return dir_ + "/root"; }
  const std::string& pki() const { return pki_; }
  const hostfs::LocalHostFs& hostFs() const { return *host_; }
  // The healthcheck client's options, with the three members' endpoints.
  const etcd::ClientOptions& clientOptions() const { return options_; }
  etcd::EtcdClient& client() { return *client_; }
  base::ProcessRunner& runner() { return runner_; }

  std::string logPath(int i) const { return dir_ + "/" + name(i) + ".log"; }
  // The tail of each member's log.
  std::string logs() const {
    std::string out;
    for (int i = 0; i < 3; ++i) {
      std::string text = readFile(logPath(i));
      if (text.size() > 3000) text = "..." + text.substr(text.size() - 3000);
      out += "--- " + name(i) + " ---\n" + text;
    }
    return out;
  }

  // `etcdctl <args...>` with the healthcheck client certificate: the independent view.
  base::Result<base::ProcessResult> etcdctl(std::vector<std::string> args) {
    base::ProcessRequest request;
    request.argv = {"etcdctl",
                    "--cacert",
                    pki_ + "/ca.crt",
                    "--cert",
                    pki_ + "/healthcheck-client.crt",
                    "--key",
                    pki_ + "/healthcheck-client.key",
                    "--command-timeout=10s"};
    request.argv.insert(request.argv.end(), args.begin(), args.end());
    request.timeout = std::chrono::seconds(30);
    return runner_.run(request);
  }

  // `etcdctl member list` through `endpoint`: one line per member.
  base::Result<std::string> memberList(const std::string& endpoint) {
    auto result = etcdctl({"--endpoints=" + endpoint, "member", "list"});
    if (!result) return result.error();
    if (!result->success()) return base::Error("etcdctl member list: " + result->stderr_data);
    return result->stdout_data;
  }

  // The index of the current leader, from `etcdctl endpoint status` (-1 when unknown).
  int leaderIndex() {
    auto result = etcdctl({"--endpoints=" + endpoint(0) + "," + endpoint(1) + "," + endpoint(2),
                           "endpoint", "status", "-w", "json"});
    if (!result || !result->success()) return -1;
    const auto status = nlohmann::json::parse(result->stdout_data, nullptr, false);
    if (!status.is_array()) return -1;
    std::uint64_t leader = 0;
    std::map<std::uint64_t, int> index_of;
    for (const auto& e : status) {
      const auto& st = e.value("Status", nlohmann::json::object());
      leader = st.value("leader", leader);
      const std::string ep = e.value("Endpoint", "");
      for (int i = 0; i < 3; ++i) {
        if (ep == endpoint(i)) {
          index_of[st.value("header", nlohmann::json::object())
                       .value("member_id", std::uint64_t{0})] = i;
        }
      }
    }
    const auto it = index_of.find(leader);
    return it == index_of.end() ? -1 : it->second;
  }

 private:
  // Empty when ip:port can be bound (with SO_REUSEADDR, as etcd does), else why not.
  static std::string portProblem(const char* ip, int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "socket failed";
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, ip, &addr.sin_addr);
    const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    const int err = errno;
    ::close(fd);
    if (rc == 0) return "";
    return std::string(ip) + ":" + std::to_string(port) + " cannot be bound (" +
           std::strerror(err) + "); is another etcd (or another run of this test) using it?";
  }

  base::Status openssl(std::vector<std::string> args) {
    args.insert(args.begin(), "openssl");
    base::ProcessRequest request;
    request.argv = args;
    request.working_dir = dir_ + "/work";
    request.timeout = std::chrono::seconds(60);
    auto result = runner_.run(request);
    if (!result) return result.error();
    if (!result->success()) return base::failureError(request, *result);
    return base::ok();
  }

  // kubeadm's layout: etcd/ca.crt, etcd/server.*, etcd/peer.*, etcd/healthcheck-client.*. The
  // server certificate needs clientAuth too: the gateway dials etcd's own gRPC port with it.
  base::Status makeCertificates() {
    const std::string ec = "ec_paramgen_curve:prime256v1";
    EKCO_TRY(openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", ec, "-nodes", "-keyout",
                      pki_ + "/ca.key", "-out", pki_ + "/ca.crt", "-days", "2", "-subj",
                      "/CN=etcd-ca"}));
    auto issue = [&](const std::string& name, const std::string& cn, const std::string& eku,
                     const std::string& san, int serial) -> base::Status {
      const std::string ext = dir_ + "/work/" + name + ".ext";
      std::ofstream(ext) << (san.empty() ? "" : "subjectAltName=" + san + "\n")
                         << "extendedKeyUsage=" << eku
                         << "\nkeyUsage=digitalSignature,keyEncipherment\n"
                            "basicConstraints=CA:FALSE\n";
      EKCO_TRY(openssl({"req", "-newkey", "ec", "-pkeyopt", ec, "-nodes", "-keyout",
                        pki_ + "/" + name + ".key", "-out", dir_ + "/work/" + name + ".csr",
                        "-subj", "/CN=" + cn}));
      return openssl({"x509", "-req", "-in", dir_ + "/work/" + name + ".csr", "-CA",
                      pki_ + "/ca.crt", "-CAkey", pki_ + "/ca.key", "-set_serial",
                      std::to_string(serial), "-out", pki_ + "/" + name + ".crt", "-days", "2",
                      "-extfile", ext});
    };
    const std::string sans = "IP:127.0.0.11,IP:127.0.0.12,IP:127.0.0.13,IP:127.0.0.1,DNS:localhost";
    EKCO_TRY(issue("server", "etcd-server", "serverAuth,clientAuth", sans, 2));
    EKCO_TRY(issue("peer", "etcd-peer", "serverAuth,clientAuth", sans, 3));
    return issue("healthcheck-client", "kube-etcd-healthcheck-client", "clientAuth", "", 4);
  }

  base::Status startMember(int i) {
    std::string cluster;
    for (int j = 0; j < 3; ++j) cluster += std::string(j ? "," : "") + name(j) + "=" + peerUrl(j);
    std::vector<std::string> args = {
        "/usr/bin/etcd",
        "--name",
        name(i),
        "--data-dir",
        dir_ + "/" + name(i) + ".data",
        "--listen-peer-urls",
        peerUrl(i),
        "--initial-advertise-peer-urls",
        peerUrl(i),
        "--listen-client-urls",
        endpoint(i),
        "--advertise-client-urls",
        endpoint(i),
        "--initial-cluster",
        cluster,
        "--initial-cluster-token",
        "ekco-etcd-test",
        "--initial-cluster-state",
        "new",
        "--client-cert-auth",
        "--trusted-ca-file",
        pki_ + "/ca.crt",
        "--cert-file",
        pki_ + "/server.crt",
        "--key-file",
        pki_ + "/server.key",
        "--peer-client-cert-auth",
        "--peer-trusted-ca-file",
        pki_ + "/ca.crt",
        "--peer-cert-file",
        pki_ + "/peer.crt",
        "--peer-key-file",
        pki_ + "/peer.key",
    };
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = logPath(i);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 2, 1);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0)
      return base::Error("cannot start /usr/bin/etcd: " + std::string(std::strerror(rc)));
    pids_[static_cast<std::size_t>(i)] = pid;
    return base::ok();
  }

  std::array<std::string, 3> names_;
  base::SystemClock clock_;
  base::BoostProcessRunner runner_{clock_};
  std::string dir_;
  std::string pki_;
  std::array<pid_t, 3> pids_ = {-1, -1, -1};
  int lock_fd_ = -1;
  bool verbose_ = true;
  std::unique_ptr<hostfs::LocalHostFs> host_;
  etcd::ClientOptions options_;
  std::unique_ptr<etcd::EtcdClient> client_;
};

}  // namespace ekco::fakes
