#include "kube/transport/kubeconfig.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "kube/transport/token_source.h"
#include "tests/kube/temp_root.h"

namespace ekco::kube {
namespace {

using base::ErrorCode;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TempRoot;

constexpr const char* kCa = "-----BEGIN CERTIFICATE-----\nfake CA\n-----END CERTIFICATE-----\n";
constexpr const char* kCert =
    "-----BEGIN CERTIFICATE-----\nfake admin\n-----END CERTIFICATE-----\n";
constexpr const char* kKey = "-----BEGIN PRIVATE KEY-----\nfake key\n-----END PRIVATE KEY-----\n";

// A kubeconfig with one cluster, context and user, with the given extra lines in each.
std::string kubeconfig(const std::string& cluster_lines, const std::string& user_lines,
                       const std::string& current = "ctx") {
  return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: "
         "https://10.0.0.1:6443\n" +
         cluster_lines + "contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n" +
         "current-context: " + current + "\nusers:\n- name: u\n  user:\n" + user_lines;
}

TEST(Kubeconfig, InlineDataIsDecodedAndTheCurrentContextChosen) {
  TempRoot root;
  root.copyFixture("kubeconfig/inline.conf", "/home/op/.kube/config");
  auto conn = loadKubeconfig(root.fs(), "/home/op/.kube/config");
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->server, "https://10.0.0.11:6443");
  EXPECT_EQ(conn->ca_pem, kCa);
  EXPECT_EQ(conn->client_cert_pem, kCert);
  EXPECT_EQ(conn->client_key_pem, kKey);
  EXPECT_FALSE(conn->insecure_skip_tls_verify);
  EXPECT_EQ(conn->token, "");
  EXPECT_EQ(conn->source, "kubeconfig /home/op/.kube/config (context kubernetes-admin@kubernetes)");
}

TEST(Kubeconfig, AnExplicitContextSelectsItsClusterAndUser) {
  TempRoot root;
  root.copyFixture("kubeconfig/inline.conf", "/k.conf");
  auto conn = loadKubeconfig(root.fs(), "/k.conf", "robot@other");
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->server, "https://other.example:443");
  EXPECT_TRUE(conn->insecure_skip_tls_verify);
  EXPECT_EQ(conn->tls_server_name, "kubernetes.default.svc");
  EXPECT_EQ(conn->token, "abc.def.ghi");
  EXPECT_EQ(conn->client_cert_pem, "");
}

TEST(Kubeconfig, RelativeFilePathsAreRelativeToTheKubeconfigsDirectory) {
  TempRoot root;
  root.copyFixture("kubeconfig/relative.conf", "/etc/kubernetes/admin.conf");
  root.copyFixture("kubeconfig/ca.crt", "/etc/kubernetes/pki/ca.crt");
  root.copyFixture("kubeconfig/admin.crt", "/etc/kubernetes/pki/admin.crt");
  root.copyFixture("kubeconfig/admin.key", "/etc/kubernetes/pki/admin.key");
  auto conn = loadKubeconfig(root.fs(), "/etc/kubernetes/admin.conf");
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->server, "https://[fd00::11]:6443");
  EXPECT_EQ(conn->ca_pem, kCa);
  EXPECT_EQ(conn->client_cert_pem, kCert);
  EXPECT_EQ(conn->client_key_pem, kKey);  // absolute path, under the same root
}

TEST(Kubeconfig, ATokenFileIsReadAndKeptForRefreshing) {
  TempRoot root;
  root.copyFixture("kubeconfig/token-file.conf", "/cfg/kubeconfig");
  root.copyFixture("kubeconfig/ca.crt", "/cfg/ca.crt");
  root.write("/cfg/token", "tok-1\n");
  auto conn = loadKubeconfig(root.fs(), "/cfg/kubeconfig");
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->token, "tok-1");
  EXPECT_EQ(conn->token_file, "/cfg/token");
  auto once = loadKubeconfig(root.fs(), "/cfg/kubeconfig", "", /*token_file_readable_later=*/false);
  ASSERT_TRUE(once);
  EXPECT_EQ(once->token, "tok-1");
  EXPECT_EQ(once->token_file, "");
}

