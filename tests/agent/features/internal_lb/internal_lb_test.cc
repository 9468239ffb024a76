// The internal load balancer's node controller: discovery rules, the informer projections, the
// local-apiserver fallback, and what the controller writes and reloads (real files under a temp
// host root, a counting reloader).
#include "agent/features/internal_lb/internal_lb.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "tests/agent/cli_support.h"

namespace ekco::agent {
namespace {

using haproxy::Endpoint;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<Endpoint> eps(std::initializer_list<const char*> texts) {
  std::vector<Endpoint> out;
  for (const char* t : texts) out.push_back(*haproxy::parseEndpoint(t));
  return out;
}

TEST(DiscoverApiservers, FirstSourceWithEndpointsWinsOnceHigherRanksListed) {
  ObservedApiservers o;
  EXPECT_FALSE(discoverApiservers(o).settled);
  // Nodes listed but slices not: a slice could still win, so nothing is decided.
  o.nodes = {.settled = true, .endpoints = eps({"10.0.0.9"})};
  EXPECT_FALSE(discoverApiservers(o).settled);
  // Slices listed with endpoints: they win even before the others list.
  o.slices = {.settled = true, .endpoints = eps({"10.0.0.2", "10.0.0.1", "10.0.0.2"})};
  auto d = discoverApiservers(o);
  EXPECT_TRUE(d.settled);
  EXPECT_EQ(d.source, "endpointslices");
  EXPECT_EQ(d.endpoints, eps({"10.0.0.1", "10.0.0.2"}));  // sorted, de-duplicated
  // Empty slices fall through to Endpoints, then to nodes.
  o.slices.endpoints.clear();
  EXPECT_FALSE(discoverApiservers(o).settled);  // Endpoints not listed yet
  o.endpoints = {.settled = true, .endpoints = {}};
  d = discoverApiservers(o);
  EXPECT_EQ(d.source, "nodes");
  EXPECT_EQ(d.endpoints, eps({"10.0.0.9"}));
  o.nodes.endpoints.clear();
  d = discoverApiservers(o);
  EXPECT_TRUE(d.settled);
  EXPECT_TRUE(d.endpoints.empty());
  EXPECT_EQ(d.source, "");
}

TEST(EndpointsOfSlice, ReadyAddressesWithTheHttpsPort) {
  const json slice = json::parse(R"({
    "metadata": {"name": "kubernetes", "namespace": "default"},
    "addressType": "IPv4",
    "ports": [{"name": "metrics", "port": 9000}, {"name": "https", "port": 6443, "protocol": "TCP"}],
    "endpoints": [
      {"addresses": ["10.0.0.2"], "conditions": {"ready": true}},
      {"addresses": ["10.0.0.1"]},
      {"addresses": ["10.0.0.3"], "conditions": {"ready": false}}
    ]})");
  auto got = endpointsOfSlice(slice);
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(*got, eps({"10.0.0.1:6443", "10.0.0.2:6443"}));

