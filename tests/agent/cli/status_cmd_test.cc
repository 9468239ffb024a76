#include "agent/cli/status_cmd.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>

#include <fstream>

#include "agent/cli/cli.h"
#include "agent/serve/health_server.h"
#include "base/clock.h"
#include "base/os/unique_fd.h"
#include "kube/decode/timestamp.h"
#include "tests/agent/cli_support.h"

namespace ekco::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
using nlohmann::json;

using testing::TempDir;

base::WallTime at(std::string_view rfc3339) { return *kube::parseRfc3339(rfc3339); }

// The document of the issue, with two controllers, two caches and a host check.
json sampleStatus() {
  return json::parse(R"json({
    "node": "node-a", "version": "0.1.0 (abc1234)", "leader": "node-b", "is_leader": false,
    "lease": {"holder": "node-b", "renew_time": "2026-11-22T10:00:00.123456Z",
              "acquire_time": "2026-11-22T08:00:00Z", "transitions": 3},
    "ready": true, "ready_reason": "", "api_reachable": true,
    "caches": [{"name": "nodes", "synced": true, "objects": 5, "last_error": ""},
               {"name": "pods", "synced": false, "objects": 0, "last_error": "list pods: 503"}],
    "controllers": [
      {"name": "internal-load-balancer", "scope": "node", "last_run": "2026-11-22T10:00:00Z",
       "last_result": "config unchanged", "last_error": "", "next_run": "2026-11-22T10:01:00Z",
       "last_plan": "nothing to do", "runs": 12, "errors": 0},
      {"name": "clear-nodes", "scope": "cluster", "last_run": "2026-11-22T09:57:58Z",
       "last_result": "", "last_error": "drain node-c:\nevict pod x: 429", "next_run": null,
       "runs": 4, "errors": 1}],
    "host_checks": [{"name": "haproxy-config", "ok": true,
                     "message": "/etc/haproxy/haproxy.cfg up to date"}]
  })json");
}

TEST(StatusTable, RendersEveryPartOfTheDocument) {
  const std::string table =
      renderStatusTable(sampleStatus(), Readiness{.ready = true}, at("2026-11-22T10:00:03Z"));
  EXPECT_EQ(table,
            "node:               node-a\n"
            "version:            0.1.0 (abc1234)\n"
            "ready:              yes\n"
            "api reachable:      yes\n"
            "leader:             node-b\n"
            "is leader:          no\n"
            "lease holder:       node-b\n"
            "lease renewed:      2s ago (2026-11-22T10:00:00.123456Z)\n"
            "lease transitions:  3\n"
            "\n"
            "CACHE  SYNCED  OBJECTS  LAST ERROR\n"
            "nodes  yes     5        -\n"
            "pods   no      0        list pods: 503\n"
            "\n"
            "CONTROLLER              SCOPE    LAST RUN  LAST RESULT       NEXT RUN  RUNS  ERRORS  "
            "LAST ERROR\n"
            "internal-load-balancer  node     3s ago    config unchanged  in 57s    12    0       "
            "-\n"
            "clear-nodes             cluster  2m5s ago  -                 -         4     1       "
            "drain node-c: evict pod x: 429\n"
            "\n"
            "HOST CHECK      OK   MESSAGE\n"
            "haproxy-config  yes  /etc/haproxy/haproxy.cfg up to date\n");
}

TEST(StatusTable, ShowsTheInternalLoadBalancerWhenEnabled) {
  json doc = sampleStatus();
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              Not(HasSubstr("internal load balancer")));
  doc["internal_load_balancer"] = json::parse(R"json({
    "config": "/etc/haproxy/haproxy.cfg", "bind": "127.0.0.1:6444",
    "backends": ["10.0.0.1:6443", "10.0.0.2:6443"], "source": "endpointslices",
    "written_at": "2026-11-22T09:58:00Z", "last_reload": "reloaded master 812 (new worker 990)",
    "reloaded_at": "2026-11-22T09:58:00Z", "problem": ""})json");
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              HasSubstr("\ninternal load balancer (127.0.0.1:6444):\n"
                        "  backends:     10.0.0.1:6443, 10.0.0.2:6443\n"
                        "  from:         endpointslices (written 2m3s ago)\n"
                        "  last reload:  reloaded master 812 (new worker 990) (2m3s ago)\n"
                        "  problem:      -\n"));
  doc["internal_load_balancer"] =
      json::parse(R"json({"backends": [], "problem": "no apiserver\nknown"})json");
  const std::string t =
      renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z"));
  EXPECT_THAT(t, HasSubstr("  backends:     -\n"));
  EXPECT_THAT(t, HasSubstr("  problem:      no apiserver known\n"));
}

