#include "agent/config/config.h"
#include "agent/config/reference.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ekco::agent {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> problemLines(const ConfigLoader& l) {
  std::vector<std::string> out;
  for (const auto& p : l.problems()) out.push_back(p.toString());
  return out;
}

// Loads `yaml` as file "config.yaml" and returns the problems, one line each.
std::vector<std::string> problemsOf(std::string_view yaml) {
  ConfigLoader l;
  l.loadYaml(yaml, "config.yaml");
  (void)l.finish();
  return problemLines(l);
}

Config load(std::string_view yaml) {
  ConfigLoader l;
  l.loadYaml(yaml, "config.yaml");
  Config c = l.finish();
  EXPECT_THAT(problemLines(l), ElementsAre()) << yaml;
  return c;
}

TEST(Config, DefaultsAreTheDocumentedProductDefaults) {
  Config c;
  EXPECT_EQ(c.node_unreachable_toleration, 5min);
  EXPECT_TRUE(c.clear_dead_nodes);
  EXPECT_FALSE(c.purge_dead_nodes);
  EXPECT_EQ(c.min_ready_master_nodes, 2);
  EXPECT_EQ(c.min_ready_worker_nodes, 0);
  EXPECT_EQ(c.min_ceph_pool_replication, 1);
  EXPECT_EQ(c.max_ceph_pool_replication, 3);
  EXPECT_EQ(c.reconcile_interval, 1min);
  EXPECT_TRUE(c.rotate_certs);
  EXPECT_EQ(c.rotate_certs_check_interval, 24h);
  EXPECT_EQ(c.rotate_certs_ttl, 720h);
  EXPECT_TRUE(c.restart_failed_envoy_pods);
  EXPECT_EQ(c.envoy_pods_not_ready_duration, 5min);
  EXPECT_FALSE(c.enable_internal_load_balancer);
  EXPECT_EQ(c.internal_load_balancer_haproxy_image, "haproxy:lts-alpine");
  EXPECT_EQ(c.certificates_dir, "/etc/kubernetes/pki");
  EXPECT_EQ(c.ceph_object_store, "rook-ceph-store");  // kURL's, not the binary's "replicated"
  EXPECT_EQ(c.kotsadm_kubelet_cert_secret, "kubelet-client-cert");
  EXPECT_TRUE(c.auto_approve_kubelet_csrs);                // kURL hard-codes true
  EXPECT_TRUE(c.kubelet_csr_allowed_ip_prefixes.empty());  // no restriction
  EXPECT_FALSE(c.disable_reboot_service);
  EXPECT_FALSE(c.enable_host_jobs);  // root on every node: an explicit opt-in
  EXPECT_EQ(c.auto_upgrade_schedule, "");
  EXPECT_EQ(c.leader_election_namespace, "kurl");
  EXPECT_TRUE(c.leader_election_candidate);  // every agent may lead unless told not to
  EXPECT_EQ(c.leader_election_lease_duration, std::chrono::seconds(15));
  EXPECT_EQ(c.leader_election_renew_deadline, std::chrono::seconds(10));
  EXPECT_EQ(c.leader_election_retry_period, std::chrono::seconds(2));
  EXPECT_EQ(c.health_socket, "/run/ekco/ekco.sock");
  EXPECT_EQ(c.log_level, "info");
  EXPECT_TRUE(c.shutdown_out_of_service);  // the beacon path is on by default (issue 20)
  EXPECT_EQ(c.shutdown_out_of_service_grace, std::chrono::seconds(15));
}

// Every key's default, as `config show` prints it, is pinned by a golden file.
TEST(Config, EveryKeyDefaultMatchesTheGoldenFile) {
  ConfigLoader l;
  Config c = l.finish();
  EXPECT_TRUE(l.problems().empty());
  EXPECT_EQ(renderConfigYaml(c), readFile(EKCO_TESTDATA_DIR "/config/defaults.yaml"));
}

TEST(Config, PackagedConfigIsValidAndEqualsTheDefaults) {
  ConfigLoader l;
  l.loadFile(EKCO_SOURCE_DIR "/packaging/config.yaml");
  Config c = l.finish();
  EXPECT_THAT(problemLines(l), ElementsAre());
  EXPECT_TRUE(l.notices().empty());
  EXPECT_EQ(renderConfigYaml(c), renderConfigYaml(Config{}));
}

TEST(Config, EveryNonIgnoredKeyIsInThePackagedConfig) {
  std::string packaged = readFile(EKCO_SOURCE_DIR "/packaging/config.yaml");
  for (const KeyInfo& k : configKeys()) {
    if (k.ignored || !k.alias_of.empty()) continue;
    EXPECT_THAT(packaged, HasSubstr("\n" + std::string(k.key) + ":")) << k.key;
  }
}