// Issue 24 defect 11: a token file of more than 64 KiB is not a token; it is refused unread.
TEST(Kubeconfig, ATokenFileOverTheBoundIsRefused) {
  TempRoot root;
  root.copyFixture("kubeconfig/token-file.conf", "/cfg/kubeconfig");
  root.copyFixture("kubeconfig/ca.crt", "/cfg/ca.crt");
  root.write("/cfg/token", std::string(kMaxTokenBytes + 1, 'a'));
  auto conn = loadKubeconfig(root.fs(), "/cfg/kubeconfig");
  ASSERT_FALSE(conn);
  EXPECT_EQ(conn.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(conn.error().message(),
              HasSubstr("tokenFile: read /cfg/token: larger than 64 KiB (65537 bytes)"));
  // A rotated token that grew past the bound is not taken: the previous one is kept.
  base::ManualClock clock;
  root.write("/cfg/token", "tok-1\n");
  TokenSource source("", "/cfg/token", &root.fs(), clock, std::chrono::seconds(1));
  EXPECT_EQ(source.current(), "tok-1");
  root.write("/cfg/token", std::string(kMaxTokenBytes + 1, 'b'));
  clock.advance(std::chrono::seconds(2));
  EXPECT_EQ(source.current(), "tok-1");
}

TEST(TokenSource, ARotatedTokenFileIsPickedUpAfterTheRefreshInterval) {
  TempRoot root;
  base::ManualClock clock;
  root.write("/sa/token", "tok-1\n");
  TokenSource source("initial", "/sa/token", &root.fs(), clock, std::chrono::seconds(60));
  EXPECT_EQ(source.current(), "tok-1");
  root.write("/sa/token", "tok-2\n");
  clock.advance(std::chrono::seconds(59));
  EXPECT_EQ(source.current(), "tok-1");
  clock.advance(std::chrono::seconds(1));
  EXPECT_EQ(source.current(), "tok-2");
}

TEST(TokenSource, AFailedOrEmptyReReadKeepsThePreviousToken) {
  TempRoot root;
  base::ManualClock clock;
  root.write("/sa/token", "tok-1");
  TokenSource source("", "/sa/token", &root.fs(), clock, std::chrono::seconds(1));
  EXPECT_EQ(source.current(), "tok-1");
  root.write("/sa/token", "");
  clock.advance(std::chrono::seconds(2));
  EXPECT_EQ(source.current(), "tok-1");
  std::filesystem::remove(root.dir() + "/sa/token");
  clock.advance(std::chrono::seconds(2));
  EXPECT_EQ(source.current(), "tok-1");
  TokenSource fixed("static", "", nullptr, clock, std::chrono::seconds(1));
  EXPECT_EQ(fixed.current(), "static");
}

TEST(InCluster, ReadsServerFromTheEnvironmentAndTokenAndCaFromTheServiceAccount) {
  TempRoot root;
  root.write("/var/run/secrets/kubernetes.io/serviceaccount/token", "sa-token\n");
  root.write("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", kCa);
  auto conn = loadInCluster(
      root.fs(), {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->server, "https://10.96.0.1:443");
  EXPECT_EQ(conn->token, "sa-token");
  EXPECT_EQ(conn->token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token");
  EXPECT_EQ(conn->ca_pem, kCa);
  EXPECT_EQ(conn->source, "in-cluster service account");
}

TEST(InCluster, AnIpv6ServiceHostIsBracketed) {
  TempRoot root;
  root.write("/var/run/secrets/kubernetes.io/serviceaccount/token", "t");
  root.write("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", kCa);
  auto conn = loadInCluster(root.fs(), {{"KUBERNETES_SERVICE_HOST", "fd00:10:96::1"},
                                        {"KUBERNETES_SERVICE_PORT", "443"}});
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->server, "https://[fd00:10:96::1]:443");
}

TEST(InCluster, AMissingTokenIsNotFound) {
  TempRoot root;
  auto conn = loadInCluster(
      root.fs(), {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  ASSERT_FALSE(conn);
  EXPECT_EQ(conn.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(conn.error().message(), StartsWith("in-cluster service account: token: "));
}

// Every source of loadConnection present, each with a different server, to see which wins.
struct Sources {
  TempRoot process;
  TempRoot host;
  Sources() {
    process.write("/explicit.conf", kubeconfig("", "    token: t\n"));
    process.write("/env.conf", kubeconfig("", "    token: t\n"));
    process.write("/var/run/secrets/kubernetes.io/serviceaccount/token", "t");
    process.write("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", kCa);
    host.write("/etc/kubernetes/admin.conf", kubeconfig("", "    token: admin\n"));
    host.write("/etc/kubernetes/kubelet.conf", kubeconfig("", "    token: kubelet\n"));
  }
  Environment fullEnv() const {
    return {{"KUBECONFIG", "/env.conf:/other.conf"},
            {"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
            {"KUBERNETES_SERVICE_PORT", "443"}};
  }
};

TEST(LoadConnection, ResolutionOrderIsExplicitThenKubeconfigEnvThenInClusterThenHostFiles) {
  Sources s;
  ConnectionSources sources{.process_fs = s.process.fs(),
                            .host_fs = s.host.fs(),
                            .env = s.fullEnv(),
                            .explicit_kubeconfig = "/explicit.conf"};
  auto conn = loadConnection(sources);
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_THAT(conn->source, StartsWith("kubeconfig /explicit.conf"));
  EXPECT_FALSE(conn->from_host_kubeconfig);

  sources.explicit_kubeconfig.clear();
  conn = loadConnection(sources);
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_THAT(conn->source, StartsWith("kubeconfig /env.conf"));

  sources.env.erase("KUBECONFIG");
  conn = loadConnection(sources);
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->source, "in-cluster service account");

  sources.env.clear();
  conn = loadConnection(sources);
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_THAT(conn->source, StartsWith("kubeconfig /etc/kubernetes/admin.conf"));
  EXPECT_EQ(conn->token, "admin");
  EXPECT_TRUE(conn->from_host_kubeconfig);  // what a move to another API address rewrites

  std::filesystem::remove(s.host.dir() + "/etc/kubernetes/admin.conf");
  conn = loadConnection(sources);
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_THAT(conn->source, StartsWith("kubeconfig /etc/kubernetes/kubelet.conf"));
  EXPECT_EQ(conn->token, "kubelet");
  EXPECT_TRUE(conn->from_host_kubeconfig);

  std::filesystem::remove(s.host.dir() + "/etc/kubernetes/kubelet.conf");
  conn = loadConnection(sources);
  ASSERT_FALSE(conn);
  EXPECT_EQ(conn.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(conn.error().message(), StartsWith("no Kubernetes connection"));
}

TEST(LoadNodeConnection, IsTheHostsKubeletConfWithTheInClusterServerInAPod) {
  Sources s;
  // On the host (no in-cluster environment): kubelet.conf as it is, even with admin.conf there.
  auto conn = loadNodeConnection(s.host.fs(), {});
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->token, "kubelet");
  EXPECT_EQ(conn->server, "https://10.0.0.1:6443");
  EXPECT_THAT(conn->source, StartsWith("kubeconfig /etc/kubernetes/kubelet.conf"));
  // In a pod: the kubelet's credentials, not the pod's ServiceAccount, at the Service's address
  // (kubelet.conf's may be the host's localhost:6444).
  conn = loadNodeConnection(s.host.fs(), s.fullEnv());
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->token, "kubelet");
  EXPECT_EQ(conn->server, "https://10.96.0.1:443");
  EXPECT_THAT(conn->source, HasSubstr("server https://10.96.0.1:443 (in-cluster)"));
  conn = loadNodeConnection(
      s.host.fs(), {{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->server, "https://[fd00::1]:443");
  std::filesystem::remove(s.host.dir() + "/etc/kubernetes/kubelet.conf");
  conn = loadNodeConnection(s.host.fs(), s.fullEnv());
  ASSERT_FALSE(conn);
  EXPECT_EQ(conn.error().code(), ErrorCode::kNotFound);
}

TEST(LoadConnection, RelativeExplicitPathsAreResolvedAgainstTheWorkingDirectory) {
  Sources s;
  s.process.write("/home/op/k.conf", kubeconfig("", "    token: op\n"));
  auto conn = loadConnection({.process_fs = s.process.fs(),
                              .host_fs = s.host.fs(),
                              .env = {{"KUBECONFIG", ":k.conf"}},
                              .working_dir = "/home/op"});
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->token, "op");
}

TEST(LoadConnection, ABrokenExplicitKubeconfigIsAnErrorNotAFallback) {
  Sources s;
  auto conn = loadConnection({.process_fs = s.process.fs(),
                              .host_fs = s.host.fs(),
                              .explicit_kubeconfig = "/missing.conf"});
  ASSERT_FALSE(conn);
  EXPECT_EQ(conn.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(conn.error().message(), StartsWith("kubeconfig /missing.conf: "));
}

// Loads `text` as /x/admin.conf and returns the error.
base::Error loadError(const std::string& text) {
  TempRoot root;
  root.write("/x/admin.conf", text);
  auto conn = loadKubeconfig(root.fs(), "/x/admin.conf");
  EXPECT_FALSE(conn);
  return conn ? base::Error() : conn.error();
}

TEST(KubeconfigErrors, EachNamesTheFileAndTheField) {
  const struct {
    std::string text;
    ErrorCode code;
    std::string message;
  } cases[] = {
      {"clusters: [unclosed", ErrorCode::kParse, "kubeconfig /x/admin.conf: malformed YAML: "},
      {"just a string", ErrorCode::kParse, "kubeconfig /x/admin.conf: not a YAML mapping"},
      {kubeconfig("", "    token: t\n", "foo"), ErrorCode::kNotFound,
       R"(kubeconfig /x/admin.conf: context "foo" not found)"},
      {kubeconfig("", "    token: t\n", "\"\""), ErrorCode::kNotFound,
       "kubeconfig /x/admin.conf: current-context is not set"},
      {"current-context: ctx\ncontexts:\n- name: ctx\n  context: {cluster: nope, user: u}\n",
       ErrorCode::kNotFound,
       R"(kubeconfig /x/admin.conf: context "ctx": cluster "nope" not found)"},
      {"current-context: ctx\ncontexts:\n- name: ctx\n  context: {cluster: c, user: nobody}\n"
       "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n",
       ErrorCode::kNotFound, R"(kubeconfig /x/admin.conf: context "ctx": user "nobody" not found)"},
      {kubeconfig("    certificate-authority-data: '!!not base64!!'\n", "    token: t\n"),
       ErrorCode::kParse,
       R"(kubeconfig /x/admin.conf: cluster "c": certificate-authority-data is not valid base64)"},
      {kubeconfig("", "    client-certificate-data: Zm9v\n    client-key-data: 'Zm9v='\n"),
       ErrorCode::kParse,
       R"(kubeconfig /x/admin.conf: user "u": client-key-data is not valid base64)"},
      {kubeconfig("    certificate-authority: missing.crt\n", ""), ErrorCode::kNotFound,
       R"(kubeconfig /x/admin.conf: cluster "c": certificate-authority: )"},
      {kubeconfig("", "    exec:\n      command: aws\n"), ErrorCode::kInvalidArgument,
       R"(kubeconfig /x/admin.conf: user "u": exec is not supported)"},
      {kubeconfig("", "    client-certificate-data: Zm9v\n"), ErrorCode::kInvalidArgument,
       R"(kubeconfig /x/admin.conf: user "u": client-certificate and client-key must be set together)"},
      {kubeconfig("    insecure-skip-tls-verify: perhaps\n", ""), ErrorCode::kParse,
       R"(kubeconfig /x/admin.conf: cluster "c": insecure-skip-tls-verify is not a boolean)"},
      // Issue 24 defect 12: kubectl refuses both; so does ekco.
      {kubeconfig(
           "    certificate-authority-data: "
           "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmZha2UgQ0EKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=\n"
           "    insecure-skip-tls-verify: true\n",
           "    token: t\n"),
       ErrorCode::kInvalidArgument,
       R"(kubeconfig /x/admin.conf: cluster "c": certificate-authority and insecure-skip-tls-verify are both set; keep one)"},
  };
  for (const auto& c : cases) {
    const base::Error error = loadError(c.text);
    EXPECT_EQ(error.code(), c.code) << c.text << "\n" << error.message();
    EXPECT_THAT(error.message(), StartsWith(c.message)) << c.text;
    EXPECT_EQ(error.message().find('\n'), std::string::npos) << error.message();
  }
}

// Found by tests/fuzz/kubeconfig_fuzz.cc: names, values and yaml-cpp's message went raw into
// the error, which must stay one line; a file name with a control character is refused before
// anything is read.
TEST(KubeconfigErrors, NamesAndValuesAreQuotedAndEscaped) {
  EXPECT_EQ(loadError(std::string("a: \"\\\x04\"\n", 8)).message(),
            "kubeconfig /x/admin.conf: malformed YAML: yaml-cpp: error at line 1, column 7: "
            "unknown escape character: \\x04");
  EXPECT_EQ(loadError(kubeconfig("", "    token: t\n", "\"x\\ny\"")).message(),
            R"(kubeconfig /x/admin.conf: context "x\ny" not found)");
  const base::Error server = loadError(
      "current-context: ctx\ncontexts:\n- name: ctx\n  context: {cluster: \"c\\r\"}\n"
      "clusters:\n- name: \"c\\r\"\n  cluster: {server: \"ftp://\\e[2J\"}\n");
  EXPECT_EQ(
      server.message(),
      R"(kubeconfig /x/admin.conf: cluster "c\r": server "ftp://\x1b[2J" is not an http(s) URL)");
  const base::Error file = loadError(kubeconfig("    certificate-authority: \"ca\\n.crt\"\n", ""));
  EXPECT_EQ(file.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      file.message(),
      R"(kubeconfig /x/admin.conf: cluster "c": certificate-authority: not a file name: "ca\n.crt")");
  const base::Error token = loadError(kubeconfig("", "    tokenFile: \"\\ttoken\"\n"));
  EXPECT_EQ(token.message(),
            R"(kubeconfig /x/admin.conf: user "u": tokenFile: not a file name: "\ttoken")");
}

TEST(Kubeconfig, TheSourceNamesTheContextOnOneLine) {
  TempRoot root;
  root.write("/x/admin.conf",
             "current-context: \"a\\nb\"\ncontexts:\n- name: \"a\\nb\"\n  context: {cluster: c}\n"
             "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n");
  auto conn = loadKubeconfig(root.fs(), "/x/admin.conf");
  ASSERT_TRUE(conn) << conn.error().message();
  EXPECT_EQ(conn->source, R"(kubeconfig /x/admin.conf (context a\nb))");
}

TEST(KubeconfigErrors, AMissingFileIsNotFound) {
  TempRoot root;
  auto conn = loadKubeconfig(root.fs(), "/x/admin.conf");
  ASSERT_FALSE(conn);
  EXPECT_EQ(conn.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(conn.error().message(), StartsWith("kubeconfig /x/admin.conf: "));
}

TEST(Base64, DecodesStandardBase64AndRejectsEverythingElse) {
  EXPECT_EQ(base64Decode("aGVsbG8="), "hello");
  EXPECT_EQ(base64Decode("aGVsbG8"), "hello");
  EXPECT_EQ(base64Decode("aGVs\nbG8=\n"), "hello");
  EXPECT_EQ(base64Decode(""), "");
  EXPECT_FALSE(base64Decode("aGVsbG8=x"));
  EXPECT_FALSE(base64Decode("a"));
  EXPECT_FALSE(base64Decode("aGVsbG9-"));  // URL-safe alphabet
  EXPECT_FALSE(base64Decode("aGVsbG9="));  // non-zero leftover bits
}

}  // namespace
}  // namespace ekco::kube
