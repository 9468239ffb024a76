// ekco-demo: the real `ekco agent` on a simulated cluster (demo/cluster.h), narrated (README,
// Quick start 1).
//
// On loopback, with nothing installed system-wide and nothing left behind:
//   - ekco-kubesim (in-process) serves a 5-node cluster: primaries cp-1..cp-3 (127.0.0.11-13),
//   workers
//     worker-1/-2, a few workloads, kubeadm's ClusterStatus and the default/kubernetes
//     EndpointSlice; deploy/ (Namespace, ServiceAccount, RBAC, ConfigMap, DaemonSet) is loaded into
//     it and every agent authenticates as the ServiceAccount kurl/ekco, with the RBAC rules
//     enforced;
//   - a real 3-member etcd (TLS, 127.0.0.11-13; tests/fakes/etcd_cluster.h), when etcd is
//   installed;
//   - one `ekco agent` per node, each with its own temp host root (/etc/kubernetes, /etc/haproxy).
// Then cp-3 dies (its agent and etcd member are killed; the node controller marks it unreachable
// and the kubelet-less pods stay Terminating) and the demo prints what ekco does about it: the
// leader, the HAProxy configs on every node, the stuck pods cleared, cp-3 purged (etcd member,
// kubeadm ClusterStatus, Node). With Ceph installed (tests/ceph: real Ceph 16 daemons, OSDs on
// cp-1 and cp-2, Rook's custom resources in the API), worker-3 then joins: the leader adds it to
// the CephCluster's storage nodes, the demo plays Rook and starts an OSD there, and the leader
// raises the pools' replication and the mon count for three hosts. Then the cluster moves onto
// the internal load balancer: `ekco change-load-balancer --internal` on cp-1, carried out by the
// agents (demo/api_address_move.h: each primary's apiserver serving its own certificate, a mock
// systemd per node, a real HAProxy). Then the Events, `ekco status`, and the API calls it made.
// Every
// process it started is stopped and the work directory removed on every exit path (also Ctrl-C).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/serve/health_server.h"
#include "base/clock.h"
#include "base/os/process.h"
#include "bench/bench_support.h"
#include "demo/api_address_move.h"
#include "demo/cluster.h"
#include "demo/rook_join.h"
#include "kube/decode/timestamp.h"
#include "tests/ceph/ceph_fixture.h"
#include "tests/fakes/etcd_cluster.h"
#include "tests/kubesim/server/server.h"

namespace {

using ekco::bench::eventually;
using ekco::bench::fail;
using ekco::bench::g_children;
using ekco::bench::readFile;
using ekco::demo::apiserverSlice;
using ekco::demo::clusterStatus;
using ekco::demo::kDead;
using ekco::demo::kFirstOsds;
using ekco::demo::kJoining;
using ekco::demo::kJoiningOsd;
using ekco::demo::kNodes;
using ekco::demo::manifests;
using ekco::demo::nodeObject;
using ekco::demo::NodeSpec;
using ekco::demo::workloads;

using namespace ekco;  // NOLINT
namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

constexpr const char* kToken = "ekco-demo-service-account-token";
constexpr const char* kServiceAccount = "system:serviceaccount:kurl:ekco";
// The workers' agents run as deploy/30-daemonset.yaml's ekco-node DaemonSet runs them: their own
// ServiceAccount, never a candidate for the Lease.
constexpr const char* kNodeToken = "ekco-demo-node-service-account-token";
constexpr const char* kNodeServiceAccount = "system:serviceaccount:kurl:ekco-node";
constexpr int kToleration = 8;  // node_unreachable_toleration, seconds

const Steady::time_point g_start = Steady::now();

// "[ 12.3s] text": every line of the narrative, stamped with the time since the demo started.
void say(const std::string& text) {
  const double t = std::chrono::duration<double>(Steady::now() - g_start).count();
  std::printf("[%5.1fs] %s\n", t, text.c_str());
  std::fflush(stdout);
}
void heading(const std::string& text) {
  std::printf("\n== %s\n", text.c_str());
  std::fflush(stdout);
}

std::string stamp(base::WallTime t) { return kube::formatRfc3339(t); }

struct Agent {
  std::string node;
  fs::path root;
  std::string socket;
  std::string log;
  pid_t pid = -1;
};

class Demo {
 public:
  Demo(std::string ekco, fs::path source, fs::path work, bool keep)
      : ekco_(std::move(ekco)), source_(std::move(source)), work_(std::move(work)), keep_(keep) {}