// docs/configuration.md is generated (docs_current checks it is current); here the generated
// reference states each key's default exactly as `config show` prints it.
TEST(Config, EveryKeyIsInTheReferenceWithItsDefault) {
  std::string readme = renderConfigReference(ReferenceFormat::kMarkdown);
  std::string defaults = readFile(EKCO_TESTDATA_DIR "/config/defaults.yaml");
  for (const KeyInfo& k : configKeys()) {
    std::string row = "| [`" + std::string(k.key) + "`](#key-" + std::string(k.key) + ") |";
    ASSERT_THAT(readme, HasSubstr(row)) << k.key;
    if (k.ignored || !k.alias_of.empty()) continue;
    // The row states the default exactly as `config show` prints it.
    size_t at = defaults.find("\n" + std::string(k.key) + ": ");
    if (at == std::string::npos) at = defaults.rfind(std::string(k.key) + ": ", 0);
    ASSERT_NE(at, std::string::npos) << k.key;
    size_t start = defaults.find(": ", at) + 2;
    std::string value = defaults.substr(start, defaults.find('\n', start) - start);
    size_t row_at = readme.find(row);
    std::string line = readme.substr(row_at, readme.find('\n', row_at) - row_at);
    EXPECT_THAT(line, HasSubstr("`" + value + "`")) << k.key;
  }
}

TEST(Config, EmptyFileMeansDefaults) {
  EXPECT_EQ(renderConfigYaml(load("")), renderConfigYaml(Config{}));
  EXPECT_EQ(renderConfigYaml(load("# only a comment\n")), renderConfigYaml(Config{}));
}

TEST(Config, ReadsEveryValueKind) {
  Config c = load(
      "node_unreachable_toleration: 1h30m\n"
      "purge_dead_nodes: true\n"
      "clear_dead_nodes: no\n"
      "min_ready_master_nodes: 3\n"
      "rook_priority_class: node-critical\n"
      "pod_image_overrides:\n"
      "  - docker.io/a:1=registry.local/a:1\n"
      "  - b=c\n"
      "auto_upgrade_schedule: Sat 17:30\n");
  EXPECT_EQ(c.node_unreachable_toleration, 90min);
  EXPECT_TRUE(c.purge_dead_nodes);
  EXPECT_FALSE(c.clear_dead_nodes);
  EXPECT_EQ(c.min_ready_master_nodes, 3);
  EXPECT_EQ(c.rook_priority_class, "node-critical");
  EXPECT_THAT(c.pod_image_overrides, ElementsAre("docker.io/a:1=registry.local/a:1", "b=c"));
  EXPECT_EQ(c.auto_upgrade_schedule, "Sat 17:30");
}

TEST(Config, CompatibilityKeysWarnOnlyWhenSetToSomethingElseThanTheirDefault) {
  ConfigLoader quiet;
  quiet.loadYaml(
      "rook_minimum_node_count: 0\nrook_storage_class: distributed\nrook_ceph_image: \"\"\n"
      "rook_priority_class: \"\"\nstorage_migration_auth_token: \"\"\n",
      "config.yaml");
  EXPECT_TRUE(quiet.problems().empty());
  EXPECT_TRUE(quiet.notices().empty());

  ConfigLoader l;
  l.loadYaml("rook_minimum_node_count: 3\nrook_priority_class: node-critical\n", "config.yaml");
  ASSERT_TRUE(l.problems().empty());
  std::vector<std::string> got;
  for (const ConfigNotice& n : l.notices()) got.push_back(n.toString());
  EXPECT_THAT(got, ElementsAre(StartsWith("config.yaml:1: rook_minimum_node_count: no effect in "
                                          "ekco: ekco does not create the Rook CephCluster"),
                               AllOf(StartsWith("config.yaml:2: rook_priority_class: no effect "
                                                "in ekco: only kURL's Rook 1.0.4"),
                                     HasSubstr("does not patch the priority"))));
  // The values are still typed and kept (config show prints them).
  EXPECT_EQ(l.finish().rook_minimum_node_count, 3);
  ConfigLoader bad;
  bad.loadYaml("rook_minimum_node_count: many\n", "config.yaml");
  EXPECT_EQ(bad.problems().size(), 1u);

  // The environment and flags warn the same way.
  ConfigLoader env;
  env.setText("rook_ceph_image", "ceph/ceph:v16", "EKCO_ROOK_CEPH_IMAGE");
  ASSERT_EQ(env.notices().size(), 1u);
  EXPECT_THAT(env.notices()[0].toString(), HasSubstr("rook_ceph_image: no effect in ekco"));
}

TEST(Config, PodImageOverridesAcceptKurlsCommaJoinedString) {
  Config c = load("pod_image_overrides: \"a=b,c=d\"\n");
  EXPECT_THAT(c.pod_image_overrides, ElementsAre("a=b", "c=d"));
  EXPECT_TRUE(load("pod_image_overrides: \"\"\n").pod_image_overrides.empty());
  EXPECT_TRUE(load("pod_image_overrides:\n").pod_image_overrides.empty());
}