// A change of the API address: the leader's steps, and a node's own last step.
TEST(StatusTable, ShowsAnApiAddressChangeStepByStep) {
  json doc = sampleStatus();
  doc["api_address"] = json::parse(R"json({"request": null})json");
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              Not(HasSubstr("API address")));
  doc["api_address"] = json::parse(R"json({
    "request": {"id": "r1", "server": "https://localhost:6444"},
    "summary": "kubeconfigs on worker-1",
    "progress": {"steps": [
      {"node": "cp-1", "step": "certificate", "state": "done"},
      {"node": "worker-1", "step": "kubeconfigs", "state": "running"}]}})json");
  doc["api_address_node"] =
      json::parse(R"json({"step": "certificate", "state": "done", "why": "re-issued"})json");
  const std::string t =
      renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z"));
  EXPECT_THAT(t, HasSubstr("\nAPI address change to https://localhost:6444 (request r1): "
                           "kubeconfigs on worker-1\n"));
  EXPECT_THAT(t, ::testing::ContainsRegex("certificate +cp-1 +done"));
  EXPECT_THAT(t, ::testing::ContainsRegex("kubeconfigs +worker-1 +running"));
  EXPECT_THAT(t, HasSubstr("this node's API address step: certificate done (re-issued)\n"));
}

// The shutdown inhibitor (agent/features/reboot/shutdown_inhibitor.h): held or not, and logind's
// delay against what the drain needs.
TEST(StatusTable, ShowsTheShutdownInhibitorAndWarnsWhenLogindsDelayIsTooShort) {
  json doc = sampleStatus();
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              Not(HasSubstr("shutdown inhibitor")));
  doc["shutdown_inhibitor"] = json::parse(R"json({"held": true, "state": "waiting",
    "inhibit_delay_max": "5s", "drain_bound": "5m30s", "delay_too_short": true, "drains": 0,
    "last_drain": "", "last_error": ""})json");
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              HasSubstr("shutdown inhibitor:  held, logind InhibitDelayMaxSec 5s for a drain of "
                        "up to 5m30s (warning: too short: logind goes on before a long drain "
                        "ends; raise it in /etc/systemd/logind.conf.d/)\n"));
  doc["shutdown_inhibitor"]["inhibit_delay_max"] = "10m";
  doc["shutdown_inhibitor"]["delay_too_short"] = false;
  EXPECT_EQ(shutdownInhibitorLine(doc["shutdown_inhibitor"]),
            "held, logind InhibitDelayMaxSec 10m for a drain of up to 5m30s");
  EXPECT_EQ(
      shutdownInhibitorLine(json::parse(R"json({"held": false, "state": "unavailable",
    "inhibit_delay_max": null, "drain_bound": "5m30s", "last_error": "connect to logind at x:\nNo such file"})json")),
      "not held (connect to logind at x: No such file); ekco-reboot.service's stop job drains");
  EXPECT_EQ(shutdownInhibitorLine(json::parse(R"json({"held": false, "state": "released",
    "last_drain": "drained", "inhibit_delay_max": "5s", "drain_bound": "5m30s",
    "delay_too_short": true})json"))
                .substr(0, 37),
            "released after the drain (drained), l");
}