  auto v6 = endpointsOfSlice(
      json::parse(R"({"ports": [{"port": 7443}], "endpoints": [{"addresses": ["FD00:0::1"]}]})"));
  ASSERT_TRUE(v6);
  EXPECT_EQ(*v6, eps({"[fd00::1]:7443"}));
  // No ports at all: the apiserver default.
  auto no_ports = endpointsOfSlice(json::parse(R"({"endpoints": [{"addresses": ["10.0.0.1"]}]})"));
  ASSERT_TRUE(no_ports);
  EXPECT_EQ(no_ports->at(0).port, 6443);
  auto empty = endpointsOfSlice(json::parse(R"({"endpoints": null})"));
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(EndpointsOfSlice, GarbageIsAParseErrorNamingTheObject) {
  for (
      const char* bad : {
          R"({"metadata": {"name": "x", "namespace": "default"}, "endpoints": [{"addresses": ["10.0.0.1 server evil"]}]})",
          R"({"metadata": {"name": "x", "namespace": "default"}, "endpoints": [{"addresses": ["10.0.0.1:80"]}]})",
          R"({"metadata": {"name": "x", "namespace": "default"}, "endpoints": [{"addresses": [7]}]})",
          R"({"metadata": {"name": "x", "namespace": "default"}, "endpoints": "no"})",
          R"({"metadata": {"name": "x", "namespace": "default"}, "ports": [{"port": 70000}], "endpoints": []})",
          R"({"metadata": {"name": "x", "namespace": "default"}, "ports": [{"port": "https"}], "endpoints": []})",
      }) {
    auto got = endpointsOfSlice(json::parse(bad));
    ASSERT_FALSE(got) << bad;
    EXPECT_EQ(got.error().code(), base::ErrorCode::kParse) << bad;
    EXPECT_THAT(got.error().message(), HasSubstr("EndpointSlice default/x")) << bad;
  }
}

TEST(EndpointsOfEndpoints, ReadyAddressesOfEverySubset) {
  const json object = json::parse(R"({
    "metadata": {"name": "kubernetes", "namespace": "default"},
    "subsets": [
      {"addresses": [{"ip": "10.0.0.2"}, {"ip": "10.0.0.1"}],
       "notReadyAddresses": [{"ip": "10.0.0.3"}],
       "ports": [{"name": "https", "port": 6443}]},
      {"addresses": [{"ip": "fd00::5"}], "ports": [{"port": 443}]}
    ]})");
  auto got = endpointsOfEndpoints(object);
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(*got, eps({"10.0.0.1:6443", "10.0.0.2:6443", "[fd00::5]:443"}));
  auto bad = endpointsOfEndpoints(json::parse(
      R"({"metadata": {"name": "kubernetes", "namespace": "default"}, "subsets": [{"addresses": [{"hostname": "x"}]}]})"));
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message(), HasSubstr("Endpoints default/kubernetes"));
}

TEST(EndpointsOfNodes, InternalIpsOnPort6443) {
  kube::NodeRecord a;
  a.addresses = {{.type = kube::Atom("Hostname"), .address = "cp-1"},
                 {.type = kube::Atom("InternalIP"), .address = "10.0.0.7"}};
  kube::NodeRecord b;  // no InternalIP: skipped
  b.addresses = {{.type = kube::Atom("Hostname"), .address = "cp-2"}};
  kube::NodeRecord c;
  c.addresses = {{.type = kube::Atom("InternalIP"), .address = "not an ip at all"}};
  EXPECT_EQ(endpointsOfNodes({a, b, c}), eps({"10.0.0.7:6443"}));
}

class HostRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fs = hostfs::LocalHostFs::open(dir_.path(), clock_);
    ASSERT_TRUE(fs) << fs.error().message();
    fs_ = std::move(*fs);
  }
  void put(const std::string& path, const std::string& content) {
    std::filesystem::create_directories(std::filesystem::path(dir_.path() + path).parent_path());
    std::ofstream(dir_.path() + path) << content;
  }
  std::string slurp(const std::string& path) const {
    std::ifstream in(dir_.path() + path);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  bool present(const std::string& path) const {
    return std::filesystem::exists(dir_.path() + path);
  }
  unsigned mode(const std::string& path) const {
    struct stat st {};
    EXPECT_EQ(::stat((dir_.path() + path).c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }

  testing::TempDir dir_{"ekco-lb"};
  base::ManualClock clock_;
  std::unique_ptr<hostfs::LocalHostFs> fs_;
};

using LocalApiserver = HostRootTest;

TEST_F(LocalApiserver, NotAPrimaryWithoutTheManifest) {
  auto got = localApiserver(*fs_);
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_FALSE(got->has_value());
}

TEST_F(LocalApiserver, KubeadmAnnotationFirst) {
  put("/etc/kubernetes/manifests/kube-apiserver.yaml", R"(apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint: 10.0.0.5:6443
  name: kube-apiserver
spec:
  containers:
  - command:
    - kube-apiserver
    - --advertise-address=10.0.0.99
)");
  auto got = localApiserver(*fs_);
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ(haproxy::formatEndpoint(**got), "10.0.0.5:6443");
}

TEST_F(LocalApiserver, FlagsThenLoopback) {
  put("/etc/kubernetes/manifests/kube-apiserver.yaml", R"(spec:
  containers:
  - command: [kube-apiserver, --bind-address=0.0.0.0, --advertise-address=10.0.0.6, --secure-port=7443]
)");
  auto got = localApiserver(*fs_);
  ASSERT_TRUE(got) << got.error().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(haproxy::formatEndpoint(**got), "10.0.0.6:7443");

  put("/etc/kubernetes/manifests/kube-apiserver.yaml",
      "spec:\n  containers:\n  - command: [kube-apiserver]\n");
  got = localApiserver(*fs_);
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ(haproxy::formatEndpoint(**got), "127.0.0.1:6443");

  put("/etc/kubernetes/manifests/kube-apiserver.yaml", "spec: [unclosed\n");
  got = localApiserver(*fs_);
  ASSERT_FALSE(got);
  EXPECT_THAT(got.error().message(), HasSubstr("kube-apiserver.yaml"));

  put("/etc/kubernetes/manifests/kube-apiserver.yaml",
      "spec:\n  containers:\n  - command: [kube-apiserver, --secure-port=http]\n");
  got = localApiserver(*fs_);
  ASSERT_FALSE(got);
  EXPECT_THAT(got.error().message(), HasSubstr("--secure-port"));
}

TEST_F(LocalApiserver, Ipv6LoopbackFromIfInet6) {
  EXPECT_FALSE(hasIpv6Loopback(*fs_));  // no file: no IPv6
  put("/proc/net/if_inet6", "fe800000000000000000000000000001 02 40 20 80     eth0\n");
  EXPECT_FALSE(hasIpv6Loopback(*fs_));
  put("/proc/net/if_inet6",
      "fe800000000000000000000000000001 02 40 20 80     eth0\n"
      "00000000000000000000000000000001 01 80 10 80       lo\n");
  EXPECT_TRUE(hasIpv6Loopback(*fs_));
}

class CountingReloader : public HaproxyReloader {
 public:
  base::Result<haproxy::ReloadResult> reload() override {
    ++calls;
    if (fail)
      return base::Error("kill 42: Operation not permitted", base::ErrorCode::kPermissionDenied);
    if (next) return *std::exchange(next, std::nullopt);
    return haproxy::ReloadResult{
        .masters = {42}, .confirmed = true, .detail = "reloaded master 42"};
  }
  int calls = 0;
  bool fail = false;
  std::optional<haproxy::ReloadResult> next;  // the next answer, once
};

class InternalLbTest : public HostRootTest {
 protected:
  // Without the settle delay unless a test asks for it (the clock is manual).
  InternalLoadBalancer& lb(InternalLbOptions options = {}, bool settle = false) {
    if (!settle) options.settle = std::chrono::milliseconds(0);
    lb_ = std::make_unique<InternalLoadBalancer>(
        *fs_, [this] { return observed_; }, reloader_, clock_, std::move(options));
    return *lb_;
  }
  void settle(std::vector<Endpoint> slices) {
    observed_.slices = {.settled = true, .endpoints = std::move(slices)};
    observed_.endpoints = {.settled = true, .endpoints = {}};
    observed_.nodes = {.settled = true, .endpoints = {}};
  }

  ObservedApiservers observed_;
  CountingReloader reloader_;
  std::unique_ptr<InternalLoadBalancer> lb_;
};

TEST_F(InternalLbTest, WritesConfigAndManifestOnceAndReloadsOnlyOnChange) {
  auto& c = lb();
  settle(eps({"10.0.0.2", "10.0.0.1"}));
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  const std::string cfg = slurp("/etc/haproxy/haproxy.cfg");
  EXPECT_THAT(cfg, HasSubstr("server k8s-primary-0 10.0.0.1:6443"));
  EXPECT_THAT(cfg, HasSubstr("server k8s-primary-1 10.0.0.2:6443"));
  EXPECT_THAT(cfg, HasSubstr("bind 127.0.0.1:6444"));
  EXPECT_EQ(mode("/etc/haproxy/haproxy.cfg"), 0644U);
  EXPECT_THAT(slurp("/etc/kubernetes/manifests/haproxy.yaml"), HasSubstr("app: kurl-haproxy"));
  EXPECT_EQ(mode("/etc/kubernetes/manifests/haproxy.yaml"), 0600U);
  EXPECT_EQ(reloader_.calls, 1);
  EXPECT_EQ(c.status()["backends"], json({"10.0.0.1:6443", "10.0.0.2:6443"}));
  EXPECT_EQ(c.status()["source"], "endpointslices");
  EXPECT_EQ(c.status()["last_reload"], "reloaded master 42");

  // Same endpoints: nothing written, no reload.
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(reloader_.calls, 1);

  // A primary leaves: the config changes, the manifest does not.
  const std::string manifest = slurp("/etc/kubernetes/manifests/haproxy.yaml");
  settle(eps({"10.0.0.2"}));
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(reloader_.calls, 2);
  EXPECT_THAT(slurp("/etc/haproxy/haproxy.cfg"), Not(HasSubstr("10.0.0.1:6443")));
  EXPECT_EQ(slurp("/etc/kubernetes/manifests/haproxy.yaml"), manifest);
}

TEST_F(InternalLbTest, ABurstOfChangesIsAppliedOnceItSettles) {
  auto& c = lb({.settle = std::chrono::milliseconds(100)}, /*settle=*/true);
  settle(eps({"10.0.0.1"}));
  auto r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_THAT(r->summary, HasSubstr("settling"));
  EXPECT_EQ(r->requeue_after, std::chrono::milliseconds(100));
  EXPECT_FALSE(present("/etc/haproxy/haproxy.cfg"));
  clock_.advance(std::chrono::milliseconds(60));
  settle(eps({"10.0.0.1", "10.0.0.2"}));  // the burst goes on: the wait starts again
  r = c.reconcile();
  EXPECT_EQ(r->requeue_after, std::chrono::milliseconds(100));
  clock_.advance(std::chrono::milliseconds(60));
  settle(eps({"10.0.0.2"}));
  ASSERT_TRUE(c.reconcile());
  clock_.advance(std::chrono::milliseconds(100));
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(slurp("/etc/haproxy/haproxy.cfg"), HasSubstr("10.0.0.2:6443"));
  EXPECT_THAT(slurp("/etc/haproxy/haproxy.cfg"), Not(HasSubstr("10.0.0.1:6443")));
  EXPECT_EQ(reloader_.calls, 1);  // one reload for the whole burst
  // Back to the applied set: nothing to wait for.
  r = c.reconcile();
  EXPECT_FALSE(r->requeue_after.has_value());
}

TEST_F(InternalLbTest, NeverAnEmptyBackendKeepsTheLastConfig) {
  auto& c = lb();
  settle(eps({"10.0.0.1"}));
  ASSERT_TRUE(c.reconcile());
  const std::string cfg = slurp("/etc/haproxy/haproxy.cfg");
  settle({});
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->summary, HasSubstr("kept 10.0.0.1:6443"));
  EXPECT_EQ(slurp("/etc/haproxy/haproxy.cfg"), cfg);
  EXPECT_EQ(reloader_.calls, 1);
  EXPECT_THAT(c.status()["problem"].get<std::string>(), HasSubstr("keeping the last config"));
}

TEST_F(InternalLbTest, ExistingConfigIsKeptAndReportedAfterARestart) {
  // EKCO's file (IPs without our extras): /status shows its servers before the caches list.
  put("/etc/haproxy/haproxy.cfg",
      "backend kubernetes-primaries\n"
      "    server k8s-primary-0 10.0.0.1:6443 weight 1 verify none check check-ssl\n"
      "    server k8s-primary-1 10.0.0.2:6443 weight 1 verify none check check-ssl\n");
  auto& c = lb();
  auto r = c.reconcile();  // nothing listed yet
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(c.status()["backends"], json({"10.0.0.1:6443", "10.0.0.2:6443"}));
  EXPECT_EQ(c.status()["source"], "file");
  EXPECT_FALSE(present("/etc/kubernetes/manifests/haproxy.yaml"));
  EXPECT_EQ(reloader_.calls, 0);
}

TEST_F(InternalLbTest, WorkerWithNothingKnownRefusesAndWritesNothing) {
  auto& c = lb();
  auto waiting = c.reconcile();  // caches not listed: not a failure yet
  ASSERT_TRUE(waiting) << waiting.error().message();
  EXPECT_THAT(waiting->summary, HasSubstr("waiting"));
  // Sources that list nothing call no handler: the controller looks again by itself.
  EXPECT_EQ(waiting->requeue_after, std::chrono::milliseconds(250));
  settle({});
  auto r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("refusing to write an empty backend"));
  EXPECT_FALSE(present("/etc/haproxy/haproxy.cfg"));
  EXPECT_FALSE(present("/etc/kubernetes/manifests/haproxy.yaml"));
  EXPECT_THAT(c.status()["problem"].get<std::string>(), HasSubstr("refusing"));
}