TEST(Config, ZeroReconcileTimeoutMeansFifteenMinutesAsInEkco) {
  EXPECT_EQ(load("reconcile_timeout: 0\n").reconcile_timeout, 15min);
  EXPECT_EQ(load("reconcile_timeout: 2m\n").reconcile_timeout, 2min);
}

TEST(Config, UnknownKeyIsAnErrorNamingKeyAndLine) {
  EXPECT_THAT(problemsOf("clear_dead_nodes: true\npurge_dead_node: true\n"),
              ElementsAre("config.yaml:2: purge_dead_node: unknown key"));
}

TEST(Config, WrongTypesAreErrors) {
  EXPECT_THAT(problemsOf("purge_dead_nodes: maybe\n"),
              ElementsAre("config.yaml:1: purge_dead_nodes: want true or false, got \"maybe\""));
  EXPECT_THAT(problemsOf("min_ready_worker_nodes: two\n"),
              ElementsAre("config.yaml:1: min_ready_worker_nodes: want an integer, got \"two\""));
  EXPECT_THAT(problemsOf("min_ready_worker_nodes: 1.5\n"),
              ElementsAre(HasSubstr("want an integer")));
  EXPECT_THAT(problemsOf("certificates_dir: [a, b]\n"),
              ElementsAre("config.yaml:1: certificates_dir: want a string"));
  EXPECT_THAT(problemsOf("pod_image_overrides: {a: b}\n"),
              ElementsAre("config.yaml:1: pod_image_overrides: want a list of strings"));
  EXPECT_THAT(problemsOf("pod_image_overrides:\n  - [a=b]\n"),
              ElementsAre("config.yaml:2: pod_image_overrides: want a list of strings"));
  EXPECT_THAT(problemsOf("pod_image_overrides_port: 0\n"),
              ElementsAre(HasSubstr("pod_image_overrides_port: must be a port from 1 to 65535 "
                                    "(got 0)")));
  EXPECT_THAT(problemsOf("pod_image_overrides_port: 70000\n"),
              ElementsAre(HasSubstr("(got 70000)")));
  EXPECT_TRUE(problemsOf("pod_image_overrides_port: 8443\n").empty());
  EXPECT_THAT(problemsOf("pod_image_overrides_endpoints: daemonset\n"),
              ElementsAre(HasSubstr("pod_image_overrides_endpoints: want auto, pods or nodes, got "
                                    "\"daemonset\"")));
  for (const char* ok : {"auto", "pods", "nodes"}) {
    EXPECT_TRUE(problemsOf(std::string("pod_image_overrides_endpoints: ") + ok + "\n").empty());
  }
  EXPECT_THAT(problemsOf("pod_image_overrides_excluded_namespaces: [rook-ceph, Bad_NS]\n"),
              ElementsAre(HasSubstr("pod_image_overrides_excluded_namespaces: want namespace names "
                                    "(RFC 1123 labels), got \"Bad_NS\"")));
  EXPECT_TRUE(
      problemsOf("pod_image_overrides_excluded_namespaces: \"rook-ceph,openebs\"\n").empty());
  EXPECT_THAT(
      problemsOf("enable_host_jobs: yes please\n"),
      ElementsAre("config.yaml:1: enable_host_jobs: want true or false, got \"yes please\""));
  EXPECT_TRUE(problemsOf("enable_host_jobs: true\n").empty());
  EXPECT_THAT(problemsOf("clear_dead_nodes:\n"),
              ElementsAre("config.yaml:1: clear_dead_nodes: missing value"));
  EXPECT_THAT(problemsOf("reconcile_interval: {a: 1}\n"),
              ElementsAre(HasSubstr("reconcile_interval: want a duration")));
}

TEST(Config, BadDurationsAreErrors) {
  EXPECT_THAT(problemsOf("node_unreachable_toleration: 5 minutes\n"),
              ElementsAre(HasSubstr("config.yaml:1: node_unreachable_toleration: invalid duration "
                                    "\"5 minutes\"")));
  // A bare number is nanoseconds to viper, and a mistake to everyone else.
  EXPECT_THAT(problemsOf("reconcile_interval: 60\n"), ElementsAre(HasSubstr("missing unit")));
  EXPECT_THAT(problemsOf("rotate_certs_ttl: -720h\n"),
              ElementsAre("config.yaml:1: rotate_certs_ttl: must not be negative (got -720h)"));
  EXPECT_THAT(problemsOf("reconcile_interval: 0s\n"),
              ElementsAre("config.yaml:1: reconcile_interval: must be greater than 0"));
}