// Maintenance mode (issue 19): a head line, and the paused controllers say why.
TEST(StatusTable, ShowsMaintenanceModeAndWhichControllersItPauses) {
  json doc = sampleStatus();
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              Not(HasSubstr("maintenance")));  // an agent from before maintenance mode
  doc["maintenance"] = {{"on", false}, {"synced", true}};
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              HasSubstr("maintenance:        off\n"));
  doc["maintenance"] = {{"on", true},
                        {"synced", true},
                        {"reason", "storage migration"},
                        {"until", "2026-11-22T11:00:03Z"}};
  doc["controllers"][1]["paused"] = "maintenance (storage migration)";
  const std::string t =
      renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z"));
  EXPECT_THAT(t, HasSubstr("maintenance:        on (storage migration), until in 1h\n"));
  EXPECT_THAT(t, HasSubstr("paused: maintenance (storage migration)"));
  EXPECT_THAT(t, HasSubstr("config unchanged"));  // the load balancer is not paused
}

TEST(StatusTable, ListsTheNodesInPlannedShutdownOrTaintedByEkcoOnTheLeader) {
  json doc = sampleStatus();
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              Not(HasSubstr("NODE  STATE")));
  doc["node_recovery"] = json::parse(R"json({"nodes": [
    {"node": "node-b", "state": "tainted", "since": "2026-11-22T09:59:03Z",
     "reason": "tainted out-of-service by ekco; waiting for the node to come back"},
    {"node": "node-c", "state": "shutting-down", "since": "2026-11-22T10:00:00Z",
     "reason": "shutting down"}]})json");
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              HasSubstr("\nNODE    STATE          SINCE   REASON\n"
                        "node-b  tainted        1m ago  tainted out-of-service by ekco; waiting "
                        "for the node to come back\n"
                        "node-c  shutting-down  3s ago  shutting down\n"));
  doc["node_recovery"]["nodes"] = json::array();
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              HasSubstr("node recovery: none\n"));
}

TEST(StatusTable, ShowsDaysLeftPerCertificateOnAControlPlaneNode) {
  json doc = sampleStatus();
  doc["certificates"] = json::parse(R"json({"control_plane": false, "certificates": []})json");
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              Not(HasSubstr("certificate renewal")));
  doc["certificates"] = json::parse(R"json({"control_plane": true,
    "certificates": [
      {"name": "apiserver", "file": "/etc/kubernetes/pki/apiserver.crt", "ca": "ca",
       "expires": "2026-12-02T10:00:00Z", "days_left": 10, "due": true, "missing": false},
      {"name": "super-admin.conf", "missing": true, "due": false}],
    "renewal": {"state": "failed", "message": "not verified within 3m",
                "next_attempt": "2026-11-22T10:10:03Z"}})json");
  const std::string t =
      renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z"));
  EXPECT_THAT(t, HasSubstr("CERTIFICATE       EXPIRES               DAYS LEFT  CA  RENEW  PROBLEM\n"
                           "apiserver         2026-12-02T10:00:00Z  10         ca  yes    -\n"
                           "super-admin.conf  missing               -          -   no     -\n"));
  EXPECT_THAT(t, HasSubstr("certificate renewal: failed: not verified within 3m (next attempt in "
                           "10m)\n"));
}

TEST(StatusTable, ShowsTheAddOnsTlsSecretsOnAControlPlaneNode) {
  json doc = sampleStatus();
  doc["cluster_certificates"] = json::parse(R"json({"control_plane": false})json");
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")),
              Not(HasSubstr("cluster certificates")));
  doc["cluster_certificates"] = json::parse(R"json({"control_plane": true,
    "secrets": [
      {"name": "registry", "secret": "kurl/registry-pki", "present": true,
       "expires": "2026-12-02T10:00:00Z", "days_left": 10, "due": true},
      {"name": "kurl-proxy", "secret": "default/kotsadm-tls", "present": true,
       "expires": "2027-06-01T00:00:00Z", "days_left": 190, "due": false,
       "note": "a custom certificate: reported, never replaced"},
      {"name": "contour", "secret": "projectcontour/contourcert", "present": false, "due": false,
       "note": "absent (the add-on is not installed)"}],
    "last": {"at": "2026-11-22T10:00:00Z", "lines": [],
             "errors": ["registry: update kurl/registry-pki: forbidden"]}})json");
  const std::string t =
      renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z"));
  EXPECT_THAT(t,
              HasSubstr("SECRET                      NAME        EXPIRES               DAYS LEFT  "
                        "RENEW  NOTE\n"
                        "kurl/registry-pki           registry    2026-12-02T10:00:00Z  10         "
                        "yes    -\n"
                        "default/kotsadm-tls         kurl-proxy  2027-06-01T00:00:00Z  190        "
                        "no     a custom certificate: reported, never replaced\n"
                        "projectcontour/contourcert  contour     absent                -          "
                        "no     absent (the add-on is not installed)\n"));
  EXPECT_THAT(t, HasSubstr("cluster certificate renewal failed (3s ago): registry: update "
                           "kurl/registry-pki: forbidden\n"));
}