  int run() {
    heading("Starting a simulated 5-node cluster on loopback");
    startEtcd();
    startCeph();
    prepareMove();
    startApi();
    writeConfig();
    startAgents();

    heading("The internal load balancer on every node");
    const std::vector<std::string> all = {"127.0.0.11:6443", "127.0.0.12:6443", "127.0.0.13:6443"};
    waitForBackends(all, "written");
    checkHaproxyConfig();

    heading("cp-3 dies");
    killCp3();

    heading("What ekco does about it");
    followRecovery();

    if (ceph_) {
      heading("worker-3 joins: Rook/Ceph storage follows");
      joinStorageNode();
    }

    if (move_) {
      heading("Moving the cluster onto the internal load balancer (ekco change-load-balancer)");
      moveApiAddress();
    }

    heading("Kubernetes Events ekco recorded");
    // The purge records its Events as it goes; give the last one a moment to land.
    eventually([&] { return !have_etcd_ || countEvents("PurgeEtcdMember") > 0; }, seconds(5));
    printEvents();

    heading("`ekco status` on cp-1 (the leader)");
    printStatus("cp-1");

    heading("API calls made by the agents (as " + std::string(kServiceAccount) + ")");
    printRequests();

    heading("Stopping everything the demo started");
    stopAll();
    return problems_ == 0 ? 0 : 1;
  }

 private:
  void startEtcd() {
    if (!fs::exists("/usr/bin/etcd")) {
      say("etcd is not installed (scripts/setup installs it): running without etcd, so cp-3 "
          "will be cleared but not purged");
      return;
    }
    etcd_->setVerbose(false);
    // Also on Ctrl-C; the hook owns the cluster, so it outlives this Demo.
    g_children.onCleanup([etcd = etcd_] { etcd->stop(); });
    auto started = etcd_->start();
    if (!started) fail("etcd: " + started.error().message());
    have_etcd_ = true;
    say("etcd: 3 members with mutual TLS on 127.0.0.11-13:2379 (kubeadm's certificates)");
  }

  void startApi() {
    std::vector<json> objects;
    for (const auto& n : kNodes) objects.push_back(nodeObject(n));
    std::vector<NodeSpec> primaries(kNodes.begin(), kNodes.begin() + 3);
    objects.push_back(kubesim::configMapObject("kube-system", "kubeadm-config",
                                               {{"ClusterStatus", clusterStatus(primaries)}}));
    objects.push_back(apiserverSlice({"127.0.0.11", "127.0.0.12", "127.0.0.13"}));
    for (auto& p : workloads()) objects.push_back(std::move(p));
    const std::vector<json> deploy = manifests(source_ / "deploy");
    objects.insert(objects.end(), deploy.begin(), deploy.end());
    // The cluster runs kURL's Prometheus add-on's namespace: resource-scaling's Role applies.
    const std::vector<json> monitoring = manifests(source_ / "deploy-monitoring");
    objects.insert(objects.end(), monitoring.begin(), monitoring.end());
    std::vector<kubesim::ExecReply> exec;
    if (ceph_) {
      std::vector<std::string> storage;
      for (const auto& n : kNodes) storage.push_back(n.name);
      for (auto& o : demo::rookObjects(storage, source_)) objects.push_back(std::move(o));
      exec.push_back(ceph_->toolsPodExec());
    }

    kubesim::ServerOptions options;
    options.out_dir = (work_ / "api").string();
    options.objects = std::move(objects);
    options.exec_script = std::move(exec);
    options.tokens = {{.token = kToken, .user = kServiceAccount, .groups = {}},
                      {.token = kNodeToken, .user = kNodeServiceAccount, .groups = {}}};
    // With the move: also each primary's apiserver at <ip>:6443, serving its own certificate.
    if (move_) {
      options.more_apiservers = move_->apiservers();
      options.tokens.push_back(move_->adminToken());
    }
    auto server = kubesim::Server::start(options);
    if (!server && move_) {
      say("ekco-kubesim cannot listen as the primaries' apiservers (" + server.error().message() +
          "): the demo runs without moving the API address");
      move_.reset();
      options.more_apiservers.clear();
      options.tokens.pop_back();
      server = kubesim::Server::start(options);
    }
    if (!server) fail("ekco-kubesim: " + server.error().message());
    api_ = std::move(*server);
    kubeconfig_ = (work_ / "api/ekco-sa.kubeconfig").string();
    auto written = api_->writeTokenKubeconfig(kubeconfig_, kToken);
    if (!written) fail(written.error().message());
    node_kubeconfig_ = (work_ / "api/ekco-node-sa.kubeconfig").string();
    written = api_->writeTokenKubeconfig(node_kubeconfig_, kNodeToken);
    if (!written) fail(written.error().message());
    say("API server: ekco-kubesim at " + api_->url() + " with 5 nodes, " +
        std::to_string(workloads().size()) + " pods and the " + std::to_string(deploy.size()) +
        " objects of deploy/ and the " + std::to_string(monitoring.size()) +
        " of deploy-monitoring/" +
        (ceph_ ? ", Rook's custom resources and deploy-rook-ceph/" : "") +
        " (RBAC enforced for the ServiceAccount kurl/ekco)");
  }

