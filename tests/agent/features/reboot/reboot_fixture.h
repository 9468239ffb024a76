// The fixture the shutdown/startup tests share (tests/agent/features/reboot/reboot_test.cc for the
// procedures, tests/agent/features/reboot/shutdown_cmd_test.cc for the commands): ekco-kubesim
// in-process (HTTPS) with node-a/node-b and their pods, a temporary host root with a fake mount
// table (<root>/proc/mounts), and a log capture.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/features/reboot/reboot.h"
#include "base/log/log.h"
#include "hostfs/local_host_fs.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/log_capture.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent::testing {

using nlohmann::json;

constexpr const char* kPodUid = "0f0e0d0c-1111-2222-3333-444455556666";
constexpr const char* kBootId1 = "5d0a4c1e-2f3b-4a6c-8d9e-0a1b2c3d4e5f";
constexpr const char* kBootId2 = "9e8d7c6b-5a49-4837-a261-50f4e3d2c1b0";

inline json node(const std::string& name, bool unschedulable = false) {
  json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
            {"spec", json::object()},
            {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  if (unschedulable) n["spec"]["unschedulable"] = true;
  return n;
}

inline json pod(const std::string& ns, const std::string& name, const std::string& node_name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"nodeName", node_name}, {"containers", {{{"name", "c"}, {"image", "x"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

inline std::vector<json> cluster() {
  json app = pod("default", "app-1", "node-a");
  app["metadata"]["uid"] = kPodUid;
  app["spec"]["volumes"] = {{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "d"}}}}};
  json mirror = pod("default", "static-web-node-a", "node-a");
  mirror["metadata"]["annotations"] = {{"kubernetes.io/config.mirror", "abc"}};
  return {node("node-a"),
          node("node-b"),
          app,
          pod("default", "web-2", "node-a"),
          mirror,
          pod("kube-system", "kube-proxy-a", "node-a"),
          pod("openebs", "openebs-ndm-a", "node-a"),
          pod("longhorn-system", "longhorn-manager-a", "node-a"),
          pod("default", "app-b", "node-b"),
          pod("rook-ceph", "rook-ceph-operator-7d9f-abcde", "node-a"),
          pod("rook-ceph", "rook-ceph-mds-rook-shared-fs-a-5f6-xyz", "node-a"),
          pod("rook-ceph", "rook-ceph-osd-0-6c7-xyz", "node-a"),
          pod("rook-ceph", "rook-ceph-mds-rook-shared-fs-b-5f6-zzz", "node-b")};
}

inline const std::string kOtherMounts =
    "/dev/sda1 / ext4 rw,relatime 0 0\n"
    "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"
    "tmpfs /var/lib/kubelet/pods/" +
    std::string(kPodUid) + "/volumes/kubernetes.io~projected/kube-api-access-x tmpfs rw 0 0\n";
inline const std::string kPvcMount = "/dev/rbd0 /var/lib/kubelet/pods/" + std::string(kPodUid) +
                                     "/volumes/kubernetes.io~csi/pvc-1234/mount ext4 rw 0 0\n";
inline const std::string kCephFsMount =
    "10.0.0.1:6789,10.0.0.2:6789:/volumes/csi/csi-vol-1 "
    "/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-5678/globalmount ceph rw 0 0\n";

class RebootFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/root";
    std::filesystem::create_directories(root_ + "/proc");
    std::filesystem::create_directories(root_ + "/etc/kubernetes");
    writeBootId(kBootId1);
    startServer(cluster());
  }

  // The host's /proc/sys/kernel/random/boot_id (the shutdown beacon's proof of reboot).
  void writeBootId(const std::string& id) {
    std::filesystem::create_directories(root_ + "/proc/sys/kernel/random");
    std::ofstream(root_ + "/proc/sys/kernel/random/boot_id") << id << "\n";
  }

  void startServer(std::vector<json> objects) {
    client_.reset();
    transport_.reset();
    server_.reset();
    auto server = kubesim::Server::start({.out_dir = dir_.path() + "/sim", .objects = objects});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    auto process_fs = hostfs::LocalHostFs::open("/", clock_);
    ASSERT_TRUE(process_fs);
    process_fs_ = std::move(*process_fs);
    auto host_fs = hostfs::LocalHostFs::open(root_, clock_);
    ASSERT_TRUE(host_fs);
    host_fs_ = std::move(*host_fs);
    auto conn = kube::loadKubeconfig(*process_fs_, server_->kubeconfigPath());
    ASSERT_TRUE(conn) << conn.error().message();
    auto transport = kube::CurlTransport::create(*conn, process_fs_.get(), clock_,
                                                 {.connect_timeout = std::chrono::seconds(2)});
    ASSERT_TRUE(transport) << transport.error().message();
    transport_ = std::move(*transport);
    client_ = std::make_unique<kube::RestClient>(
        *transport_, clock_,
        kube::RestClientOptions{.request_timeout = std::chrono::seconds(2),
                                .retry = {.max_attempts = 2,
                                          .base_delay = std::chrono::milliseconds(1),
                                          .max_delay = std::chrono::milliseconds(5),
                                          .max_retry_after = std::chrono::milliseconds(5)}});
  }

  // Replaces the fake mount table atomically (as the kernel's view changes at once).
  void writeMounts(const std::string& text) {
    const std::string tmp = root_ + "/proc/.mounts.tmp";
    std::ofstream(tmp) << text;
    std::filesystem::rename(tmp, root_ + "/proc/mounts");
  }

  ShutdownOptions shutdownOptions() const {
    ShutdownOptions o;
    o.node_name = "node-a";
    o.excluded_namespaces = Config{}.shutdown_excluded_namespaces;
    o.unmount_timeout = std::chrono::seconds(20);
    o.deadline_margin = std::chrono::seconds(4);
    o.poll_interval = std::chrono::milliseconds(50);
    o.progress_interval = std::chrono::milliseconds(200);
    o.cordon_retry_delay = std::chrono::milliseconds(50);
    return o;
  }
  StartupOptions startupOptions() const {
    StartupOptions o;
    o.node_name = "node-a";
    o.api_timeout = std::chrono::seconds(5);
    o.poll_interval = std::chrono::milliseconds(100);
    o.progress_interval = std::chrono::milliseconds(500);
    return o;
  }

  json getNode(const std::string& name) {
    auto n = server_->get("nodes", "", name);
    EXPECT_TRUE(n.has_value()) << name;
    return n.value_or(json::object());
  }
  bool unschedulable(const std::string& name) {
    return getNode(name)["spec"].value("unschedulable", false);
  }
  std::map<std::string, std::string> ekcoAnnotations(const std::string& name) {
    std::map<std::string, std::string> out;
    json n = getNode(name);
    if (!n["metadata"].contains("annotations")) return out;
    for (const auto& [k, v] : n["metadata"]["annotations"].items()) {
      if (k.rfind("ekco.kurl.sh/", 0) == 0) out[k] = v.get<std::string>();
    }
    return out;
  }
  // Deleted: gone, or terminating (graceful deletion still running).
  bool deleted(const std::string& ns, const std::string& name) {
    auto p = server_->get("pods", ns, name);
    return !p || (*p)["metadata"].contains("deletionTimestamp");
  }

  TempDir dir_{"ekco-shutdown"};
  std::string root_;
  base::SystemClock clock_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<hostfs::LocalHostFs> process_fs_;
  std::unique_ptr<hostfs::LocalHostFs> host_fs_;
  std::unique_ptr<kube::CurlTransport> transport_;
  std::unique_ptr<kube::RestClient> client_;
};

}  // namespace ekco::agent::testing