TEST(StatusTable, ShowsTheReadinessReason) {
  const std::string table =
      renderStatusTable(sampleStatus(), Readiness{.ready = false, .reason = "caches not synced"},
                        at("2026-11-22T10:00:03Z"));
  EXPECT_THAT(table, HasSubstr("\nready:              no (caches not synced)\n"));
}

TEST(StatusTable, AnAgentThatMayNotLeadSaysSo) {
  json doc = {
      {"node", "worker-1"}, {"leader", "cp-1"}, {"is_leader", false}, {"leader_candidate", false}};
  std::string table = renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z"));
  EXPECT_THAT(table,
              HasSubstr("is leader:          no (never: leader_election_candidate is false)\n"));
  doc["leader_candidate"] = true;
  table = renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z"));
  EXPECT_THAT(table, HasSubstr("is leader:          no\n"));
}

// The system CA bundle (kube/transport/system_trust.h): which file and why, a warning when
// SSL_CERT_FILE is not usable or nothing was found; no line from an agent that does not report it.
TEST(StatusTable, SaysWhichSystemCaBundleIsUsed) {
  json doc = sampleStatus();
  const auto now = at("2026-11-22T10:00:03Z");
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, now),
              Not(HasSubstr("system CA bundle")));
  doc["system_trust"] = {{"ca_bundle", "/etc/pki/tls/certs/ca-bundle.crt"},
                         {"source", "RHEL family"},
                         {"problem", ""}};
  EXPECT_THAT(renderStatusTable(doc, Readiness{.ready = true}, now),
              HasSubstr("\nsystem CA bundle:   /etc/pki/tls/certs/ca-bundle.crt (RHEL family)\n"));
  EXPECT_EQ(systemTrustLine({{"ca_bundle", "/opt/ca.pem"},
                             {"source", "SSL_CERT_FILE"},
                             {"problem",
                              "SSL_CERT_FILE is not usable: read /opt/ca.pem: No such "
                              "file or directory;\nfix it"}}),
            "/opt/ca.pem (SSL_CERT_FILE; warning: SSL_CERT_FILE is not usable: read /opt/ca.pem: "
            "No such file or directory; fix it)");
  EXPECT_EQ(
      systemTrustLine(
          {{"ca_bundle", nullptr}, {"source", nullptr}, {"problem", "no CA bundle found: ..."}}),
      "none (warning: no CA bundle found: ...)");
  EXPECT_EQ(systemTrustLine(json::object()), "none");
}

TEST(StatusTable, MissingAndWrongTypedFieldsPrintADash) {
  const json doc = json::parse(R"json({
    "node": 5, "version": null, "leader": ["x"], "is_leader": "maybe",
    "lease": "not an object", "api_reachable": {},
    "caches": {"nodes": true},
    "controllers": [{"name": null, "last_run": 12, "next_run": "soon", "runs": 1.5}, 7, "x"],
    "host_checks": []
  })json");
  std::string table;
  ASSERT_NO_THROW(table =
                      renderStatusTable(doc, Readiness{.ready = true}, at("2026-11-22T10:00:03Z")));
  EXPECT_THAT(table, HasSubstr("node:               5\n"));
  EXPECT_THAT(table, HasSubstr("version:            -\n"));
  EXPECT_THAT(table, HasSubstr("leader:             -\n"));
  EXPECT_THAT(table, HasSubstr("is leader:          maybe\n"));
  EXPECT_THAT(table, HasSubstr("lease holder:       -\n"));
  EXPECT_THAT(table, HasSubstr("lease renewed:      -\n"));
  EXPECT_THAT(table, HasSubstr("api reachable:      -\n"));
  EXPECT_THAT(table, HasSubstr("\ncaches: -\n"));
  EXPECT_THAT(table,
              HasSubstr("\n-           -      12        -            soon      1.5   -       -\n"));
  EXPECT_THAT(table,
              HasSubstr("\n-           -      -         -            -         -     -       -\n"));
  EXPECT_THAT(table, HasSubstr("\nhost checks: none\n"));

  for (const json& odd : {json(), json::array(), json("text"), json(42)}) {
    std::string t;
    ASSERT_NO_THROW(t = renderStatusTable(odd, Readiness{}, at("2026-11-22T10:00:03Z")));
    EXPECT_THAT(t, HasSubstr("node:               -\n"));
    EXPECT_THAT(t, HasSubstr("ready:              no (-)\n"));
    EXPECT_THAT(t, HasSubstr("\ncontrollers: -\n"));
  }
}