TEST(Config, NegativeCountsAreErrors) {
  EXPECT_THAT(problemsOf("min_ready_worker_nodes: -1\n"),
              ElementsAre("config.yaml:1: min_ready_worker_nodes: must not be negative (got -1)"));
}

TEST(Config, MinReadyMasterNodesMustBeAtLeastOne) {
  EXPECT_THAT(problemsOf("min_ready_master_nodes: 0\n"),
              ElementsAre("config.yaml:1: min_ready_master_nodes: must be at least 1 (got 0)"));
}

TEST(Config, MinCephReplicationAboveMaxIsAnError) {
  EXPECT_THAT(problemsOf("min_ceph_pool_replication: 4\n"),
              ElementsAre("config.yaml:1: min_ceph_pool_replication: "
                          "min_ceph_pool_replication (4) is greater than "
                          "max_ceph_pool_replication (3)"));
  EXPECT_THAT(problemsOf("max_ceph_pool_replication: 0\n"),
              ElementsAre(HasSubstr("config.yaml:1: max_ceph_pool_replication: "
                                    "min_ceph_pool_replication (1) is greater")));
}

TEST(Config, CephReplicationHoldDownIsTenMinutesAndMustBeBetweenAMinuteAndADay) {
  EXPECT_EQ(Config{}.ceph_pool_replication_hold_down, 10min);
  EXPECT_EQ(load("ceph_pool_replication_hold_down: 90m\n").ceph_pool_replication_hold_down, 90min);
  EXPECT_THAT(problemsOf("ceph_pool_replication_hold_down: 30s\n"),
              ElementsAre("config.yaml:1: ceph_pool_replication_hold_down: must be between 1m and "
                          "24h (got 30s)"));
  EXPECT_THAT(problemsOf("ceph_pool_replication_hold_down: 25h\n"),
              ElementsAre(HasSubstr("must be between 1m and 24h")));
  EXPECT_THAT(problemsOf("ceph_pool_replication_hold_down: 600\n"),
              ElementsAre(HasSubstr("ceph_pool_replication_hold_down")));
  EXPECT_TRUE(problemsOf("ceph_pool_replication_hold_down: 1m\n").empty());
}

TEST(Config, RookStorageNodesLabelIsKeyEqualsValue) {
  EXPECT_TRUE(problemsOf("rook_storage_nodes_label: ekco.io/storage=yes\n").empty());
  EXPECT_TRUE(problemsOf("rook_storage_nodes_label: storage=\n").empty());
  for (const char* bad : {"storage", "=yes", "a=b=c", "a!=b", "a=b,c=d", "a in (b)"}) {
    EXPECT_THAT(problemsOf(std::string("rook_storage_nodes_label: \"") + bad + "\"\n"),
                ElementsAre(HasSubstr("rook_storage_nodes_label: want key=value, got")))
        << bad;
  }
}

TEST(Config, MalformedImageOverridesAreErrors) {
  EXPECT_THAT(problemsOf("pod_image_overrides: [nothing-to-replace]\n"),
              ElementsAre("config.yaml:1: pod_image_overrides: malformed entry "
                          "\"nothing-to-replace\": no '=' (want original=overridden)"));
  for (std::string_view bad : {"[=b]", "[a=]", "[a=b=c]", "[\"a b=c\"]"}) {
    EXPECT_THAT(problemsOf("pod_image_overrides: " + std::string(bad) + "\n"),
                ElementsAre(HasSubstr("malformed entry")))
        << bad;
  }
}

// Issue 34 item 4: the optional allow-list of kubelet serving IP SANs; a bad CIDR is one line
// naming the key.
TEST(Config, KubeletCsrAllowedIpPrefixesAreCidrsWithoutHostBits) {
  Config c = load("kubelet_csr_allowed_ip_prefixes: [10.0.0.0/16, \"fd00::/64\"]\n");
  EXPECT_THAT(c.kubelet_csr_allowed_ip_prefixes, ElementsAre("10.0.0.0/16", "fd00::/64"));
  EXPECT_TRUE(problemsOf("kubelet_csr_allowed_ip_prefixes: []\n").empty());
  EXPECT_THAT(problemsOf("kubelet_csr_allowed_ip_prefixes: [10.0.0.5]\n"),
              ElementsAre("config.yaml:1: kubelet_csr_allowed_ip_prefixes: want an IP prefix such "
                          "as 10.0.0.0/16 or fd00::/64, got \"10.0.0.5\""));
  EXPECT_THAT(problemsOf("kubelet_csr_allowed_ip_prefixes: [10.0.0.0/33]\n"),
              ElementsAre("config.yaml:1: kubelet_csr_allowed_ip_prefixes: the prefix length in "
                          "\"10.0.0.0/33\" is not a number from 0 to 32"));
  EXPECT_THAT(problemsOf("kubelet_csr_allowed_ip_prefixes: [10.1.2.3/16]\n"),
              ElementsAre("config.yaml:1: kubelet_csr_allowed_ip_prefixes: \"10.1.2.3/16\" has "
                          "bits set past its prefix length (did you mean 10.1.0.0/16?)"));
  EXPECT_THAT(problemsOf("kubelet_csr_allowed_ip_prefixes: [node-a/8]\n"),
              ElementsAre(HasSubstr("kubelet_csr_allowed_ip_prefixes: not an IP address")));
}

