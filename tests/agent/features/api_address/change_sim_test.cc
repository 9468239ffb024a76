// `ekco change-load-balancer` against ekco-kubesim with real host roots: a primary (cp-1, a
// kubeadm PKI made by openssl, kubesim serving its apiserver.crt as kube-apiserver does, read
// again at every handshake) and a worker, each with a mock systemd on a private D-Bus and a
// thread as kubelet that renews the node's Lease after a restart. The command records the
// request and follows it; the leader and the two node controllers run here (the real steps:
// `ekco regen-cert` as a child, the kubeconfig switch with its verification). The cluster moves
// from https://127.0.0.1:PORT to https://localhost:PORT: the certificate gains `localhost`
// (openssl agrees), every kubeconfig points at the new address, kubelet restarted once per
// node. Then a worker whose kubelet never comes back: the change stops there, its files
// restored; and a new leader in the middle goes on without redoing a step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/features/api_address/api_address_cmd.h"
#include "agent/features/api_address/change_leader.h"
#include "agent/features/api_address/change_node.h"
#include "agent/features/api_address/kubeconfig_server.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "pki/certificate.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/features/api_address/change_support.h"
#include "tests/agent/features/certs/kubeadm_pki.h"
#include "tests/agent/process_support.h"
#include "tests/fakes/systemd_bus.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// One node: its host root, its systemd and its kubelet.
struct SimNode {
  std::string name;
  bool primary = false;
  std::string root;
  fakes::SystemdBus bus;
  std::unique_ptr<hostfs::LocalHostFs> fs;
  std::atomic<bool> kubelet_comes_back{true};
  std::jthread kubelet;
  std::unique_ptr<ChangeNodeController> controller;
};

class ChangeSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_.make(300);
    const std::string pki_dir = cp1Root() + "/etc/kubernetes/pki";
    auto server = kubesim::Server::start(
        {.out_dir = dir_.path() + "/sim",
         .objects = {{{"apiVersion", "v1"},
                      {"kind", "Namespace"},
                      {"metadata", {{"name", "kurl"}}}},
                     {{"apiVersion", "v1"},
                      {"kind", "Namespace"},
                      {"metadata", {{"name", "kube-node-lease"}}}},
                     testing::readyNode("cp-1", true),
                     testing::readyNode("worker-1", false),
                     kubesim::nodeLeaseObject("cp-1", "2026-01-01T00:00:00.000000Z"),
                     kubesim::nodeLeaseObject("worker-1", "2026-01-01T00:00:00.000000Z")},
         .serving_cert_file = pki_dir + "/apiserver.crt",
         .serving_key_file = pki_dir + "/apiserver.key"});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    port_ = server_->url().substr(server_->url().rfind(':') + 1);
    old_ = "https://127.0.0.1:" + port_;
    new_ = "https://localhost:" + port_;
    // The manifest the re-issue's verification reads the apiserver's address from.
    fs::create_directories(cp1Root() + "/etc/kubernetes/manifests");
    std::ofstream(cp1Root() + "/etc/kubernetes/manifests/kube-apiserver.yaml")
        << kubesim::kubeApiserverManifest("127.0.0.1", std::stoi(port_));
    // The kubeconfigs: the cluster CA, kubesim's client credentials, the old address.
    const std::string kubeconfig =
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: " +
        pki::base64Encode(pki_.read(pki_dir + "/ca.crt")) + "\n    server: " + old_ +
        "\n  name: kubernetes\ncontexts:\n- context:\n    cluster: kubernetes\n    user: u\n"
        "  name: u@kubernetes\ncurrent-context: u@kubernetes\nkind: Config\nusers:\n- name: u\n"
        "  user:\n    client-certificate-data: " +
        pki::base64Encode(server_->clientCertPem()) +
        "\n    client-key-data: " + pki::base64Encode(server_->clientKeyPem()) + "\n";
    for (auto [name, primary] : {std::pair{"cp-1", true}, std::pair{"worker-1", false}}) {
      auto n = std::make_unique<SimNode>();
      n->name = name;
      n->primary = primary;
      n->root = primary ? cp1Root() : dir_.path() + "/worker-1";
      fs::create_directories(n->root + "/etc/kubernetes");
      fs::create_directories(n->root + "/etc/systemd/system");
      std::ofstream(n->root + "/etc/systemd/system/kubelet.service")
          << "[Service]\nExecStart=/bin/true\n";
      std::ofstream(n->root + "/etc/kubernetes/kubelet.conf") << kubeconfig;
      if (primary) std::ofstream(n->root + "/etc/kubernetes/admin.conf") << kubeconfig;
      ASSERT_EQ(n->bus.start({.root = n->root,
                              .work_dir = dir_.path() + "/bus-" + name,
                              .unit_dir = n->root + "/etc/systemd/system"}),
                "");
      auto opened = hostfs::LocalHostFs::open(n->root, clock_);
      ASSERT_TRUE(opened) << opened.error().message();
      n->fs = std::move(*opened);
      SimNode* raw = n.get();
      n->kubelet = std::jthread([this, raw](std::stop_token stop) {
        std::size_t seen = 0;
        while (!stop.stop_requested()) {
          const std::size_t restarts = raw->bus.calls("RestartUnit").size();
          if (restarts > seen) {
            seen = restarts;
            if (raw->kubelet_comes_back) {
              std::this_thread::sleep_for(100ms);
              (void)server_->put(kubesim::nodeLeaseObject(
                  raw->name, kube::formatRfc3339Micro(std::chrono::system_clock::now())));
            }
          }
          std::this_thread::sleep_for(20ms);
        }
      });
      nodes_.push_back(std::move(n));
    }
    // The leader's and the nodes' API client: the admin, through the old address.
    kube::Connection conn{.server = server_->url(),
                          .ca_pem = pki_.read(pki_dir + "/ca.crt"),
                          .client_cert_pem = server_->clientCertPem(),
                          .client_key_pem = server_->clientKeyPem()};
    auto transport = kube::CurlTransport::create(conn, nullptr, clock_, {});
    ASSERT_TRUE(transport);
    transport_ = std::move(*transport);
    client_ = std::make_unique<kube::RestClient>(*transport_, clock_, kube::RestClientOptions{});
    leader_ = makeLeader();
    for (auto& n : nodes_) n->controller = makeNodeController(*n);
  }
  void TearDown() override {
    for (auto& n : nodes_) {
      if (n->controller) n->controller->join();
      n->kubelet.request_stop();
    }
  }

  std::string cp1Root() const { return dir_.path() + "/cp-1"; }

  std::unique_ptr<ChangeLeaderController> makeLeader() {
    return std::make_unique<ChangeLeaderController>(
        [this]() -> base::Result<std::optional<json>> {
          auto got = client_->get(kube::resources::kConfigMaps, "kurl", "ekco-api-address");
          if (got) return std::optional<json>(std::move(*got));
          if (got.error().code() == base::ErrorCode::kNotFound) return std::optional<json>();
          return std::move(got).error();
        },
        [this] {
          ObservedNodes o{.synced = true};
          for (const char* n : {"cp-1", "worker-1"}) o.nodes.push_back(recordOf(n));
          return o;
        },
        *client_, clock_,
        ChangeLeaderOptions{
            .ns = "kurl",
            .effects = {.is_leader_fresh = [] { return true; },
                        .record_event =
                            [this](const kube::EventSpec& e) { (void)client_->recordEvent(e); }}});
  }
  std::unique_ptr<ChangeNodeController> makeNodeController(SimNode& n) {
    auto host = std::make_shared<NodeStepHost>(NodeStepHost{.host_root = n.root,
                                                            .node_name = n.name,
                                                            .ekco_bin = EKCO_BIN,
                                                            .verify_timeout = 3s,
                                                            .clock = clock_,
                                                            .host_fs = *n.fs});
    return std::make_unique<ChangeNodeController>(
        ChangeNodeDeps{.own_node =
                           [this, name = n.name] {
                             return ObservedNode{.synced = true, .node = recordOf(name)};
                           },
                       .answer = [host](const std::string& v) { return writeNodeAnswer(*host, v); },
                       .run_step = [host](const api_address::NodeTask& t,
                                          bool resumed) { return runNodeStep(*host, t, resumed); }},
        clock_, ChangeNodeOptions{.node_name = n.name});
  }
  kube::NodeRecord recordOf(const std::string& name) {
    auto got = client_->get(kube::resources::kNodes, "", name);
    if (!got) {
      kube::NodeRecord missing;
      missing.name = kube::Atom(name);
      return missing;
    }
    return testing::nodeRecordOf(*got);
  }
  // Runs the command on cp-1 while the controllers turn; its exit code.
  int runCommand(std::function<void(int)> between = {}) {
    std::atomic<int> code{-1};
    std::jthread command([&] {
      CliEnv env{.environment = {}, .out = &out_, .err = &err_};
      code = runChangeLoadBalancerCommand(
          Config{}, {.server = new_, .host_root = cp1Root(), .timeout = 3min, .poll = 100ms}, env);
    });
    const auto deadline = std::chrono::steady_clock::now() + 3min;
    int turn = 0;
    while (code == -1 && std::chrono::steady_clock::now() < deadline) {
      auto l = leader_->reconcile();
      EXPECT_TRUE(l) << l.error().message();
      for (auto& n : nodes_) {
        auto r = n->controller->reconcile();
        EXPECT_TRUE(r) << r.error().message();
      }
      if (between) between(turn);
      ++turn;
      std::this_thread::sleep_for(100ms);
    }
    command.join();
    return code;
  }
  std::string serverOf(SimNode& n, const std::string& file) {
    auto s = api_address::kubeconfigServers(
        testing::readWholeFile(n.root + "/etc/kubernetes/" + file), file);
    return s ? s->front() : s.error().message();
  }

  testing::TempDir dir_{"ekco-change-sim"};
  testing::KubeadmPki pki_{dir_.path() + "/cp-1"};
  base::SystemClock clock_;
  std::unique_ptr<kubesim::Server> server_;
  std::string port_, old_, new_;
  std::vector<std::unique_ptr<SimNode>> nodes_;
  std::unique_ptr<kube::CurlTransport> transport_;
  std::unique_ptr<kube::RestClient> client_;
  std::unique_ptr<ChangeLeaderController> leader_;
  std::ostringstream out_, err_;
};