  // The primaries' PKI for the move onto the internal load balancer, before the API server
  // serves it.
  void prepareMove() {
    std::vector<demo::MoveNode> primaries;
    for (const auto& n : kNodes) {
      if (n.primary)
        primaries.push_back(
            {.name = n.name, .ip = n.ip, .primary = true, .root = work_ / "nodes" / n.name});
    }
    std::string why;
    move_ = demo::ApiAddressMove::prepare(work_ / "move", primaries, why);
    if (!move_)
      say("no PKI for the primaries (" + why + "): the demo will not move the API address");
  }

  void moveApiAddress() {
    demo::ApiAddressMove::Run r{.ekco = ekco_,
                                .config = config_,
                                .source = source_,
                                .nodes = {},
                                .exclude = {},
                                .api = api_.get(),
                                .say = say,
                                .problem = [this](const std::string& text) { problem(text); }};
    for (const Agent& a : agents_) {
      if (dead_.contains(a.node)) {
        // A dead node still in the cluster (not purged without etcd) is left alone.
        if (api_->get("nodes", "", a.node)) r.exclude.push_back(a.node);
        continue;
      }
      const NodeSpec& spec =
          a.node == kJoining.name
              ? kJoining
              : *std::find_if(kNodes.begin(), kNodes.end(),
                              [&](const NodeSpec& n) { return n.name == a.node; });
      r.nodes.push_back(
          {.name = spec.name, .ip = spec.ip, .primary = spec.primary, .root = a.root});
    }
    move_->run(r);
  }

  void startCeph() {
    ceph_ = demo::startRookCeph((work_ / "ceph").string(), kFirstOsds, say);
    if (ceph_) g_children.onCleanup([ceph = ceph_] { ceph->stop(); });
  }

  void writeConfig() {
    config_ = (work_ / "config.yaml").string();
    std::ofstream(config_) << "# The demo's timings: seconds where a cluster uses minutes.\n"
                              "leader_election_lease_duration: 3s\n"
                              "leader_election_renew_deadline: 2s\n"
                              "leader_election_retry_period: 500ms\n"
                              "node_unreachable_toleration: "
                           << kToleration
                           << "s\n"
                              "clear_pod_deletion_grace: 1s\n"
                              "purge_dead_nodes: "
                           << (have_etcd_ ? "true" : "false")
                           << "\n"
                              "min_ready_master_nodes: 2\n"
                              "enable_internal_load_balancer: true\n"
                              "disable_reboot_service: true\n"
                           << (ceph_ ? "maintain_rook_storage_nodes: true\n"
                                       "# how soon the leader sees an OSD come up\n"
                                       "reconcile_interval: 2s\n"
                                     : "");
    say("config: purge_dead_nodes: " + std::string(have_etcd_ ? "true" : "false") +
        ", enable_internal_load_balancer: true, node_unreachable_toleration: " +
        std::to_string(kToleration) + "s" +
        (ceph_ ? ", maintain_rook_storage_nodes: true, reconcile_interval: 2s" : "") +
        " (shown by `ekco config show`)");
  }

  Agent& agent(const std::string& name) {
    for (auto& a : agents_) {
      if (a.node == name) return a;
    }
    fail("no agent for " + name);
  }

  json status(const Agent& a) {
    auto reply = agent::queryHealthSocket(a.socket, "/status", milliseconds(2000));
    if (!reply || reply->status != 200) return nullptr;
    return json::parse(reply->body, nullptr, false);
  }