TEST(StatusTable, FormatsRelativeTimes) {
  const base::WallTime now = at("2026-11-22T10:00:00Z");
  EXPECT_EQ(formatRelativeTime(now, now), "now");
  EXPECT_EQ(formatRelativeTime(now - 500ms, now), "now");
  EXPECT_EQ(formatRelativeTime(now - 3s, now), "3s ago");
  EXPECT_EQ(formatRelativeTime(now - 59s, now), "59s ago");
  EXPECT_EQ(formatRelativeTime(now - 60s, now), "1m ago");
  EXPECT_EQ(formatRelativeTime(now - 125s, now), "2m5s ago");
  EXPECT_EQ(formatRelativeTime(now - 3h - 2min - 9s, now), "3h2m ago");
  EXPECT_EQ(formatRelativeTime(now - 2h, now), "2h ago");
  EXPECT_EQ(formatRelativeTime(now - 50h, now), "2d2h ago");
  EXPECT_EQ(formatRelativeTime(now - 48h, now), "2d ago");
  EXPECT_EQ(formatRelativeTime(now + 57s, now), "in 57s");
  EXPECT_EQ(formatRelativeTime(now + 90min, now), "in 1h30m");
}

TEST(StatusTable, SocketPathUnderAHostRoot) {
  EXPECT_EQ(statusSocketPath(StatusOptions{}), "/run/ekco/ekco.sock");
  EXPECT_EQ(statusSocketPath(StatusOptions{.host_root = "/host"}), "/host/run/ekco/ekco.sock");
  EXPECT_EQ(statusSocketPath(StatusOptions{.socket_path = "/var/run/x.sock", .host_root = "/h/"}),
            "/h/var/run/x.sock");
}

using testing::cli;
using testing::CliRun;

// A live agent's socket with canned answers; times in the document are relative to the real
// clock so the table's ages are predictable.
class StatusCommand : public ::testing::Test {
 protected:
  void serve(bool ready, std::string socket_path = "") {
    path_ = socket_path.empty() ? dir_.path() + "/ekco.sock" : socket_path;
    status_ = sampleStatus();
    HealthHandlers h;
    h.healthz = [] { return Health{.ok = true}; };
    h.readyz = [ready] {
      return ready ? Health{.ok = true} : Health{.ok = false, .reason = "caches not synced: pods"};
    };
    // Every time in the document follows the real clock, or the columns' widths would depend on
    // the day the test runs; taken when the document is served, so a slow machine between
    // serve() and the command cannot turn "3s ago" into "4s ago".
    h.status = [this] {
      const base::WallTime now = base::SystemClock().wallNow();
      json doc = status_;
      if (doc.contains("controllers") && doc["controllers"].size() >= 2) {
        doc["controllers"][0]["last_run"] = kube::formatRfc3339Micro(now - 3s - 200ms);
        doc["controllers"][0]["next_run"] = kube::formatRfc3339Micro(now + 57s + 700ms);
        doc["controllers"][1]["last_run"] = kube::formatRfc3339Micro(now - 2min - 5s - 200ms);
      }
      if (doc.contains("lease")) doc["lease"]["renew_time"] = kube::formatRfc3339Micro(now - 200ms);
      std::lock_guard lock(mu_);
      served_ = doc;
      return doc;
    };
    auto server = HealthServer::start(HealthServerOptions{.socket_path = path_, .handlers = h});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
  }