TEST_F(ChangeSimTest, ThePrimaryAndTheWorkerMoveToTheNewAddressAndANewLeaderGoesOn) {
  // Midway (after a few turns), a new leader: it goes on from the journal and the answers.
  int reissues = 0;
  const int code = runCommand([&](int turn) {
    if (turn == 15) leader_ = makeLeader();
    (void)reissues;
  });
  ASSERT_EQ(code, 0) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("Moving the API address from " + old_ + " to " + new_));
  EXPECT_THAT(out_.str(), HasSubstr("certificate cp-1: done"));
  EXPECT_THAT(out_.str(), HasSubstr("kubeconfigs worker-1: done"));
  EXPECT_THAT(out_.str(), HasSubstr("\nResult: success\n"));
  SimNode& cp1 = *nodes_[0];
  SimNode& worker = *nodes_[1];
  EXPECT_EQ(serverOf(cp1, "kubelet.conf"), new_);
  EXPECT_EQ(serverOf(cp1, "admin.conf"), new_);
  EXPECT_EQ(serverOf(worker, "kubelet.conf"), new_);
  EXPECT_EQ(cp1.bus.calls("RestartUnit").size(), 1U);
  EXPECT_EQ(worker.bus.calls("RestartUnit").size(), 1U);
  // The certificate names the new host, and openssl agrees; kubesim serves it.
  auto verified = pki_.openssl(
      {"verify", "-CAfile", "ca.crt", "-verify_hostname", "localhost", "apiserver.crt"},
      pki_.pki());
  EXPECT_THAT(verified.stdout_data, HasSubstr("OK"));
  auto cm = server_->get("configmaps", "kurl", "ekco-api-address");
  ASSERT_TRUE(cm);
  EXPECT_EQ((*cm)["data"]["result"], "success");
  // One re-issue only: the backup directories of the PKI.
  int backups = 0;
  for (const auto& e : fs::directory_iterator(pki_.pki() / ".ekco-backup"))
    backups += e.is_directory();
  EXPECT_EQ(backups, 1);
}

TEST_F(ChangeSimTest, AWorkerWhoseKubeletDoesNotComeBackStopsTheChangeWithItsFilesRestored) {
  SimNode& worker = *nodes_[1];
  worker.kubelet_comes_back = false;
  const std::string before = testing::readWholeFile(worker.root + "/etc/kubernetes/kubelet.conf");
  const int code = runCommand();
  EXPECT_EQ(code, 1) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("Result: worker-1: kubeconfigs: not verified within"));
  EXPECT_THAT(out_.str(), HasSubstr("the previous kubeconfigs were restored"));
  EXPECT_EQ(testing::readWholeFile(worker.root + "/etc/kubernetes/kubelet.conf"), before);
  EXPECT_EQ(serverOf(*nodes_[0], "kubelet.conf"), new_);  // cp-1 moved before it
}

}  // namespace
}  // namespace ekco::agent