  void startAgent(const NodeSpec& n) {
    Agent a;
    a.node = n.name;
    a.root = work_ / "nodes" / n.name;
    fs::create_directories(a.root / "etc/kubernetes");
    if (move_) {
      move_->writeHostFiles({.name = n.name, .ip = n.ip, .primary = n.primary, .root = a.root});
    } else {
      std::ofstream(a.root / "etc/kubernetes/kubelet.conf") << "# joined by kubeadm\n";
    }
    if (n.primary && have_etcd_) {
      // kubeadm's etcd client certificates, which the leader uses to remove a dead member.
      fs::create_directories(a.root / "etc/kubernetes/pki");
      fs::copy(etcd_->pki(), a.root / "etc/kubernetes/pki/etcd", fs::copy_options::recursive);
    }
    a.socket = (work_ / (n.name + ".sock")).string();
    a.log = (work_ / (n.name + ".log")).string();
    std::vector<std::string> args = {ekco_,          "agent",         "--config",    config_,
                                     "--kubeconfig", kubeconfig_,     "--node-name", n.name,
                                     "--host-root",  a.root.string(), "--socket",    a.socket};
    if (!n.primary) {
      args[5] = node_kubeconfig_;
      args.push_back("--leader-election-candidate=false");
    }
    a.pid = g_children.spawn(args, a.log);
    if (a.pid <= 0) fail("cannot start " + ekco_);
    agents_.push_back(a);
  }

  void startAgents() {
    // cp-1 first, so that it leads (the demo kills cp-3, not the leader).
    startAgent(kNodes[0]);
    const auto started = Steady::now();
    if (!eventually(
            [&] {
              json s = status(agents_[0]);
              return s.is_object() && s.value("is_leader", false) && s.value("ready", false);
            },
            seconds(30))) {
      fail("cp-1's agent did not become the ready leader within 30 s:\n" +
           readFile(agents_[0].log));
    }
    say(fmt::format("ekco agent on cp-1: leader (Lease kurl/ekco-leader) {:.1f} s after it started",
                    std::chrono::duration<double>(Steady::now() - started).count()));
    for (std::size_t i = 1; i < kNodes.size(); ++i) startAgent(kNodes[i]);
    for (auto& a : agents_) {
      if (!eventually(
              [&] {
                json s = status(a);
                return s.is_object() && s.value("ready", false);
              },
              seconds(30))) {
        fail("the agent on " + a.node + " did not become ready within 30 s:\n" + readFile(a.log));
      }
    }
    std::string followers;
    for (std::size_t i = 1; i < agents_.size(); ++i) followers += " " + agents_[i].node;
    say("ekco agents on" + followers + ": ready, following cp-1");
  }

  // The `server` lines of a node's haproxy.cfg, as "ip:port".
  static std::vector<std::string> backends(const Agent& a) {
    std::vector<std::string> out;
    std::ifstream in(a.root / "etc/haproxy/haproxy.cfg");
    std::string line;
    while (std::getline(in, line)) {
      const auto pos = line.find_first_not_of(" \t");
      if (pos == std::string::npos || line.compare(pos, 7, "server ") != 0) continue;
      std::istringstream words(line.substr(pos));
      std::string kw;
      std::string name;
      std::string address;
      words >> kw >> name >> address;
      out.push_back(address);
    }
    return out;
  }