TEST_F(InternalLbTest, PrimaryWithNothingKnownFallsBackToItsOwnApiserver) {
  put("/etc/kubernetes/manifests/kube-apiserver.yaml",
      "spec:\n  containers:\n  - command: [kube-apiserver, --advertise-address=10.0.0.5]\n");
  auto& c = lb();
  ASSERT_TRUE(c.reconcile());  // the API is unreachable: nothing listed
  EXPECT_THAT(slurp("/etc/haproxy/haproxy.cfg"), HasSubstr("10.0.0.5:6443"));
  EXPECT_EQ(c.status()["source"], "local-apiserver");
  // Once the cluster answers, its endpoints replace the fallback.
  settle(eps({"10.0.0.5", "10.0.0.6"}));
  ASSERT_TRUE(c.reconcile());
  EXPECT_THAT(slurp("/etc/haproxy/haproxy.cfg"), HasSubstr("10.0.0.6:6443"));
  EXPECT_EQ(reloader_.calls, 2);
}

TEST_F(InternalLbTest, AFailedReloadIsRetriedOnTheNextReconcile) {
  auto& c = lb();
  settle(eps({"10.0.0.1"}));
  reloader_.fail = true;
  auto r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("reloading haproxy"));
  reloader_.fail = false;
  ASSERT_TRUE(c.reconcile());  // the config is unchanged, but the reload is still owed
  EXPECT_EQ(reloader_.calls, 2);
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(reloader_.calls, 2);
}