  TempDir dir_;
  std::string path_;
  json status_;
  // The document as last served (with its times).
  json served() const {
    std::lock_guard lock(mu_);
    return served_;
  }
  mutable std::mutex mu_;
  json served_;
  std::unique_ptr<HealthServer> server_;
};

TEST_F(StatusCommand, PrintsTheTableAndExitsZeroWhenReady) {
  serve(/*ready=*/true);
  CliRun r = cli({"status", "--socket", path_});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("node:               node-a\n"));
  EXPECT_THAT(r.out, HasSubstr("version:            0.1.0 (abc1234)\n"));
  EXPECT_THAT(r.out, HasSubstr("ready:              yes\n"));
  EXPECT_THAT(r.out, HasSubstr("leader:             node-b\n"));
  EXPECT_THAT(r.out, HasSubstr("is leader:          no\n"));
  EXPECT_THAT(r.out, HasSubstr("lease transitions:  3\n"));
  EXPECT_THAT(r.out, HasSubstr("\nnodes  yes     5        -\n"));
  EXPECT_THAT(r.out, HasSubstr("\ninternal-load-balancer  node     3s ago    config unchanged  "
                               "in 57s    12    0       -\n"));
  EXPECT_THAT(r.out, HasSubstr("haproxy-config  yes  /etc/haproxy/haproxy.cfg up to date\n"));
}

TEST_F(StatusCommand, ExitsOneAndPrintsTheReasonWhenDegraded) {
  serve(/*ready=*/false);
  CliRun r = cli({"status", "--socket", path_});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.out, HasSubstr("ready:              no (caches not synced: pods)\n"));
  EXPECT_THAT(r.out, ::testing::EndsWith(
                         "\nsee docs/operations.md#troubleshooting: what each problem means and "
                         "what to do\n"));
  EXPECT_THAT(r.out, HasSubstr("node:               node-a\n"));
}