TEST(Config, InvalidCalendarScheduleIsAnErrorNamingTheKey) {
  EXPECT_THAT(problemsOf("auto_upgrade_schedule: Sat 25:00\n"),
              ElementsAre(HasSubstr("config.yaml:1: auto_upgrade_schedule: invalid calendar event "
                                    "\"Sat 25:00\"")));
  EXPECT_THAT(problemsOf("auto_upgrade_schedule: Mon..Fri 22:00\n"), ElementsAre());
  EXPECT_THAT(problemsOf("auto_upgrade_schedule: weekly\n"), ElementsAre());
}

// Issue 24 defect 9: a value cannot forge a line of `config check` output or send terminal
// escapes; rejected values are quoted with Go-style escapes.
TEST(Config, RejectedValuesAreEscapedInProblems) {
  EXPECT_THAT(problemsOf("leader_election_namespace: \"bad\\nconfig.yaml: ok\"\n"),
              ElementsAre(HasSubstr("got \"bad\\nconfig.yaml: ok\"")));
  EXPECT_THAT(problemsOf("certificates_dir: \"\\e[2Jrelative\"\n"),
              ElementsAre(HasSubstr("want an absolute path, got \"\\x1b[2Jrelative\"")));
  EXPECT_THAT(problemsOf("clear_dead_nodes: \"maybe\\r\"\n"),
              ElementsAre(HasSubstr("want true or false, got \"maybe\\r\"")));
  for (const std::string& p : problemsOf("shutdown_excluded_namespaces: [\"a\\nb\"]\n")) {
    EXPECT_EQ(p.find('\n'), std::string::npos) << p;
  }
}

// Found by tests/fuzz/config_fuzz.cc: what yaml-cpp, the duration and log-level parsers and the
// key table said about a bad file carried its bytes raw into the problem line.
TEST(Config, EveryProblemLineIsEscapedWhateverTheFileHolds) {
  // yaml-cpp's message quotes the offending byte.
  EXPECT_THAT(problemsOf(std::string("a: \"\\\0\"\n", 8)),
              ElementsAre("config.yaml:1: malformed YAML: unknown escape character: \\x00"));
  EXPECT_THAT(problemsOf("\"bad\\nkey\\e[2J\": 1\n"),
              ElementsAre("config.yaml:1: bad\\nkey\\x1b[2J: unknown key"));
  EXPECT_THAT(problemsOf("rotate_certs_ttl: \"5m\\a\"\nlog_level: \"\\x16debug\"\n"),
              ElementsAre("config.yaml:1: rotate_certs_ttl: invalid duration \"5m\\x07\": "
                          "expected a number (want a duration such as 90s, 5m or 1h30m)",
                          "config.yaml:2: log_level: invalid log level \"\\x16debug\" (want "
                          "debug, info, warn or error)"));
  // A negative duration is shown as parsed, without the whitespace around it.
  EXPECT_THAT(problemsOf("rotate_certs_ttl: \"\\v-1s\\f\"\n"),
              ElementsAre("config.yaml:1: rotate_certs_ttl: must not be negative (got -1s)"));
}

// Issue 24 defect 8: config check accepts nothing the agent rejects or cannot use.
TEST(Config, MinimumsAndSocketPathsTheAgentNeedsAreChecked) {
  EXPECT_THAT(problemsOf("reconcile_interval: 1ns\n"),
              ElementsAre(HasSubstr("reconcile_interval: must be at least 1s (got 1ns)")));
  EXPECT_THAT(problemsOf("reconcile_interval: 1s\n"), ElementsAre());
  EXPECT_THAT(
      problemsOf("leader_election_retry_period: 999us\n"),
      ElementsAre(HasSubstr("leader_election_retry_period: must be at least 100ms (got 999us)")));
  EXPECT_THAT(problemsOf("leader_election_retry_period: 100ms\n"), ElementsAre());
  EXPECT_THAT(problemsOf("health_socket: /\n"),
              ElementsAre(HasSubstr("health_socket: want the path of a socket file, not a "
                                    "directory, got \"/\"")));
  EXPECT_THAT(problemsOf("health_socket: /run/ekco/\n"), ElementsAre(HasSubstr("not a directory")));
  const std::string longest = "/run/" + std::string(102, 's');  // 107 bytes
  EXPECT_THAT(problemsOf("health_socket: " + longest + "\n"), ElementsAre());
  EXPECT_THAT(problemsOf("health_socket: " + longest + "x\n"),
              ElementsAre(HasSubstr("health_socket: a unix socket path has at most 107 bytes "
                                    "(got 108:")));
  EXPECT_THAT(problemsOf("metrics_address: 0.0.0.0:9847\n"), ElementsAre());
  EXPECT_THAT(problemsOf("metrics_address: \"[::]:9847\"\n"), ElementsAre());
  EXPECT_THAT(problemsOf("metrics_address: \"\"\n"), ElementsAre());
  EXPECT_THAT(problemsOf("metrics_address: prometheus.local:9847\n"),
              ElementsAre(HasSubstr("config.yaml:1: metrics_address: invalid bind address "
                                    "\"prometheus.local:9847\"")));
  EXPECT_THAT(problemsOf("metrics_address: 0.0.0.0\n"),
              ElementsAre(HasSubstr("metrics_address: invalid bind address \"0.0.0.0\"")));
}

