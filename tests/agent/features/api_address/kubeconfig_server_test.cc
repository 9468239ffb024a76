// agent/features/api_address/kubeconfig_server.h: the server line rewritten and nothing else,
// refused when it cannot be; the URLs a kubeconfig may be pointed at.
#include "agent/features/api_address/kubeconfig_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ekco::agent::api_address {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// As kubeadm writes kubelet.conf (certificate data shortened).
constexpr const char* kKubelet = R"(apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTi
    server: https://10.0.0.1:6443
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: system:node:cp-1
  name: system:node:cp-1@kubernetes
current-context: system:node:cp-1@kubernetes
kind: Config
preferences: {}
users:
- name: system:node:cp-1
  user:
    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem
    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem
)";

TEST(KubeconfigServer, OnlyTheServerLineChanges) {
  EXPECT_THAT(*kubeconfigServers(kKubelet, "kubelet.conf"), ElementsAre("https://10.0.0.1:6443"));
  auto moved =
      withServer(kKubelet, "https://10.0.0.1:6443", "https://localhost:6444", "kubelet.conf");
  ASSERT_TRUE(moved) << moved.error().message();
  std::string expected = kKubelet;
  expected.replace(expected.find("https://10.0.0.1:6443"), 21, "https://localhost:6444");
  EXPECT_EQ(*moved, expected);
  // Another address than `from`: the same text.
  EXPECT_EQ(*withServer(kKubelet, "https://lb:6443", "https://localhost:6444", "k"), kKubelet);
  // Quoted, with a comment, CRLF: still found, the rest kept.
  const std::string quoted =
      "apiVersion: v1\r\nclusters:\r\n- cluster:\r\n    server: \"https://lb.example.com:6443\""
      "  # the LB\r\n  name: k\r\nkind: Config\r\n";
  auto q = withServer(quoted, "https://lb.example.com:6443", "https://[fd00::1]:6443", "k");
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_THAT(*q, HasSubstr("    server: \"https://[fd00::1]:6443\"  # the LB\r\n"));
  EXPECT_THAT(*kubeconfigServers(*q, "k"), ElementsAre("https://[fd00::1]:6443"));
}

TEST(KubeconfigServer, WhatIsNotAKubeconfigOrCannotBeRewrittenIsRefused) {
  EXPECT_THAT(kubeconfigServers("a: [", "f").error().message(), HasSubstr("f: not YAML"));
  EXPECT_THAT(kubeconfigServers("kind: Config\n", "f").error().message(),
              HasSubstr("f: not a kubeconfig (no clusters)"));
  EXPECT_THAT(kubeconfigServers("clusters:\n- name: x\n", "f").error().message(),
              HasSubstr("a cluster without a server"));
  // A flow mapping: yaml-cpp reads it, no `server:` line holds it.
  auto flow = withServer("clusters:\n- {cluster: {server: https://a:1}, name: x}\n", "https://a:1",
                         "https://b:1", "f");
  ASSERT_FALSE(flow);
  EXPECT_THAT(flow.error().message(), HasSubstr("not written as ekco can rewrite it"));
}

TEST(KubeconfigServer, ServerUrls) {
  for (const char* ok : {"https://localhost:6444", "https://10.0.0.1:6443",
                         "https://lb.example.com", "https://[fd00::1]:6443", "https://[::1]"}) {
    EXPECT_TRUE(checkServerUrl(ok, "--server")) << ok;
  }
  for (const char* bad :
       {"http://localhost:6444", "https://", "https://a:6443/path", "https://a:0",
        "https://a:70000", "https://a:", "https://a b", "https://user@a", "https://[fd00::1",
        "https://[10.0.0.1]", "https://-a", "https://*.example.com", "https://a:64x"}) {
    auto r = checkServerUrl(bad, "--server");
    ASSERT_FALSE(r) << bad;
    EXPECT_THAT(r.error().message(), HasSubstr("--server: ")) << bad;
  }
  EXPECT_EQ(serverHost("https://localhost:6444"), "localhost");
  EXPECT_EQ(serverHost("https://[fd00::1]:6443"), "fd00::1");
  EXPECT_EQ(serverHost("https://10.0.0.1"), "10.0.0.1");
}

}  // namespace
}  // namespace ekco::agent::api_address