TEST_F(StatusCommand, JsonPrintsTheDocumentAsServed) {
  serve(/*ready=*/true);
  CliRun r = cli({"status", "--socket", path_, "--json"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(json::parse(r.out), served());
  EXPECT_EQ(r.out, served().dump() + "\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(StatusCommand, JsonWhenDegradedExitsOneWithTheReasonOnStderr) {
  serve(/*ready=*/false);
  CliRun r = cli({"status", "--json", "--socket", path_});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(json::parse(r.out), served());
  EXPECT_EQ(r.err,
            "degraded: caches not synced: pods (see docs/operations.md#troubleshooting: what each "
            "problem means and what to do)\n");
}

TEST_F(StatusCommand, ProbesAskOnlyTheirEndpointAndPrintOneLine) {
  const std::string root = dir_.path() + "/host";
  serve(/*ready=*/false, root + "/run/ekco/ekco.sock");
  // Alive but not ready: the liveness probe passes, the readiness probe fails with the reason.
  CliRun live = cli({"status", "--host-root", root, "--probe", "healthz"});
  EXPECT_EQ(live.code, kExitOk) << live.err;
  EXPECT_EQ(live.out, "ok\n");
  EXPECT_EQ(live.err, "");
  CliRun ready = cli({"status", "--host-root", root, "--probe", "readyz"});
  EXPECT_EQ(ready.code, kExitFailure);
  EXPECT_EQ(ready.out, "");
  EXPECT_EQ(ready.err, "readyz: caches not synced: pods\n");

  CliRun bad = cli({"status", "--probe", "status"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--probe"));
  CliRun both = cli({"status", "--probe", "readyz", "--json"});
  EXPECT_EQ(both.code, 2);

  server_->stop();
  CliRun gone = cli({"status", "--host-root", root, "--probe", "healthz"});
  EXPECT_EQ(gone.code, 2);
  EXPECT_THAT(gone.err, HasSubstr(root + "/run/ekco/ekco.sock"));
}

TEST_F(StatusCommand, FindsTheDefaultSocketUnderAHostRoot) {
  const std::string root = dir_.path() + "/host";
  serve(/*ready=*/true, root + "/run/ekco/ekco.sock");
  CliRun r = cli({"status", "--host-root", root});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("node:               node-a\n"));
}

// Issue 25: without --socket, the socket is the agent's own: health_socket from the config file
// (--config, else the default path) and the environment.
TEST_F(StatusCommand, ReadsHealthSocketFromTheConfigWithoutSocket) {
  const std::string custom = dir_.path() + "/custom.sock";
  serve(/*ready=*/true, custom);
  const std::string config = dir_.path() + "/config.yaml";
  std::ofstream(config) << "health_socket: " << custom << "\n";
  CliRun r = cli({"status", "--config", config});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("node:               node-a\n"));
  CliRun from_env = cli({"status", "--probe", "readyz"}, {"EKCO_HEALTH_SOCKET=" + custom});
  EXPECT_EQ(from_env.code, kExitOk) << from_env.err;
  EXPECT_EQ(from_env.out, "ok\n");
  // --socket still wins; a broken config is a usage error naming the key.
  std::ofstream(config) << "health_socket: relative.sock\n";
  CliRun bad = cli({"status", "--config", config});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("health_socket"));
  CliRun explicit_socket = cli({"status", "--config", config, "--socket", custom});
  EXPECT_EQ(explicit_socket.code, kExitOk) << explicit_socket.err;
}

TEST_F(StatusCommand, ABrokenStatusDocumentIsAWarningNotACrash) {
  path_ = dir_.path() + "/ekco.sock";
  HealthHandlers h;
  h.readyz = [] { return Health{.ok = true}; };
  h.status = []() -> json { throw std::runtime_error("boom"); };
  auto server = HealthServer::start(HealthServerOptions{.socket_path = path_, .handlers = h});
  ASSERT_TRUE(server) << server.error().message();
  CliRun r = cli({"status", "--socket", path_});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_THAT(r.err, HasSubstr("warning: GET /status on " + path_ + " answered HTTP 500"));
  EXPECT_THAT(r.out, HasSubstr("node:               -\n"));
  EXPECT_THAT(r.out, HasSubstr("ready:              yes\n"));
}

TEST_F(StatusCommand, ExitsTwoNamingTheSocketWhenItCannotBeReached) {
  const std::string missing = dir_.path() + "/absent.sock";
  CliRun r = cli({"status", "--socket", missing});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("error: cannot reach the ekco agent's health socket"));
  EXPECT_THAT(r.err, HasSubstr(missing));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);

  // A stale socket (the agent died): connection refused.
  serve(/*ready=*/true);
  server_->stop();
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.data(), path_.size());
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  CliRun stale = cli({"status", "--socket", path_, "--json"});
  EXPECT_EQ(stale.code, 2);
  EXPECT_EQ(stale.out, "");
  EXPECT_THAT(stale.err, HasSubstr(path_));
}

TEST_F(StatusCommand, ExitsTwoWhenTheAgentDoesNotAnswerInTime) {
  const std::string path = dir_.path() + "/mute.sock";
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd.get(), 4), 0);
  std::ostringstream out;
  std::ostringstream err;
  const int code = runStatus(StatusOptions{.socket_path = path, .timeout = 200ms}, out, err,
                             base::SystemClock());
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err.str(), HasSubstr("no answer within 200 ms"));
  EXPECT_THAT(err.str(), HasSubstr(path));
}

TEST(StatusCli, HelpListsStatusAndItsFlags) {
  CliRun root = cli({"--help"});
  EXPECT_THAT(root.out, HasSubstr("status"));
  CliRun help = cli({"status", "--help"});
  EXPECT_EQ(help.code, kExitOk);
  for (const char* flag : {"--socket", "--host-root", "--json"}) {
    EXPECT_THAT(help.out, HasSubstr(flag));
  }
  EXPECT_EQ(cli({"status", "--bogus"}).code, kExitUsage);
  EXPECT_THAT(cli({"status", "--socket"}).err, Not(HasSubstr("cannot reach")));
}

}  // namespace
}  // namespace ekco::agent