TEST(Config, OtherValueRulesAreChecked) {
  EXPECT_THAT(problemsOf("log_level: loud\n"),
              ElementsAre(HasSubstr("config.yaml:1: log_level: invalid log level \"loud\"")));
  EXPECT_THAT(problemsOf("auto_upgrade_url: ftp://x\n"),
              ElementsAre(HasSubstr("auto_upgrade_url: want an http:// or https:// URL")));
  // The rule `ekco upgrade` and its fetch apply (kube::urlProblem): config check agrees.
  EXPECT_THAT(problemsOf("auto_upgrade_url: \"http://\"\nauto_upgrade_allow_http: true\n"),
              ElementsAre(HasSubstr("auto_upgrade_url: the URL has no host")));
  EXPECT_THAT(problemsOf("auto_upgrade_url: \"https://a b/\"\n"),
              ElementsAre(HasSubstr("auto_upgrade_url: a URL has no whitespace or control "
                                    "characters (got \"https://a b/\")")));
  EXPECT_THAT(problemsOf("auto_upgrade_url: \"https://k8s.kurl.sh/x\\nok\"\n"),
              ElementsAre(HasSubstr("(got \"https://k8s.kurl.sh/x\\nok\")")));
  EXPECT_THAT(problemsOf("auto_upgrade_url: http://mirror.local/install.sh\n"),
              ElementsAre(HasSubstr("plain http:// is not allowed (no TLS: nothing fetched over "
                                    "it is verified); use https://, or set "
                                    "auto_upgrade_allow_http: true")));
  EXPECT_THAT(problemsOf("auto_upgrade_url: http://mirror.local/install.sh\n"
                         "auto_upgrade_allow_http: true\n"),
              ElementsAre());
  EXPECT_THAT(problemsOf("certificates_dir: etc/pki\n"),
              ElementsAre(HasSubstr("certificates_dir: want an absolute path")));
  EXPECT_THAT(problemsOf("leader_election_renew_deadline: 20s\n"),
              ElementsAre(HasSubstr("leader_election_lease_duration: must be longer than "
                                    "leader_election_renew_deadline (20s)")));
  EXPECT_THAT(problemsOf("leader_election_retry_period: 10s\n"),
              ElementsAre(HasSubstr("leader_election_renew_deadline: must be longer than "
                                    "leader_election_retry_period (10s)")));
  EXPECT_THAT(problemsOf("leader_election_retry_period: 0s\n"),
              ElementsAre(HasSubstr("leader_election_retry_period: must be greater than 0")));
  EXPECT_THAT(problemsOf("internal_load_balancer_haproxy_image: \"haproxy lts\"\n"),
              ElementsAre(HasSubstr("internal_load_balancer_haproxy_image: ")));
  EXPECT_THAT(problemsOf("leader_election_namespace: Kurl_NS\n"),
              ElementsAre(HasSubstr("leader_election_namespace: want a namespace name")));
  EXPECT_THAT(problemsOf("minio_namespace: \"\"\n"), ElementsAre());
  EXPECT_THAT(problemsOf("shutdown_out_of_service_grace: 0s\n"),
              ElementsAre("config.yaml:1: shutdown_out_of_service_grace: must be greater than 0"));
  EXPECT_THAT(problemsOf("shutdown_out_of_service_grace: 15\n"),
              ElementsAre(::testing::AllOf(HasSubstr("shutdown_out_of_service_grace: "),
                                           HasSubstr("missing unit"))));
  EXPECT_THAT(problemsOf("shutdown_out_of_service: maybe\n"),
              ElementsAre(HasSubstr("shutdown_out_of_service: ")));
  EXPECT_THAT(problemsOf("shutdown_out_of_service: false\nshutdown_out_of_service_grace: 2s\n"),
              ElementsAre());
}

