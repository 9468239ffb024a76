// ekco-kubesim as the ekco ServiceAccount sees it: the manifests a user applies (deploy/,
// deploy-monitoring/, ...) and a token of the ServiceAccount, so the manifests' RBAC is enforced.
// One way to start it for every test: startAsEkco() (agents as processes read its kubeconfig),
// and ServiceAccountCluster, which adds an in-process RestClient and fails the test on a call
// the manifests do not grant (expectEveryRequestAllowed).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent::testing {

inline constexpr const char* kEkcoServiceAccount = "system:serviceaccount:kurl:ekco";
inline constexpr const char* kEkcoToken = "ekco-sa-token";

struct EkcoSimSpec {
  std::string dir{};  // kubesim's files go to dir/sim, the ServiceAccount's kubeconfig to
                      // dir/sa.kubeconfig
  std::vector<nlohmann::json> objects{};
  // Relative to the source tree; their objects are added to `objects`.
  std::vector<std::string> manifest_dirs{"/deploy"};
  std::vector<kubesim::TokenUser> more_tokens{};  // other users beside the ServiceAccount
  std::vector<kubesim::ExecReply> exec_script{};  // kubesim's scripted pods/exec replies
};

// Starts kubesim with spec's objects and manifests, the token kEkcoToken authenticating as the
// ekco ServiceAccount, and writes dir/sa.kubeconfig for it. Fatal failures on error (call under
// ASSERT_NO_FATAL_FAILURE).
inline void startAsEkco(EkcoSimSpec spec, std::unique_ptr<kubesim::Server>& server) {
  for (const std::string& m : spec.manifest_dirs) {
    auto loaded = kubesim::loadManifestDir(std::string(EKCO_SOURCE_DIR) + m);
    ASSERT_TRUE(loaded) << loaded.error().message();
    spec.objects.insert(spec.objects.end(), loaded->begin(), loaded->end());
  }
  std::vector<kubesim::TokenUser> tokens = {
      {.token = kEkcoToken, .user = kEkcoServiceAccount, .groups = {}}};
  tokens.insert(tokens.end(), spec.more_tokens.begin(), spec.more_tokens.end());
  auto started = kubesim::Server::start({.out_dir = spec.dir + "/sim",
                                         .objects = std::move(spec.objects),
                                         .exec_script = std::move(spec.exec_script),
                                         .tokens = std::move(tokens)});
  ASSERT_TRUE(started) << started.error().message();
  server = std::move(*started);
  auto written = server->writeTokenKubeconfig(spec.dir + "/sa.kubeconfig", kEkcoToken);
  ASSERT_TRUE(written) << written.error().message();
}

class ServiceAccountCluster {
 public:
  // `dir` holds kubesim's files; `manifest_dirs` are relative to the source tree ("/deploy").
  // Fatal failures on error (call under ASSERT_NO_FATAL_FAILURE).
  // `reporting_instance`: the node the client's Events name as their source; `exec_script`:
  // kubesim's scripted pods/exec replies.
  void start(const std::string& dir, std::vector<nlohmann::json> objects,
             const std::vector<std::string>& manifest_dirs, const base::Clock& clock,
             const std::string& reporting_instance = "node-a",
             std::vector<kubesim::ExecReply> exec_script = {}) {
    ASSERT_NO_FATAL_FAILURE(startAsEkco({.dir = dir,
                                         .objects = std::move(objects),
                                         .manifest_dirs = manifest_dirs,
                                         .exec_script = std::move(exec_script)},
                                        server_));
    const std::string kubeconfig = dir + "/sa.kubeconfig";
    auto process_fs = hostfs::LocalHostFs::open("/", clock);
    ASSERT_TRUE(process_fs) << process_fs.error().message();
    process_fs_ = std::move(*process_fs);
    auto conn = kube::loadKubeconfig(*process_fs_, kubeconfig);
    ASSERT_TRUE(conn) << conn.error().message();
    connection_ = *conn;
    auto transport = kube::CurlTransport::create(*conn, process_fs_.get(), clock,
                                                 {.connect_timeout = std::chrono::seconds(5)});
    ASSERT_TRUE(transport) << transport.error().message();
    transport_ = std::move(*transport);
    client_ = std::make_unique<kube::RestClient>(
        *transport_, clock,
        kube::RestClientOptions{.request_timeout = std::chrono::seconds(10),
                                .retry = {.max_attempts = 1},
                                .sleep = [](std::chrono::milliseconds) {},
                                .random = [] { return 0.0; },
                                .reporting_instance = reporting_instance});
  }

  void expectEveryRequestAllowed() const {
    if (!server_) return;
    for (const auto& r : server_->requestLog()) {
      EXPECT_TRUE(r.allowed) << r.user << " " << r.verb << " " << r.resource << " " << r.ns << "/"
                             << r.name << ": " << r.code;
    }
  }

  kubesim::Server& server() { return *server_; }
  kube::RestClient& client() { return *client_; }
  // The ServiceAccount's connection (for a pods/exec executor).
  const kube::Connection& connection() const { return connection_; }

 private:
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<hostfs::LocalHostFs> process_fs_;
  std::unique_ptr<kube::CurlTransport> transport_;
  std::unique_ptr<kube::RestClient> client_;
  kube::Connection connection_{};
};

}  // namespace ekco::agent::testing
