#include "agent/config/kurl_installer.h"

#include <fstream>
#include <map>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ekco::agent {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using namespace std::chrono_literals;

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(EKCO_TESTDATA_DIR) + "/kurl/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines(const std::vector<ConfigProblem>& ps) {
  std::vector<std::string> out;
  for (const auto& p : ps) out.push_back(p.toString());
  return out;
}

TEST(KurlInstaller, MapsTheDocumentedSpecFields) {
  KurlConversion c = configFromKurlInstaller(fixture("installer-docs.yaml"), "installer.yaml");
  ASSERT_THAT(lines(c.problems), IsEmpty());
  const Config& cfg = c.config;
  EXPECT_EQ(cfg.node_unreachable_toleration, 1h);
  EXPECT_EQ(cfg.min_ready_master_nodes, 2);
  EXPECT_EQ(cfg.min_ready_worker_nodes, 0);
  EXPECT_FALSE(cfg.maintain_rook_storage_nodes);  // rookShouldUseAllNodes: true
  EXPECT_TRUE(cfg.reconcile_rook_mds_placement);
  EXPECT_TRUE(cfg.reconcile_ceph_csi_resources);
  EXPECT_TRUE(cfg.disable_reboot_service);  // shouldDisableRebootServices
  EXPECT_TRUE(cfg.clear_dead_nodes);
  EXPECT_FALSE(cfg.purge_dead_nodes);
  EXPECT_TRUE(cfg.enable_internal_load_balancer);
  EXPECT_TRUE(cfg.restart_failed_envoy_pods);
  EXPECT_EQ(cfg.envoy_pods_not_ready_duration, 5min);
  EXPECT_TRUE(cfg.enable_ha_minio);    // MinIO + OpenEBS local PV, management not disabled
  EXPECT_TRUE(cfg.enable_ha_kotsadm);  // KOTS + OpenEBS local PV, management not disabled
  EXPECT_EQ(cfg.minio_namespace, "minio");
  EXPECT_EQ(cfg.auto_upgrade_schedule, "Sat 17:30");
  EXPECT_THAT(cfg.pod_image_overrides,
              ElementsAre("docker.io/library/nginx:1.25=registry.local/nginx:1.25",
                          "quay.io/app/api:2=registry.local/api:2"));
  EXPECT_EQ(cfg.rook_minimum_node_count, 3);
  EXPECT_EQ(cfg.rook_storage_class, "distributed");
  // spec.ekco.version is the package version, not a config key; spec.rook.minimumNodeCount
  // asks for EKCO's creation of the Ceph cluster, which ekco does not offer.
  ASSERT_EQ(c.notices.size(), 2u);
  EXPECT_THAT(lines(c.notices),
              UnorderedElementsAre(HasSubstr("installer.yaml:28 (spec.ekco.version)"),
                                   AllOf(HasSubstr("rook_minimum_node_count"),
                                         HasSubstr("no effect in ekco: ekco does not create "
                                                   "the Rook CephCluster"))));
}

TEST(KurlInstaller, AddOnSwitchesFollowAddOnPresenceAsKurlRendersThem) {
  KurlConversion c = configFromKurlInstaller(fixture("installer-minimal.yaml"), "i.yaml");
  ASSERT_THAT(lines(c.problems), IsEmpty());
  EXPECT_FALSE(c.config.clear_dead_nodes);  // shouldDisableClearNodes: true
  EXPECT_TRUE(c.config.purge_dead_nodes);
  // No Rook in the spec: nothing Rook-related is switched on, even with rookShouldUseAllNodes
  // false; no Contour: no Envoy restarts; no MinIO/KOTS: no HA management.
  EXPECT_FALSE(c.config.maintain_rook_storage_nodes);
  EXPECT_FALSE(c.config.reconcile_rook_mds_placement);
  EXPECT_FALSE(c.config.reconcile_ceph_csi_resources);
  EXPECT_FALSE(c.config.restart_failed_envoy_pods);
  EXPECT_FALSE(c.config.enable_ha_minio);
  EXPECT_FALSE(c.config.enable_ha_kotsadm);
  EXPECT_FALSE(c.config.disable_reboot_service);
}