TEST(Config, MalformedYamlIsAnErrorWithALineNotACrash) {
  auto p = problemsOf("clear_dead_nodes: true\npurge_dead_nodes: [true\n");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0], HasSubstr("config.yaml:"));
  EXPECT_THAT(p[0], HasSubstr("malformed YAML"));
  EXPECT_THAT(problemsOf("- a\n- b\n"),
              ElementsAre("config.yaml:1: the file must be a mapping of key: value"));
  EXPECT_THAT(problemsOf("just a string\n"),
              ElementsAre("config.yaml:1: the file must be a mapping of key: value"));
  EXPECT_THAT(problemsOf("a: b: c\n"), ElementsAre(HasSubstr("malformed YAML")));
  EXPECT_THAT(problemsOf("\t- x\n"), ElementsAre(HasSubstr("malformed YAML")));
}

TEST(Config, DuplicateKeysAreErrors) {
  EXPECT_THAT(problemsOf("purge_dead_nodes: true\npurge_dead_nodes: false\n"),
              ElementsAre("config.yaml:2: purge_dead_nodes: duplicate key"));
}

TEST(Config, EveryProblemIsReportedOnItsOwnLine) {
  EXPECT_THAT(problemsOf("bogus: 1\n"
                         "min_ready_master_nodes: 0\n"
                         "node_unreachable_toleration: soon\n"),
              ElementsAre("config.yaml:1: bogus: unknown key",
                          HasSubstr("config.yaml:3: node_unreachable_toleration: invalid duration"),
                          "config.yaml:2: min_ready_master_nodes: must be at least 1 (got 0)"));
}

TEST(Config, MissingFileIsAnErrorUnlessOptional) {
  ConfigLoader l;
  l.loadFile("/nonexistent/ekco.yaml");
  EXPECT_THAT(problemLines(l),
              ElementsAre("/nonexistent/ekco.yaml: cannot read the file (does it exist?)"));
  ConfigLoader optional;
  optional.loadFile("/nonexistent/ekco.yaml", true);
  EXPECT_TRUE(optional.problems().empty());
}

// Issue 24 defect 11: a configuration file is read only up to 1 MiB.
TEST(Config, AFileOverOneMiBIsAnErrorNotLoaded) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ekco-big-config-" + std::to_string(::getpid())))
          .string();
  std::ofstream(path) << "min_ready_master_nodes: 2\n";
  std::filesystem::resize_file(path, kMaxConfigFileBytes + 1);
  ConfigLoader l;
  l.loadFile(path);
  std::filesystem::remove(path);
  EXPECT_THAT(problemLines(l), ElementsAre(path + ": larger than 1 MiB; not reading it"));
}

TEST(Config, IgnoredEkcoKeysAreAcceptedWithANotice) {
  ConfigLoader l;
  l.loadYaml(
      "rotate_certs_image: replicated/ekco:v0.28.14\n"
      "host_task_image: replicated/ekco:v0.28.14\n"
      "host_task_namespace: kurl\n"
      "rook_version: 1.4.3\n"
      "internal_load_balancer_port: 6444\n",
      "config.yaml");
  (void)l.finish();
  EXPECT_TRUE(l.problems().empty());
  ASSERT_EQ(l.notices().size(), 5u);
  // Issue 25: said once ("ignored: Ignored: ..." repeated itself).
  EXPECT_EQ(l.notices()[0].toString(),
            "config.yaml:1: rotate_certs_image: ignored: EKCO's rotate-certs pod image; ekco "
            "renews on the host (see docs/configuration.md#key-rotate_certs_image)");
}

TEST(Config, DeprecatedContourCertNamespaceFeedsContourNamespaceOnlyWhenUnset) {
  EXPECT_EQ(load("contour_cert_namespace: ingress\n").contour_namespace, "ingress");
  EXPECT_EQ(load("contour_cert_namespace: ingress\ncontour_namespace: contour\n").contour_namespace,
            "contour");
  EXPECT_EQ(load("contour_namespace: contour\ncontour_cert_namespace: ingress\n").contour_namespace,
            "contour");
}