TEST_F(InternalLbTest, AnUnconfirmedReloadIsOwedAndRequeued) {
  auto& c = lb();
  settle(eps({"10.0.0.1"}));
  // The master was re-executing: not signalled, try again in a second.
  reloader_.next = haproxy::ReloadResult{.not_ready = {42}, .detail = "master 42 not ready"};
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->requeue_after, std::chrono::milliseconds(1000));
  EXPECT_EQ(c.status()["problem"], "master 42 not ready");
  // It rejected the config: try again in ten.
  reloader_.next =
      haproxy::ReloadResult{.masters = {42}, .detail = "master 42 started no new worker"};
  r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->requeue_after, std::chrono::milliseconds(10000));
  // Confirmed: nothing owed any more.
  r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->requeue_after.has_value());
  EXPECT_EQ(c.status()["problem"], "");
  EXPECT_EQ(reloader_.calls, 3);
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(reloader_.calls, 3);
  // No HAProxy running at all: nothing owed (the pod reads the file when it starts).
  settle(eps({"10.0.0.2"}));
  reloader_.next = haproxy::ReloadResult{.detail = "no HAProxy process serves it"};
  r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->requeue_after.has_value());
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(reloader_.calls, 4);
}

TEST_F(InternalLbTest, DryRunWritesNothingAndShowsThePlan) {
  auto& c = lb({.dry_run = true});
  settle(eps({"10.0.0.1"}));
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->plan, HasSubstr("write /etc/haproxy/haproxy.cfg"));
  EXPECT_THAT(r->plan, HasSubstr("write /etc/kubernetes/manifests/haproxy.yaml"));
  EXPECT_FALSE(present("/etc/haproxy/haproxy.cfg"));
  EXPECT_EQ(reloader_.calls, 0);
}

TEST_F(InternalLbTest, BindAndIpv6LoopbackReachTheFiles) {
  auto& c = lb({.bind = "127.0.0.1:7444", .bind_ipv6_loopback = true});
  settle(eps({"10.0.0.1"}));
  ASSERT_TRUE(c.reconcile());
  const std::string cfg = slurp("/etc/haproxy/haproxy.cfg");
  EXPECT_THAT(cfg, HasSubstr("bind 127.0.0.1:7444\n"));
  EXPECT_THAT(cfg, HasSubstr("bind [::1]:7444\n"));
  const std::string manifest = slurp("/etc/kubernetes/manifests/haproxy.yaml");
  EXPECT_THAT(manifest, HasSubstr("port: 7444"));
  EXPECT_THAT(manifest, HasSubstr("host: \"127.0.0.1\""));
}

}  // namespace
}  // namespace ekco::agent