TEST(KurlInstaller, RookWithoutUseAllNodesLetsEkcoMaintainStorageNodes) {
  KurlConversion c = configFromKurlInstaller(
      "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n"
      "  rook:\n    version: 1.0.4\n    nodes:\n      - name: node-a\n"
      "  ekco:\n    rookShouldUseAllNodes: false\n",
      "i.yaml");
  ASSERT_THAT(lines(c.problems), IsEmpty());
  EXPECT_TRUE(c.config.maintain_rook_storage_nodes);
  EXPECT_EQ(c.config.rook_priority_class, "node-critical");  // kURL's Rook 1.0.4 special case
  EXPECT_EQ(c.config.rook_storage_nodes, "- name: node-a");
}

TEST(KurlInstaller, InvalidFieldsAreReportedWithLineAndField) {
  KurlConversion c = configFromKurlInstaller(fixture("installer-bad.yaml"), "bad.yaml");
  EXPECT_THAT(
      lines(c.problems),
      ElementsAre(
          "bad.yaml:9 (spec.ekco.shouldEnablePurgeNodes): want true or false",
          "bad.yaml:11 (spec.ekco.enableInternalLoadBalancr): unknown spec.ekco field",
          HasSubstr("bad.yaml:8 (spec.ekco.nodeUnreachableToleration): "
                    "node_unreachable_toleration: invalid duration \"5 minutes\""),
          "bad.yaml:7 (spec.ekco.minReadyMasterNodeCount): min_ready_master_nodes: must be at "
          "least 1 (got 0)",
          HasSubstr("bad.yaml:12 (spec.ekco.podImageOverrides): pod_image_overrides: malformed "
                    "entry \"no-equals-sign\""),
          HasSubstr("bad.yaml:10 (spec.ekco.autoUpgradeSchedule): auto_upgrade_schedule: "
                    "invalid calendar event \"Caturday 17:30\"")));
}

// Found by tests/fuzz/kurl_fuzz.cc: yaml-cpp's message, a spec.ekco field name and a rejected
// value carried their bytes raw into the problem line.
TEST(KurlInstaller, EveryProblemLineIsEscapedWhateverTheSpecHolds) {
  const std::string head = "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  ekco:\n";
  EXPECT_THAT(lines(configFromKurlInstaller(std::string("a: \"\\\0\"\n", 8), "i.yaml").problems),
              ElementsAre("i.yaml:1: malformed YAML: unknown escape character: \\x00"));
  EXPECT_THAT(
      lines(configFromKurlInstaller(head + "    \"x\\ny\": 1\n"
                                           "    envoyPodsNotReadyDuration: \"5m\\a\"\n"
                                           "    podImageOverrides: [\"a=b,\\e[2J\"]\n",
                                    "i.yaml")
                .problems),
      ElementsAre("i.yaml:5 (spec.ekco.x\\ny): unknown spec.ekco field",
                  "i.yaml:7 (spec.ekco.podImageOverrides): entry \"a=b,\\x1b[2J\" contains a comma",
                  "i.yaml:6 (spec.ekco.envoyPodsNotReadyDuration): envoy_pods_not_ready_duration: "
                  "invalid duration \"5m\\x07\": expected a number (want a duration such as 90s, "
                  "5m or 1h30m)"));
}

TEST(KurlInstaller, RejectsWhatIsNotAnInstaller) {
  EXPECT_THAT(lines(configFromKurlInstaller("kind: ConfigMap\napiVersion: v1\n", "x").problems),
              ElementsAre("x: not a kURL Installer (kind must be Installer)"));
  EXPECT_THAT(lines(configFromKurlInstaller("[1, 2]", "x").problems),
              ElementsAre("x: not a kURL Installer (want a YAML mapping)"));
  EXPECT_THAT(lines(configFromKurlInstaller("a: [", "x").problems),
              ElementsAre(HasSubstr("malformed YAML")));
  EXPECT_THAT(
      lines(configFromKurlInstaller("apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\n", "x")
                .problems),
      ElementsAre("x: the Installer has no spec mapping"));
  EXPECT_THAT(lines(configFromKurlInstaller("apiVersion: cluster.kurl.sh/v1beta1\nkind: "
                                            "Installer\nspec:\n  ekco: [1]\n",
                                            "x")
                        .problems),
              ElementsAre("x:4 (spec.ekco): want a mapping"));
}

