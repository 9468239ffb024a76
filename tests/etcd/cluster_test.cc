// The etcd client against a real 3-member etcd 3.4 cluster with mutual TLS on loopback: members
// node-a/b/c on 127.0.0.11-13 (peer https://127.0.0.1x:2380, client https://127.0.0.1x:2379),
// certificates made with the openssl CLI and read back through HostFs from a temp host root. The
// leader is the member killed: the worst case for the others' health.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/clock.h"
#include "base/process.h"
#include "etcd/client.h"
#include "etcd/removal.h"
#include "hostfs/local_host_fs.h"

extern char** environ;

namespace ekco::etcd {
namespace {

namespace fs = std::filesystem;
using Steady = std::chrono::steady_clock;

const char* const kIps[3] = {"127.0.0.11", "127.0.0.12", "127.0.0.13"};
const char* const kNames[3] = {"node-a", "node-b", "node-c"};

double secondsSince(Steady::time_point start) {
  return std::chrono::duration<double>(Steady::now() - start).count();
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Empty when ip:port can be bound (with SO_REUSEADDR, as etcd does), else why not.
std::string portProblem(const char* ip, int port) {
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
  return std::string(ip) + ":" + std::to_string(port) + " cannot be bound (" + std::strerror(err) +
         "); is another etcd (or another run of this test) using it?";
}

class EtcdClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The members need fixed addresses (kubeadm's ports), so clusters of concurrent tests (ctest
    // --parallel, other build directories) take turns: an flock held until TearDown.
    const std::string lock = (fs::temp_directory_path() / "ekco-etcd-cluster-test.lock").string();
    lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    ASSERT_GE(lock_fd_, 0) << "open " << lock << ": " << std::strerror(errno);
    const auto waited = Steady::now();
    while (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      ASSERT_LT(secondsSince(waited), 240) << "another etcd cluster test holds " << lock;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (int i = 0; i < 3; ++i) {
      for (int port : {kPeerPort, kClientPort}) {
        const std::string problem = portProblem(kIps[i], port);
        if (!problem.empty()) GTEST_FAIL() << problem;
      }
    }
    std::string tmpl = (fs::temp_directory_path() / "ekco-etcd-test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    pki_ = dir_ + "/root/etc/kubernetes/pki/etcd";
    fs::create_directories(pki_);
    fs::create_directories(dir_ + "/work");

    const auto certs_start = Steady::now();
    ASSERT_NO_FATAL_FAILURE(makeCertificates());
    std::cout << "[timing] certificates: " << secondsSince(certs_start) << " s\n";

    const auto start = Steady::now();
    for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(startMember(i));

    auto root = hostfs::LocalHostFs::open(dir_ + "/root", clock_);
    ASSERT_TRUE(root) << root.error().message();
    host_ = std::move(*root);
    auto options = loadClientCertificates(*host_, "/etc/kubernetes/pki");
    ASSERT_TRUE(options) << options.error().message();
    options_ = std::move(*options);
    options_.endpoints = {"https://127.0.0.11:2379", "https://127.0.0.12:2379",
                          "https://127.0.0.13:2379"};
    client_ = makeEtcdClient(options_);

    // Ready: every member answers /health (mutual TLS), and lists three members.
    bool ready = false;
    while (!ready && secondsSince(start) < 60) {
      auto members = client_->listMembers();
      ready = members && members->size() == 3;
      for (int i = 0; ready && i < 3; ++i) {
        for (const auto& m : *members) {
          if (m.name.empty()) ready = false;  // not started yet
          if (m.name == kNames[i]) {
            auto healthy = client_->memberHealthy(m);
            ready = ready && healthy && *healthy;
          }
        }
      }
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(ready) << "the etcd cluster did not become healthy within 60 s; logs:\n" << logs();
    std::cout << "[timing] 3-member TLS cluster healthy: " << secondsSince(start) << " s\n";
  }

  void TearDown() override {
    for (pid_t& pid : pids_) killMember(pid);
    if (!dir_.empty() && std::getenv("EKCO_KEEP_ETCD_TEST_DIR") == nullptr) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
  }

  void openssl(std::vector<std::string> args) {
    args.insert(args.begin(), "openssl");
    base::ProcessRequest request;
    request.argv = args;
    request.working_dir = dir_ + "/work";
    request.timeout = std::chrono::seconds(60);
    auto result = runner_.run(request);
    ASSERT_TRUE(result) << result.error().message();
    ASSERT_TRUE(result->success()) << base::failureError(request, *result).message();
  }

  // kubeadm's layout: etcd/ca.crt, etcd/server.*, etcd/peer.*, etcd/healthcheck-client.*. The
  // server certificate needs clientAuth too: the gateway dials etcd's own gRPC port with it.
  void makeCertificates() {
    const std::string ec = "ec_paramgen_curve:prime256v1";
    ASSERT_NO_FATAL_FAILURE(openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", ec, "-nodes",
                                     "-keyout", pki_ + "/ca.key", "-out", pki_ + "/ca.crt", "-days",
                                     "2", "-subj", "/CN=etcd-ca"}));
    auto issue = [&](const std::string& name, const std::string& cn, const std::string& eku,
                     const std::string& san, int serial) {
      const std::string ext = dir_ + "/work/" + name + ".ext";
      std::ofstream(ext) << (san.empty() ? "" : "subjectAltName=" + san + "\n")
                         << "extendedKeyUsage=" << eku
                         << "\nkeyUsage=digitalSignature,keyEncipherment\n"
                            "basicConstraints=CA:FALSE\n";
      openssl({"req", "-newkey", "ec", "-pkeyopt", ec, "-nodes", "-keyout",
               pki_ + "/" + name + ".key", "-out", dir_ + "/work/" + name + ".csr", "-subj",
               "/CN=" + cn});
      openssl({"x509", "-req", "-in", dir_ + "/work/" + name + ".csr", "-CA", pki_ + "/ca.crt",
               "-CAkey", pki_ + "/ca.key", "-set_serial", std::to_string(serial), "-out",
               pki_ + "/" + name + ".crt", "-days", "2", "-extfile", ext});
    };
    const std::string sans = "IP:127.0.0.11,IP:127.0.0.12,IP:127.0.0.13,IP:127.0.0.1,DNS:localhost";
    ASSERT_NO_FATAL_FAILURE(issue("server", "etcd-server", "serverAuth,clientAuth", sans, 2));
    ASSERT_NO_FATAL_FAILURE(issue("peer", "etcd-peer", "serverAuth,clientAuth", sans, 3));
    ASSERT_NO_FATAL_FAILURE(
        issue("healthcheck-client", "kube-etcd-healthcheck-client", "clientAuth", "", 4));
  }

  void startMember(int i) {
    const std::string ip = kIps[i];
    std::string cluster;
    for (int j = 0; j < 3; ++j) {
      cluster += std::string(j ? "," : "") + kNames[j] + "=https://" + kIps[j] + ":2380";
    }
    std::vector<std::string> args = {
        "/usr/bin/etcd",
        "--name",
        kNames[i],
        "--data-dir",
        dir_ + "/" + kNames[i] + ".data",
        "--listen-peer-urls",
        "https://" + ip + ":2380",
        "--initial-advertise-peer-urls",
        "https://" + ip + ":2380",
        "--listen-client-urls",
        "https://" + ip + ":2379",
        "--advertise-client-urls",
        "https://" + ip + ":2379",
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
    ASSERT_EQ(rc, 0) << "cannot start /usr/bin/etcd: " << std::strerror(rc);
    pids_[i] = pid;
  }

  // SIGKILL to the member's process group, and reap it.
  static void killMember(pid_t& pid) {
    if (pid <= 0) return;
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }

  std::string logPath(int i) const { return dir_ + "/" + kNames[i] + ".log"; }

  std::string logs() const {
    std::string out;
    for (int i = 0; i < 3; ++i) {
      std::string text = readFile(logPath(i));
      if (text.size() > 3000) text = "..." + text.substr(text.size() - 3000);
      out += "--- " + std::string(kNames[i]) + " ---\n" + text;
    }
    return out;
  }

  // `etcdctl member list` with the same client certificate: the independent view.
  std::string etcdctlMemberList(const std::string& endpoint) {
    base::ProcessRequest request;
    request.argv = {"etcdctl",
                    "--endpoints=" + endpoint,
                    "--cacert",
                    pki_ + "/ca.crt",
                    "--cert",
                    pki_ + "/healthcheck-client.crt",
                    "--key",
                    pki_ + "/healthcheck-client.key",
                    "--command-timeout=10s",
                    "member",
                    "list"};
    request.timeout = std::chrono::seconds(30);
    auto result = runner_.run(request);
    EXPECT_TRUE(result) << result.error().message();
    if (!result) return "";
    EXPECT_TRUE(result->success()) << base::failureError(request, *result).message();
    return result->stdout_data;
  }

  // The index of the current leader, from `etcdctl endpoint status` (-1 when unknown).
  int leaderIndex() {
    base::ProcessRequest request;
    request.argv = {"etcdctl",
                    "--endpoints=" + options_.endpoints[0] + "," + options_.endpoints[1] + "," +
                        options_.endpoints[2],
                    "--cacert",
                    pki_ + "/ca.crt",
                    "--cert",
                    pki_ + "/healthcheck-client.crt",
                    "--key",
                    pki_ + "/healthcheck-client.key",
                    "--command-timeout=10s",
                    "endpoint",
                    "status",
                    "-w",
                    "json"};
    request.timeout = std::chrono::seconds(30);
    auto result = runner_.run(request);
    if (!result || !result->success()) return -1;
    const auto status = nlohmann::json::parse(result->stdout_data, nullptr, false);
    if (!status.is_array()) return -1;
    std::uint64_t leader = 0;
    std::map<std::uint64_t, int> index_of;
    for (const auto& e : status) {
      const auto& st = e.value("Status", nlohmann::json::object());
      leader = st.value("leader", leader);
      const std::string endpoint = e.value("Endpoint", "");
      for (int i = 0; i < 3; ++i) {
        if (endpoint == options_.endpoints[static_cast<std::size_t>(i)]) {
          index_of[st.value("header", nlohmann::json::object())
                       .value("member_id", std::uint64_t{0})] = i;
        }
      }
    }
    const auto it = index_of.find(leader);
    return it == index_of.end() ? -1 : it->second;
  }

  std::map<std::uint64_t, bool> healthOf(const std::vector<Member>& members) {
    std::map<std::uint64_t, bool> health;
    for (const auto& m : members) {
      auto h = client_->memberHealthy(m);
      EXPECT_TRUE(h) << h.error().message();
      health[m.id] = h && *h;
    }
    return health;
  }

  base::SystemClock clock_;
  base::BoostProcessRunner runner_{clock_};
  std::string dir_;
  std::string pki_;
  pid_t pids_[3] = {-1, -1, -1};
  int lock_fd_ = -1;
  std::unique_ptr<hostfs::LocalHostFs> host_;
  ClientOptions options_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdClusterTest, RemovesTheDeadMemberAndNeverALiveOne) {
  // 1. Three members, named after their nodes, with their URLs.
  auto members = client_->listMembers();
  ASSERT_TRUE(members) << members.error().message();
  ASSERT_EQ(members->size(), 3u);
  std::map<std::string, Member> by_name;
  for (const auto& m : *members) by_name[m.name] = m;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(by_name.count(kNames[i])) << kNames[i];
    const Member& m = by_name[kNames[i]];
    EXPECT_EQ(m.peer_urls, std::vector<std::string>{"https://" + std::string(kIps[i]) + ":2380"});
    EXPECT_EQ(m.client_urls, std::vector<std::string>{"https://" + std::string(kIps[i]) + ":2379"});
    EXPECT_FALSE(m.learner);
    EXPECT_NE(m.id, 0u);
    // etcdctl prints the same ID in hex.
    EXPECT_NE(etcdctlMemberList(options_.endpoints[0])
                  .find(formatMemberId(m.id) + ", started, " + kNames[i]),
              std::string::npos);
  }
  auto health = healthOf(*members);
  for (const auto& [id, ok] : health) EXPECT_TRUE(ok) << formatMemberId(id);

  // 2. A live member is never removed.
  auto plan = planMemberRemoval(*members, "127.0.0.11", health);
  ASSERT_TRUE(plan.member);
  EXPECT_EQ(plan.member->name, "node-a");
  EXPECT_FALSE(plan.safe);
  EXPECT_NE(plan.reason.find("is healthy: a live member is never removed"), std::string::npos)
      << plan.reason;

  // 3. The leader dies (SIGKILL): the worst case, since the others must elect a new one.
  const int v = leaderIndex();
  ASSERT_GE(v, 0) << "no leader found";
  const int live = (v + 1) % 3;
  const int other = (v + 2) % 3;
  const std::string dead_ip = kIps[v];
  const Member dead = by_name[kNames[v]];
  std::cout << "[leader] " << describeMember(dead) << " at " << dead_ip << " is killed\n";
  killMember(pids_[v]);
  auto t = Steady::now();
  auto dead_health = client_->memberHealthy(dead);
  ASSERT_TRUE(dead_health);
  EXPECT_FALSE(*dead_health);
  std::cout << "[timing] health probe of the killed member: " << secondsSince(t) << " s\n";

  // Until they have elected a new leader the others answer /health with false (etcd's /health
  // needs a leader and a quorum read), so the plan refuses: too few healthy members would
  // remain. Then it is safe.
  t = Steady::now();
  int refusals = 0;
  while (true) {
    members = client_->listMembers();
    ASSERT_TRUE(members) << members.error().message();
    health = healthOf(*members);
    plan = planMemberRemoval(*members, dead_ip, health);
    if (plan.safe || secondsSince(t) > 30) break;
    EXPECT_NE(plan.reason.find("fewer than their quorum"), std::string::npos) << plan.reason;
    ++refusals;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::cout << "[timing] plan safe " << secondsSince(t) << " s after the kill (" << refusals
            << " refused before)\n";
  ASSERT_TRUE(plan.member) << plan.reason;
  EXPECT_EQ(plan.member->id, dead.id);
  EXPECT_TRUE(plan.safe) << plan.reason;
  EXPECT_EQ(plan.voting_members, 2);
  EXPECT_EQ(plan.healthy_remaining, 2);
  std::cout << "[plan] " << plan.reason << "\n";

  // 4. Remove it. etcd's strict reconfiguration check may still say "unhealthy cluster" for a
  // moment (it wants the remaining members connected for 5 s): that is kUnavailable; retry.
  t = Steady::now();
  base::Status removed = client_->removeMember(dead.id);
  int attempts = 1;
  while (!removed && removed.error().code() == base::ErrorCode::kUnavailable &&
         secondsSince(t) < 30) {
    std::cout << "[retry] " << removed.error().message() << "\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    removed = client_->removeMember(dead.id);
    ++attempts;
  }
  ASSERT_TRUE(removed) << removed.error().message() << "\n" << logs();
  std::cout << "[timing] removal: " << secondsSince(t) << " s, " << attempts << " attempt(s)\n";

  const std::string listed = etcdctlMemberList(std::string("https://") + kIps[live] + ":2379");
  EXPECT_NE(listed.find(kNames[live]), std::string::npos) << listed;
  EXPECT_NE(listed.find(kNames[other]), std::string::npos) << listed;
  EXPECT_EQ(listed.find(kNames[v]), std::string::npos) << listed;
  EXPECT_EQ(std::count(listed.begin(), listed.end(), '\n'), 2) << listed;
  members = client_->listMembers();
  ASSERT_TRUE(members) << members.error().message();
  EXPECT_EQ(members->size(), 2u);

  // 5. Removing it again: kNotFound (the purge treats that as done).
  removed = client_->removeMember(dead.id);
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().code(), base::ErrorCode::kNotFound) << removed.error().message();
  EXPECT_EQ(removed.error().message().rfind("remove etcd member " + formatMemberId(dead.id) +
                                                ": etcdserver: member not found (HTTP 404",
                                            0),
            0u)
      << removed.error().message();

  // 6. The dead node has no member now; a live member is still refused.
  health = healthOf(*members);
  plan = planMemberRemoval(*members, dead_ip, health);
  EXPECT_FALSE(plan.member);
  EXPECT_FALSE(plan.safe);
  plan = planMemberRemoval(*members, kIps[live], health);
  ASSERT_TRUE(plan.member);
  EXPECT_FALSE(plan.safe) << plan.reason;

  // 7. A client whose first endpoint is the dead one falls over to the next.
  ClientOptions options = options_;
  options.endpoints = {"https://" + dead_ip + ":2379",
                       std::string("https://") + kIps[other] + ":2379"};
  auto fallback = makeEtcdClient(options);
  t = Steady::now();
  members = fallback->listMembers();
  ASSERT_TRUE(members) << members.error().message();
  EXPECT_EQ(members->size(), 2u);
  std::cout << "[timing] list with a dead first endpoint: " << secondsSince(t) << " s\n";

  // Only dead endpoints: a kUnavailable error naming both.
  options.endpoints = {"https://" + dead_ip + ":2379", "https://127.0.0.14:2379"};
  auto nowhere = makeEtcdClient(options)->listMembers();
  ASSERT_FALSE(nowhere);
  EXPECT_EQ(nowhere.error().code(), base::ErrorCode::kUnavailable);
  EXPECT_NE(nowhere.error().message().find("https://127.0.0.14:2379"), std::string::npos)
      << nowhere.error().message();
}

TEST_F(EtcdClusterTest, TlsIsMutual) {
  Member a;
  a.name = "node-a";
  a.client_urls = {"https://127.0.0.11:2379"};
  // Without the client certificate the member refuses us: not healthy, and lists fail.
  ClientOptions no_cert = options_;
  no_cert.cert_pem.clear();
  no_cert.key_pem.clear();
  no_cert.timeout = std::chrono::seconds(3);
  no_cert.health_timeout = std::chrono::seconds(2);
  auto anonymous = makeEtcdClient(no_cert);
  EXPECT_FALSE(*anonymous->memberHealthy(a));
  auto r = anonymous->listMembers();
  ASSERT_FALSE(r);
  std::cout << "[no client cert] " << r.error().message() << "\n";
  // A CA that did not sign the server certificate: refused in the handshake.
  ClientOptions wrong_ca = options_;
  wrong_ca.ca_pem = readFile(pki_ + "/healthcheck-client.crt");
  wrong_ca.timeout = std::chrono::seconds(3);
  r = makeEtcdClient(wrong_ca)->listMembers();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kUnavailable) << r.error().message();
  EXPECT_FALSE(*makeEtcdClient(wrong_ca)->memberHealthy(a));
}

TEST(EtcdCertificatesTest, ErrorsNameTheFile) {
  std::string tmpl = (fs::temp_directory_path() / "ekco-etcd-certs.XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  fs::create_directories(dir + "/etc/pki/etcd");
  base::SystemClock clock;
  auto host = hostfs::LocalHostFs::open(dir, clock);
  ASSERT_TRUE(host) << host.error().message();
  auto r = loadClientCertificates(**host, "/etc/pki/");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kNotFound);
  EXPECT_NE(r.error().message().find("/etc/pki/etcd/ca.crt"), std::string::npos)
      << r.error().message();
  std::ofstream(dir + "/etc/pki/etcd/ca.crt") << "-----BEGIN CERTIFICATE-----\nx\n";
  std::ofstream(dir + "/etc/pki/etcd/healthcheck-client.crt") << "not pem";
  r = loadClientCertificates(**host, "/etc/pki");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kParse);
  EXPECT_EQ(r.error().message(),
            "etcd client certificates: /etc/pki/etcd/healthcheck-client.crt: no PEM block");
  std::ofstream(dir + "/etc/pki/etcd/healthcheck-client.crt") << "-----BEGIN CERTIFICATE-----\n";
  r = loadClientCertificates(**host, "/etc/pki");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("/etc/pki/etcd/healthcheck-client.key"), std::string::npos)
      << r.error().message();
  std::ofstream(dir + "/etc/pki/etcd/healthcheck-client.key") << "-----BEGIN PRIVATE KEY-----\n";
  r = loadClientCertificates(**host, "/etc/pki");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->endpoints.empty());
  EXPECT_EQ(r->ca_pem, "-----BEGIN CERTIFICATE-----\nx\n");
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace ekco::etcd