  void waitForBackends(const std::vector<std::string>& want, const std::string& verb) {
    std::set<std::string> done;
    const auto deadline = Steady::now() + seconds(20);
    while (done.size() < agents_.size() - dead_.size() && Steady::now() < deadline) {
      for (const auto& a : agents_) {
        if (done.contains(a.node) || dead_.contains(a.node)) continue;
        if (backends(a) == want) {
          done.insert(a.node);
          say(a.node + ": /etc/haproxy/haproxy.cfg " + verb + ", " + std::to_string(want.size()) +
              " backends: " + fmt::format("{}", fmt::join(want, " ")) +
              (fs::exists(a.root / "etc/kubernetes/manifests/haproxy.yaml")
                   ? "; static pod /etc/kubernetes/manifests/haproxy.yaml"
                   : ""));
        }
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    for (const auto& a : agents_) {
      if (!done.contains(a.node) && !dead_.contains(a.node)) {
        problem(a.node + ": haproxy.cfg does not list " + fmt::format("{}", fmt::join(want, " ")) +
                " (it lists " + fmt::format("{}", fmt::join(backends(a), " ")) + ")");
      }
    }
  }

  void checkHaproxyConfig() {
    if (!fs::exists("/usr/sbin/haproxy")) return;
    base::SystemClock clock;
    base::BoostProcessRunner runner(clock);
    base::ProcessRequest request;
    request.argv = {"/usr/sbin/haproxy", "-c", "-f",
                    (agents_[0].root / "etc/haproxy/haproxy.cfg").string()};
    request.timeout = seconds(10);
    auto result = runner.run(request);
    if (result && result->success()) {
      say("`haproxy -c` accepts cp-1's config (HAProxy on each node listens on 127.0.0.1:6444)");
    } else {
      problem("haproxy -c rejects cp-1's config: " +
              (result ? result->stderr_data : result.error().message()));
    }
  }

  void killCp3() {
    Agent& a = agent(kNodes[kDead].name);
    ::kill(-a.pid, SIGKILL);
    ::waitpid(a.pid, nullptr, 0);
    dead_.insert(a.node);
    if (have_etcd_) etcd_->kill(static_cast<int>(kDead));
    say("cp-3 lost power: its ekco agent" + std::string(have_etcd_ ? " and etcd member" : "") +
        " are gone (SIGKILL)");
    // What the control plane does next: the node controller marks the node unreachable, the
    // endpoint reconciler drops its apiserver, the taint manager evicts its pods, which stay
    // Terminating because no kubelet confirms.
    const base::WallTime now = std::chrono::floor<seconds>(wall_.wallNow());
    put(kubesim::unreachableNode(nodeObject(kNodes[kDead]), stamp(now)));
    put(apiserverSlice({"127.0.0.11", "127.0.0.12"}));
    for (const json& p : workloads()) {
      if (p["spec"]["nodeName"] != "cp-3") continue;
      json terminating = p;
      terminating["metadata"]["deletionTimestamp"] = stamp(now);
      terminating["metadata"]["deletionGracePeriodSeconds"] = 30;
      put(terminating);
      stuck_.push_back({p["metadata"]["namespace"], p["metadata"]["name"]});
    }
    killed_at_ = Steady::now();
    threshold_ = now + seconds(kToleration);
    say("control plane: Node cp-3 Ready=Unknown with the unreachable taints; apiserver "
        "127.0.0.13 out of default/kubernetes; " +
        std::to_string(stuck_.size()) + " pods on cp-3 stuck Terminating (no kubelet)");
  }

  void put(const json& object) {
    auto r = api_->put(object);
    if (!r) fail("put " + object["metadata"].value("name", "") + ": " + r.error().message());
  }

  void followRecovery() {
    std::thread lb([this] {
      waitForBackends({"127.0.0.11:6443", "127.0.0.12:6443"}, "updated (cp-3's apiserver dropped)");
    });
    std::set<std::pair<std::string, std::string>> gone;
    std::string last_step;
    bool purged = false;
    const auto deadline = Steady::now() + seconds(kToleration + 45);
    while (Steady::now() < deadline && (gone.size() < stuck_.size() || (have_etcd_ && !purged))) {
      for (const auto& [ns, name] : stuck_) {
        if (gone.contains({ns, name}) || api_->get("pods", ns, name)) continue;
        gone.insert({ns, name});
        say(fmt::format(
            "pod {}/{} force-deleted by the leader, {} ms after cp-3 was dead "
            "(unreachable + node_unreachable_toleration {} s)",
            ns, name,
            std::chrono::duration_cast<milliseconds>(wall_.wallNow() - threshold_).count(),
            kToleration));
      }
      auto node = api_->get("nodes", "", "cp-3");
      if (node) {
        const std::string step = (*node)["metadata"]
                                     .value("annotations", json::object())
                                     .value("ekco.kurl.sh/purge-step", "");
        if (!step.empty() && step != last_step) {
          say("purge of cp-3 in progress: step " + step +
              " done (Node annotation "
              "ekco.kurl.sh/purge-step)");
          last_step = step;
        }
      } else if (!purged) {
        purged = true;
        say(fmt::format("Node cp-3 deleted: purge finished {:.1f} s after cp-3 died",
                        secondsSinceKill()));
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    lb.join();
    if (gone.size() < stuck_.size()) problem("not every stuck pod on cp-3 was cleared");
    if (have_etcd_ && !purged) problem("cp-3 was not purged");
    if (purged) {
      auto listed = etcd_->memberList(etcd_->endpoint(0));
      if (listed) {
        std::string names;
        std::istringstream lines(*listed);
        std::string line;
        int count = 0;
        while (std::getline(lines, line)) {
          ++count;
          // "id, started, name, peer, client, learner"
          std::vector<std::string> fields;
          std::istringstream cols(line);
          std::string col;
          while (std::getline(cols, col, ','))
            fields.push_back(col.substr(col.find_first_not_of(' ')));
          if (fields.size() > 2) names += (names.empty() ? "" : ", ") + fields[2];
        }
        say(fmt::format("etcd (`etcdctl member list`): {} members: {}", count, names));
        if (names.find("cp-3") != std::string::npos) problem("etcd still lists cp-3");
      } else {
        problem(listed.error().message());
      }
      auto cm = api_->get("configmaps", "kube-system", "kubeadm-config");
      const std::string cs = cm ? (*cm)["data"].value("ClusterStatus", "") : "";
      say(std::string("kubeadm-config ClusterStatus: ") + (cs.find("cp-3") == std::string::npos
                                                               ? "cp-3's apiEndpoint removed"
                                                               : "still lists cp-3"));
      if (cs.find("cp-3") != std::string::npos) problem("kubeadm-config still lists cp-3");
    }
    const bool others_intact = api_->get("pods", "default", "web-5d8f7-cp-1").has_value() &&
                               api_->get("nodes", "", "cp-1").has_value();
    say(std::string("pods and nodes elsewhere untouched: ") + (others_intact ? "yes" : "NO"));
    if (!others_intact) problem("ekco touched a live node's pods");
  }

  void joinStorageNode() {
    demo::runRookJoin({.api = *api_,
                       .ceph = *ceph_,
                       .node = kJoining.name,
                       .node_ip = kJoining.ip,
                       .osd = kJoiningOsd,
                       .say = say,
                       .problem = [this](const std::string& text) { problem(text); },
                       .join =
                           [this] {
                             put(nodeObject(kJoining));
                             startAgent(kJoining);
                           }});
    // The agent on worker-3 follows the leader like the others.
    if (!eventually(
            [&] {
              json st = status(agent(kJoining.name));
              return st.is_object() && st.value("ready", false);
            },
            seconds(30))) {
      problem("the agent on worker-3 did not become ready");
    }
  }

  double secondsSinceKill() const {
    return std::chrono::duration<double>(Steady::now() - killed_at_).count();
  }

  int countEvents(const std::string& reason) {
    auto events = api_->store().list(*api_->store().findQualified("events"), "", {});
    int n = 0;
    for (const json& e : events.body["items"]) n += e.value("reason", "") == reason ? 1 : 0;
    return n;
  }

  void printEvents() {
    auto events = api_->store().list(*api_->store().findQualified("events"), "", {});
    std::vector<json> items(events.body["items"].begin(), events.body["items"].end());
    auto version = [](const json& e) {
      return std::stoull(e["metadata"].value("resourceVersion", "0"));
    };
    std::sort(items.begin(), items.end(),
              [&](const json& a, const json& b) { return version(a) < version(b); });
    for (const json& e : items) {
      const json& involved = e.value("involvedObject", json::object());
      std::string object = involved.value("kind", "") + " ";
      if (!involved.value("namespace", "").empty()) object += involved.value("namespace", "") + "/";
      object += involved.value("name", "");
      std::printf("  %-8s %-22s %-36s %s\n", e.value("type", "").c_str(),
                  e.value("reason", "").c_str(), object.c_str(), e.value("message", "").c_str());
    }
    std::fflush(stdout);
  }

  void printStatus(const std::string& node) {
    base::SystemClock clock;
    base::BoostProcessRunner runner(clock);
    base::ProcessRequest request;
    request.argv = {ekco_, "status", "--socket", agent(node).socket};
    request.timeout = seconds(10);
    auto result = runner.run(request);
    if (!result) {
      problem("ekco status: " + result.error().message());
      return;
    }
    std::fputs(result->stdout_data.c_str(), stdout);
    if (!result->stderr_data.empty()) std::fputs(result->stderr_data.c_str(), stdout);
    std::fflush(stdout);
  }

  void printRequests() {
    std::map<std::string, int> calls;  // "verb resource (namespace)" -> count
    int total = 0;
    int denied = 0;
    for (const auto& r : api_->requestLog()) {
      if ((r.user != kServiceAccount && r.user != kNodeServiceAccount) || r.resource.empty()) {
        continue;
      }
      ++total;
      std::string key = std::string(r.user == kNodeServiceAccount ? "ekco-node: " : "ekco: ") +
                        r.verb + " " + r.resource;
      if (!r.subresource.empty()) key += "/" + r.subresource;
      if (!r.api_group.empty()) key += "." + r.api_group;
      key += r.ns.empty() ? " (cluster)" : " (" + r.ns + ")";
      ++calls[key];
      if (!r.allowed) {
        ++denied;
        problem("forbidden: " + key + " " + r.name);
      }
    }
    for (const auto& [key, count] : calls) std::printf("  %5d  %s\n", count, key.c_str());
    say(fmt::format(
        "{} API requests by the agents, {} forbidden by the RBAC of deploy/, deploy-monitoring/{}",
        total, denied, ceph_ ? " and deploy-rook-ceph/" : ""));
  }

  void stopAll() {
    int stopped = 0;
    for (auto& a : agents_) {
      if (dead_.contains(a.node)) continue;
      ::kill(-a.pid, SIGTERM);
      ++stopped;
    }
    for (auto& a : agents_) {
      if (dead_.contains(a.node)) continue;
      if (!eventually([&] { return !g_children.running(a.pid); }, seconds(10))) {
        ::kill(-a.pid, SIGKILL);
      }
    }
    auto lease = api_->get("leases.coordination.k8s.io", "kurl", "ekco-leader");
    const std::string holder =
        lease ? (*lease)["spec"].value("holderIdentity", "") : std::string("<no Lease>");
    say(fmt::format("stopped {} agents with SIGTERM; Lease kurl/ekco-leader {}", stopped,
                    holder.empty() ? "released by the leader" : "still held by " + holder));
    api_->stop();
    etcd_->stop();
    if (ceph_) ceph_->stop();
    say(fmt::format(
        "stopped {}{}the API server; {} {}", have_etcd_ ? "the 2 etcd members left, " : "",
        ceph_ ? "the Ceph daemons, " : "", keep_ ? "kept" : "removing", work_.string()));
    if (problems_ > 0) say(fmt::format("{} PROBLEM(S), see above", problems_));
  }

  void problem(const std::string& text) {
    ++problems_;
    say("PROBLEM: " + text);
  }

  std::string ekco_;
  fs::path source_;
  fs::path work_;
  bool keep_ = false;
  std::shared_ptr<fakes::EtcdCluster> etcd_ =
      std::make_shared<fakes::EtcdCluster>(std::array<std::string, 3>{"cp-1", "cp-2", "cp-3"});
  bool have_etcd_ = false;
  std::shared_ptr<testing::CephFixture> ceph_;
  std::unique_ptr<demo::ApiAddressMove> move_;  // null: the demo does not move the API address
  std::unique_ptr<kubesim::Server> api_;
  std::string kubeconfig_;       // kurl/ekco's, for the control-plane agents
  std::string node_kubeconfig_;  // kurl/ekco-node's, for the workers
  std::string config_;
  std::vector<Agent> agents_;
  std::set<std::string> dead_;
  std::vector<std::pair<std::string, std::string>> stuck_;
  Steady::time_point killed_at_{};
  base::WallTime threshold_{};  // when cp-3 counts as dead
  base::SystemClock wall_;
  int problems_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ekco-demo: the real ekco agent on a simulated 5-node cluster, narrated"};
  std::string ekco = "build/ekco";
  std::string source = ".";
  bool keep = false;
  app.add_option("--ekco", ekco, "The ekco binary")->check(CLI::ExistingFile);
  app.add_option("--source", source, "The checkout (its deploy/ is loaded into the cluster)")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--keep", keep, "Keep the work directory (agents' logs, host roots)");
  CLI11_PARSE(app, argc, argv);
  // Output piped into `head` that exits early must not kill the demo before it cleans up.
  std::signal(SIGPIPE, SIG_IGN);
  return ekco::bench::runBench("ekco-demo", [&] {
    std::string tmpl = (fs::temp_directory_path() / "ekco-demo-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) fail("mkdtemp failed");
    g_children.setWorkDir(tmpl, keep);
    Demo demo(fs::absolute(ekco).string(), fs::absolute(source), tmpl, keep);
    return demo.run();
  });
}