// The table the conversion runs from (and the configuration reference prints) says what the
// conversion does: every field, set alone in a spec with every add-on present, changes its key
// the way the row says; every add-on's presence sets its keys.
TEST(KurlInstaller, EveryRowOfTheFieldTableIsWhatTheConversionDoes) {
  const std::string addons =
      "  rook: {version: 1.12.x}\n  contour: {version: 1.27.x}\n  minio: {version: 2023-x}\n"
      "  kotsadm: {version: 1.100.x}\n  openebs: {version: 3.x, isLocalPVEnabled: true}\n";
  const auto convert = [&](const std::string& more) {
    return configFromKurlInstaller(
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\n"
        "metadata: {name: x}\nspec:\n" +
            addons + more,
        "installer.yaml");
  };
  const auto value = [](const Config& c, std::string_view key) {
    const std::string yaml = "\n" + renderConfigYaml(c);
    const std::string prefix = "\n" + std::string(key) + ": ";
    const auto at = yaml.find(prefix);
    if (at == std::string::npos) return std::string("<absent>");
    const auto start = at + prefix.size();
    return yaml.substr(start, yaml.find('\n', start) - start);
  };
  const KurlConversion base = convert("");
  ASSERT_THAT(lines(base.problems), IsEmpty());
  // A value each value-row's key does not have by default.
  const std::map<std::string_view, std::string> sample = {
      {"node_unreachable_toleration", "7m13s"},
      {"min_ready_master_nodes", "3"},
      {"min_ready_worker_nodes", "2"},
      {"auto_upgrade_schedule", "Sat 17:30"},
      {"envoy_pods_not_ready_duration", "9m"},
      {"rook_minimum_node_count", "4"},
      {"rook_storage_class", "fast"},
      {"rook_priority_class", "1.0.4"},
      {"rook_storage_nodes", "[{name: node-a}]"},
      {"minio_namespace", "minio-x"}};
  int checked = 0;
  for (const KurlField& f : kurlFields()) {
    SCOPED_TRACE(std::string(f.path));
    if (f.how == KurlHow::kPresence) {
      EXPECT_EQ(value(base.config, f.key), "true");
      const std::string section = std::string(f.path.substr(f.path.rfind('.') + 1));
      std::string without = addons;
      const auto line = without.find("  " + section + ":");
      ASSERT_NE(line, std::string::npos);
      without.erase(line, without.find('\n', line) + 1 - line);
      KurlConversion c = configFromKurlInstaller(
          "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata: {name: x}\nspec:\n" +
              without,
          "installer.yaml");
      EXPECT_EQ(value(c.config, f.key), "false");
      ++checked;
      continue;
    }
    // The field, nested under its section: spec.ekco.x → "  ekco:\n    x: V".
    const std::string_view rest = f.path.substr(std::string_view("spec.").size());
    const std::string section(rest.substr(0, rest.find('.')));
    const std::string field(rest.substr(rest.find('.') + 1));
    std::string v;
    switch (f.how) {
      case KurlHow::kValue:
        v = sample.at(f.key);
        break;
      case KurlHow::kBoolean:
        v = value(base.config, f.key) == "true" ? "false" : "true";
        break;
      case KurlHow::kNegated:
        v = "true";
        break;
      case KurlHow::kList:
        v = "[a=b]";
        break;
      case KurlHow::kNotAKey:
        v = "x";
        break;
      case KurlHow::kPresence:
        break;
    }
    // The add-on sections are already in `addons`: their fields go into a second spec whose
    // section carries the version too.
    std::string spec;
    if (section == "ekco") {
      spec = "  ekco:\n    " + field + ": " + v + "\n";
    } else {
      std::string with = addons;
      const auto line = with.find("  " + section + ":");
      with.erase(line, with.find('\n', line) + 1 - line);
      KurlConversion c = configFromKurlInstaller(
          "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata: {name: x}\nspec:\n" +
              with + "  " + section + ":\n" + (field == "version" ? "" : "    version: 1.12.x\n") +
              "    " + field + ": " + v + "\n",
          "installer.yaml");
      ASSERT_THAT(lines(c.problems), IsEmpty());
      EXPECT_NE(value(c.config, f.key), value(base.config, f.key)) << f.key;
      ++checked;
      continue;
    }
    KurlConversion c = convert(spec);
    ASSERT_THAT(lines(c.problems), IsEmpty());
    if (f.how == KurlHow::kNotAKey) {
      EXPECT_THAT(lines(c.notices), ::testing::Contains(HasSubstr(std::string(f.why))));
    } else if (f.how == KurlHow::kNegated) {
      EXPECT_EQ(value(base.config, f.key), "true") << f.key;
      EXPECT_EQ(value(c.config, f.key), "false") << f.key;
    } else {
      EXPECT_NE(value(c.config, f.key), value(base.config, f.key)) << f.key;
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(kurlFields().size()));
}

}  // namespace
}  // namespace ekco::agent