TEST(Config, EnvironmentOverridesFileAndFlagsOverrideEnvironment) {
  ConfigLoader l;
  l.loadYaml("min_ready_master_nodes: 3\npurge_dead_nodes: true\nlog_level: warn\n", "config.yaml");
  l.loadEnvironment({"EKCO_MIN_READY_MASTER_NODES=4", "EKCO_PURGE_DEAD_NODES=false",
                     "EKCO_NODE_UNREACHABLE_TOLERATION=10m", "PATH=/usr/bin", "LOG_LEVEL=debug",
                     "EKCO_POD_IMAGE_OVERRIDES=a=b,c=d"});
  l.setFlag("min_ready_master_nodes", "5");
  Config c = l.finish();
  EXPECT_THAT(problemLines(l), ElementsAre());
  EXPECT_EQ(c.min_ready_master_nodes, 5);
  EXPECT_FALSE(c.purge_dead_nodes);
  EXPECT_EQ(c.node_unreachable_toleration, 10min);
  EXPECT_EQ(c.log_level, "debug");  // EKCO's bare LOG_LEVEL
  EXPECT_THAT(c.pod_image_overrides, ElementsAre("a=b", "c=d"));
  EXPECT_EQ(l.sources().at("min_ready_master_nodes"), "flag --min-ready-master-nodes");
  EXPECT_EQ(l.sources().at("purge_dead_nodes"), "environment EKCO_PURGE_DEAD_NODES");
  EXPECT_EQ(l.sources().at("log_level"), "environment LOG_LEVEL");
}

TEST(Config, TheWorkerDaemonSetsEnvironmentMakesTheAgentANonCandidate) {
  // deploy/30-daemonset.yaml's ekco-node sets EKCO_LEADER_ELECTION_CANDIDATE over the shared
  // ConfigMap, whose value is true.
  ConfigLoader l;
  l.loadYaml("leader_election_candidate: true\n", "config.yaml");
  l.loadEnvironment({"EKCO_LEADER_ELECTION_CANDIDATE=false"});
  Config c = l.finish();
  EXPECT_THAT(problemLines(l), ElementsAre());
  EXPECT_FALSE(c.leader_election_candidate);
  EXPECT_EQ(l.sources().at("leader_election_candidate"),
            "environment EKCO_LEADER_ELECTION_CANDIDATE");
  ConfigLoader bad;
  bad.loadYaml("leader_election_candidate: workers\n", "config.yaml");
  bad.finish();
  EXPECT_THAT(problemLines(bad),
              ElementsAre("config.yaml:1: leader_election_candidate: want true or false, got "
                          "\"workers\""));
}

TEST(Config, PrefixedLogLevelBeatsBareLogLevel) {
  ConfigLoader l;
  l.loadEnvironment({"EKCO_LOG_LEVEL=error", "LOG_LEVEL=debug"});
  EXPECT_EQ(l.finish().log_level, "error");
}

TEST(Config, EnvironmentAndFlagProblemsNameTheirSource) {
  ConfigLoader l;
  l.loadEnvironment({"EKCO_MIN_READY_WORKER_NODES=-2", "EKCO_RECONCILE_INTERVAL=often"});
  l.setFlag("min_ready_master_nodes", "0");
  (void)l.finish();
  EXPECT_THAT(problemLines(l),
              ElementsAre("environment EKCO_MIN_READY_WORKER_NODES: min_ready_worker_nodes: must "
                          "not be negative (got -2)",
                          HasSubstr("environment EKCO_RECONCILE_INTERVAL: reconcile_interval: "
                                    "invalid duration \"often\""),
                          "flag --min-ready-master-nodes: min_ready_master_nodes: must be at "
                          "least 1 (got 0)"));
}

TEST(Config, RenderedYamlLoadsBackToTheSameConfig) {
  Config c = load(
      "node_unreachable_toleration: 1h30m\n"
      "pod_image_overrides: [a=b, \"c:1=d:2\"]\n"
      "rook_storage_nodes: |\n"
      "  - name: node-a\n"
      "    devices: [{name: sdb}]\n"
      "auto_upgrade_schedule: \"Mon..Fri 22:00\"\n"
      "rook_priority_class: \"yes\"\n"
      "rook_ceph_image: \"17:30\"\n"
      "minio_util_image: \"~\"\n"
      "storage_migration_auth_token: \"# not a comment: 'x'\"\n");
  std::string rendered = renderConfigYaml(c);
  Config again = load(rendered);
  EXPECT_EQ(renderConfigYaml(again), rendered);
  EXPECT_EQ(again.rook_priority_class, "yes");
  EXPECT_THAT(rendered, HasSubstr("\nrook_priority_class: \"yes\"\n"));
  EXPECT_EQ(again.rook_storage_nodes, "- name: node-a\n  devices: [{name: sdb}]\n");
  EXPECT_EQ(again.rook_ceph_image, "17:30");
  EXPECT_THAT(rendered, HasSubstr("\nrook_ceph_image: \"17:30\"\n"));
  EXPECT_EQ(again.minio_util_image, "~");
  EXPECT_EQ(again.storage_migration_auth_token, "# not a comment: 'x'");
}

TEST(ParseImageOverride, SplitsOriginalAndOverridden) {
  auto r = parseImageOverride("docker.io/library/nginx:1.25=registry.local:5000/nginx:1.25");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, "docker.io/library/nginx:1.25");
  EXPECT_EQ(r->second, "registry.local:5000/nginx:1.25");
}

}  // namespace
}  // namespace ekco::agent
