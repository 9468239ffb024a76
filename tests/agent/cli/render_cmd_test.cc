// `ekco render haproxy` and `ekco render manifest`, run in-process.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>
#include <filesystem>
#include <fstream>

#include "agent/cli/cli.h"
#include "haproxy/render.h"
#include "tests/agent/cli_support.h"

namespace ekco::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

using testing::cli;
using testing::CliRun;

std::size_t lineCount(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(RenderCommand, HaproxyPrintsWhatTheLibraryRenders) {
  CliRun r = cli({"render", "haproxy", "--endpoints", "10.0.0.3,10.0.0.1:6443,[fd00::1]:7443"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  auto want = haproxy::renderHaproxyConfig({.endpoints = {{.host = "10.0.0.1", .port = 6443},
                                                          {.host = "10.0.0.3", .port = 6443},
                                                          {.host = "fd00::1", .port = 7443}}});
  ASSERT_TRUE(want);
  EXPECT_EQ(r.out, *want);
}

TEST(RenderCommand, HaproxyPassesBindAndImage) {
  CliRun r = cli({"render", "haproxy", "--endpoints", "10.0.0.1", "--bind", "[::1]:7444", "--image",
                  "haproxy:2.9.1-alpine"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  auto want = haproxy::renderHaproxyConfig({.endpoints = {{.host = "10.0.0.1", .port = 6443}},
                                            .bind = "[::1]:7444",
                                            .bind_ipv6_loopback = false,
                                            .image = "haproxy:2.9.1-alpine"});
  ASSERT_TRUE(want);
  EXPECT_EQ(r.out, *want);
  EXPECT_THAT(r.out, HasSubstr("    bind [::1]:7444\n"));
  EXPECT_THAT(r.out, HasSubstr("tune.disable-zero-copy-forwarding"));

  CliRun both = cli({"render", "haproxy", "--endpoints", "10.0.0.1", "--bind-ipv6-loopback"});
  ASSERT_EQ(both.code, kExitOk) << both.err;
  EXPECT_THAT(both.out, HasSubstr("    bind 127.0.0.1:6444\n    bind [::1]:6444\n"));
}

TEST(RenderCommand, HaproxyRefusesAnEmptyEndpointList) {
  CliRun r = cli({"render", "haproxy", "--endpoints", ""});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "error: no apiserver endpoints: refusing to render an empty backend\n");
}

TEST(RenderCommand, HaproxyRefusesInvalidEndpointsWithOneLine) {
  for (const char* endpoints : {"10.0.0.1,,10.0.0.2", "10.0.0.1:0", "10.0.0.1 #x",
                                "10.0.0.1\n    server evil 192.0.2.1:80", "10.0.0.256"}) {
    CliRun r = cli({"render", "haproxy", "--endpoints", endpoints});
    EXPECT_EQ(r.code, kExitUsage) << endpoints;
    EXPECT_EQ(r.out, "");
    EXPECT_THAT(r.err, StartsWith("error: --endpoints: invalid endpoint \"")) << r.err;
    EXPECT_EQ(lineCount(r.err), 1u) << r.err;
  }
}

TEST(RenderCommand, HaproxyRefusesABadBindOrImage) {
  CliRun bind = cli({"render", "haproxy", "--endpoints", "10.0.0.1", "--bind", "localhost:6444"});
  EXPECT_EQ(bind.code, kExitUsage);
  EXPECT_THAT(bind.err, StartsWith("error: invalid bind address \"localhost:6444\""));
  EXPECT_EQ(lineCount(bind.err), 1u);
  CliRun image = cli({"render", "haproxy", "--endpoints", "10.0.0.1", "--image", "haproxy lts"});
  EXPECT_EQ(image.code, kExitUsage);
  EXPECT_THAT(image.err, StartsWith("error: invalid image \"haproxy lts\""));
  EXPECT_EQ(lineCount(image.err), 1u);
}

TEST(RenderCommand, HaproxyWithoutEndpointsIsUsage) {
  CliRun r = cli({"render", "haproxy"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--endpoints"));
  CliRun group = cli({"render"});
  EXPECT_EQ(group.code, kExitUsage);
}

TEST(RenderCommand, ManifestPrintsTheStaticPod) {
  CliRun r = cli({"render", "manifest"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  auto want = haproxy::renderStaticPodManifest({});
  ASSERT_TRUE(want);
  EXPECT_EQ(r.out, *want);
  YAML::Node pod = YAML::Load(r.out);
  EXPECT_EQ(pod["apiVersion"].as<std::string>(), "v1");
  EXPECT_EQ(pod["kind"].as<std::string>(), "Pod");
  EXPECT_EQ(pod["metadata"]["name"].as<std::string>(), "haproxy");
  EXPECT_EQ(pod["metadata"]["namespace"].as<std::string>(), "kube-system");
  EXPECT_EQ(pod["metadata"]["labels"]["app"].as<std::string>(), "kurl-haproxy");
  EXPECT_EQ(pod["metadata"]["annotations"]["kurl.sh/haproxy-fileversion"].as<std::string>(), "0");
  EXPECT_TRUE(pod["spec"]["hostNetwork"].as<bool>());
  EXPECT_EQ(pod["spec"]["priorityClassName"].as<std::string>(), "system-node-critical");
  YAML::Node c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["name"].as<std::string>(), "haproxy");
  EXPECT_EQ(c["image"].as<std::string>(), "haproxy:lts-alpine");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["port"].as<int>(), 6444);
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["scheme"].as<std::string>(), "HTTPS");
  EXPECT_EQ(c["livenessProbe"]["failureThreshold"].as<int>(), 8);
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["host"].as<std::string>(), "127.0.0.1");
  // The directory, not the file: ekco replaces haproxy.cfg by rename, which a file bind mount
  // would not show to the running pod.
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"].as<std::string>(), "/usr/local/etc/haproxy");
  EXPECT_EQ(pod["spec"]["volumes"][0]["hostPath"]["path"].as<std::string>(), "/etc/haproxy");
  EXPECT_EQ(pod["spec"]["volumes"][0]["hostPath"]["type"].as<std::string>(), "DirectoryOrCreate");
}

TEST(RenderCommand, ManifestProbesTheBindAddress) {
  CliRun r = cli({"render", "manifest", "--bind", "0.0.0.0:7444"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  YAML::Node probe = YAML::Load(r.out)["spec"]["containers"][0]["livenessProbe"]["httpGet"];
  EXPECT_EQ(probe["host"].as<std::string>(), "127.0.0.1");
  EXPECT_EQ(probe["port"].as<int>(), 7444);
  CliRun v6 = cli({"render", "manifest", "--bind", "[::1]:6444"});
  ASSERT_EQ(v6.code, kExitOk) << v6.err;
  EXPECT_EQ(YAML::Load(v6.out)["spec"]["containers"][0]["livenessProbe"]["httpGet"]["host"]
                .as<std::string>(),
            "::1");
  CliRun bad = cli({"render", "manifest", "--bind", "localhost:6444"});
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("invalid bind address"));
}

TEST(RenderCommand, ManifestTakesTheImageAndRefusesABadOne) {
  CliRun r = cli({"render", "manifest", "--image", "registry.local:5000/haproxy:2.8"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(YAML::Load(r.out)["spec"]["containers"][0]["image"].as<std::string>(),
            "registry.local:5000/haproxy:2.8");
  CliRun bad = cli({"render", "manifest", "--image", "haproxy\"\n  command: [sh]"});
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_EQ(bad.out, "");
  EXPECT_THAT(bad.err, StartsWith("error: invalid image \"haproxy\\\"\\n  command: [sh]\": "));
  EXPECT_EQ(lineCount(bad.err), 1u);
}

TEST(RenderCommand, HelpListsTheRenderCommands) {
  CliRun r = cli({"render", "--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_THAT(r.out, HasSubstr("haproxy"));
  EXPECT_THAT(r.out, HasSubstr("manifest"));
}

TEST(RenderCommand, UnitsWritesWhatTheAgentInstalls) {
  testing::TempDir dir("ekco-render-units");
  const std::string config = dir.path() + "/config.yaml";
  std::ofstream(config) << "auto_upgrade_schedule: Sat 17:30\nshutdown_unmount_timeout: 2m\n";
  const std::string out = dir.path() + "/out";
  CliRun r = cli({"render", "units", "--config", config, "--out", out, "--bin", "/opt/bin/ekco"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr(out + "/etc/systemd/system/ekco-upgrade.timer\n"));
  std::ifstream timer(out + "/etc/systemd/system/ekco-upgrade.timer");
  const std::string timer_text{std::istreambuf_iterator<char>(timer), {}};
  EXPECT_THAT(timer_text, HasSubstr("OnCalendar=Sat *-*-* 17:30:00\n"));
  std::ifstream reboot(out + "/etc/systemd/system/ekco-reboot.service");
  const std::string reboot_text{std::istreambuf_iterator<char>(reboot), {}};
  EXPECT_THAT(reboot_text, HasSubstr("ExecStop=/opt/bin/ekco shutdown\n"));
  // shutdown bound 2m + 1m for its API calls, + the unit's 60 s margin.
  EXPECT_THAT(reboot_text, HasSubstr("TimeoutStopSec=240\n"));
  EXPECT_TRUE(std::filesystem::status(out + "/opt/ekco/shutdown.sh").permissions() ==
              std::filesystem::perms(0755));
}

TEST(RenderCommand, UnitsRefusesABadBinOrConfig) {
  testing::TempDir dir("ekco-render-units");
  CliRun bin = cli({"render", "units", "--out", dir.path(), "--bin", "ekco"});
  EXPECT_EQ(bin.code, kExitUsage);
  EXPECT_THAT(bin.err, HasSubstr("invalid ekco binary path \"ekco\""));
  const std::string config = dir.path() + "/config.yaml";
  std::ofstream(config) << "auto_upgrade_schedule: Sat 25:99\n";
  CliRun bad = cli({"render", "units", "--config", config, "--out", dir.path() + "/o"});
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("auto_upgrade_schedule"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/o/etc"));
  CliRun no_out = cli({"render", "units"});
  EXPECT_EQ(no_out.code, kExitUsage);
}

}  // namespace
}  // namespace ekco::agent
