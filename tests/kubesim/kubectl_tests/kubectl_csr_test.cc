// CertificateSigningRequests proven with the real kubectl: created by a node's identity (the
// server sets spec.username/groups), `kubectl certificate approve|deny` through /approval, the
// signer issuing a certificate `openssl verify` accepts, `kubectl get csr`'s columns, and the
// registry's refusals (csr.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
#include <sstream>

#include "tests/kubesim/kubectl_tests/kubectl_support.h"
#include "tests/kubesim/server/pki.h"
#include "tests/kubesim/validation/types.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

class KubectlCsrTest : public testing::KubectlFixture {
 protected:
  // A server on the real clock (certificates must be valid now for `openssl verify`), with a
  // token for a node identity and one for an approver; kubeconfigs for both.
  void startWithUsers() {
    ServerOptions options;
    options.out_dir = dir_.string();
    options.tokens = {
        TokenUser{.token = "node-token", .user = "system:node:n1", .groups = {"system:nodes"}},
        TokenUser{.token = "approver-token", .user = "approver", .groups = {}}};
    auto server = Server::start(std::move(options));
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    ASSERT_TRUE(server_->writeTokenKubeconfig((dir_ / "node.kubeconfig").string(), "node-token"));
    ASSERT_TRUE(
        server_->writeTokenKubeconfig((dir_ / "approver.kubeconfig").string(), "approver-token"));
    // What kubeadm's bootstrap policy grants nodes: create and get their CSRs.
    auto applied = kubectl({"apply", "-f", "-"}, R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: csr-creator}
rules:
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests]
  verbs: [create, get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: nodes-create-csrs}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: csr-creator}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:nodes}
)");
    ASSERT_EQ(applied.exit_code, 0) << applied.stderr_data;
  }

  base::ProcessResult run(std::vector<std::string> argv, std::string stdin_data = "") {
    base::ProcessRequest request{.argv = std::move(argv),
                                 .inherit_env = true,
                                 .env = {},
                                 .stdin_data = std::move(stdin_data),
                                 .working_dir = dir_.string(),
                                 .timeout = std::chrono::seconds(30),
                                 .kill_grace = std::chrono::milliseconds(0)};
    auto result = runner_.run(request);
    EXPECT_TRUE(result) << result.error().message();
    return result ? *result : base::ProcessResult{};
  }

  base::ProcessResult as(const std::string& who, std::vector<std::string> args,
                         std::string stdin_data = "") {
    std::vector<std::string> argv = {testing::kKubectlPath, "--kubeconfig",
                                     (dir_ / (who + ".kubeconfig")).string(), "--cache-dir",
                                     (dir_ / ("cache-" + who)).string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(std::move(argv), std::move(stdin_data));
  }

  // A PEM certificate request made by the openssl CLI (a new P-256 key).
  std::string request(const std::string& subject, const std::string& sans = "") {
    std::vector<std::string> argv = {"openssl",
                                     "req",
                                     "-new",
                                     "-newkey",
                                     "ec",
                                     "-pkeyopt",
                                     "ec_paramgen_curve:P-256",
                                     "-nodes",
                                     "-keyout",
                                     (dir_ / "key.pem").string(),
                                     "-subj",
                                     subject};
    if (!sans.empty()) {
      argv.push_back("-addext");
      argv.push_back("subjectAltName=" + sans);
    }
    auto r = run(argv);
    EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
    return r.stdout_data;
  }

  static std::string csrYaml(const std::string& name, const std::string& pem,
                             const std::string& signer, const std::string& usages,
                             const std::string& extra = "") {
    return "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  "
           "name: " +
           name + "\nspec:\n  request: " + base64Encode(pem) + "\n  signerName: " + signer +
           "\n  usages: " + usages + "\n" + extra;
  }

  // A ClusterRole `name` with these rules (YAML list items), bound to the user `name`.
  base::ProcessResult grant(const std::string& name, const std::string& rules) {
    return kubectl({"apply", "-f", "-"},
                   "apiVersion: rbac.authorization.k8s.io/v1\n"
                   "kind: ClusterRole\n"
                   "metadata: {name: " +
                       name +
                       "}\n"
                       "rules:\n" +
                       rules +
                       "---\n"
                       "apiVersion: rbac.authorization.k8s.io/v1\n"
                       "kind: ClusterRoleBinding\n"
                       "metadata: {name: " +
                       name +
                       "}\n"
                       "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: "
                       "ClusterRole, name: " +
                       name +
                       "}\n"
                       "subjects:\n"
                       "- {apiGroup: rbac.authorization.k8s.io, kind: User, "
                       "name: " +
                       name + "}\n");
  }

  json getCsr(const std::string& name) {
    auto r = kubectl({"get", "csr", name, "-o", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
    return json::parse(r.stdout_data, nullptr, false);
  }
};

constexpr const char* kServingUsages = "[digital signature, key encipherment, server auth]";

TEST_F(KubectlCsrTest, ANodesServingRequestIsApprovedIssuedAndVerifiesAgainstTheCa) {
  startWithUsers();
  const std::string pem = request("/O=system:nodes/CN=system:node:n1", "DNS:n1,IP:10.0.0.11");
  // The body claims another requester: the server records the caller instead.
  auto created = as("node", {"create", "-f", "-"},
                    csrYaml("serving-n1", pem, "kubernetes.io/kubelet-serving", kServingUsages,
                            "  expirationSeconds: 3600\n  username: system:admin\n  groups: "
                            "[system:masters]\n"));
  ASSERT_EQ(created.exit_code, 0) << created.stderr_data;
  json csr = getCsr("serving-n1");
  EXPECT_EQ(csr["spec"]["username"], "system:node:n1");
  EXPECT_EQ(csr["spec"]["groups"], json({"system:nodes", "system:authenticated"}));

  auto table = kubectl({"get", "csr"});
  ASSERT_EQ(table.exit_code, 0) << table.stderr_data;
  EXPECT_THAT(table.stdout_data,
              HasSubstr("NAME         AGE   SIGNERNAME                      REQUESTOR        "
                        "REQUESTEDDURATION   CONDITION"));
  EXPECT_THAT(table.stdout_data, HasSubstr("kubernetes.io/kubelet-serving   system:node:n1   60m "
                                           "                Pending"));

  server_->runKubelet();  // the signer leaves pending requests alone
  EXPECT_FALSE(getCsr("serving-n1")["status"].contains("certificate"));

  auto approved = kubectl({"certificate", "approve", "serving-n1"});
  ASSERT_EQ(approved.exit_code, 0) << approved.stderr_data;
  EXPECT_THAT(approved.stdout_data, HasSubstr("certificatesigningrequest.certificates.k8s.io/"
                                              "serving-n1 approved"));
  server_->runKubelet();
  csr = getCsr("serving-n1");
  const json& cond = csr["status"]["conditions"][0];
  EXPECT_EQ(cond["type"], "Approved");
  EXPECT_EQ(cond["status"], "True");
  EXPECT_EQ(cond["reason"], "KubectlApprove");
  EXPECT_FALSE(cond.value("lastUpdateTime", "").empty());
  EXPECT_FALSE(cond.value("lastTransitionTime", "").empty());
  EXPECT_THAT(kubectl({"get", "csr", "serving-n1"}).stdout_data, HasSubstr("Approved,Issued"));

  auto cert = kubectl({"get", "csr", "serving-n1", "-o", "jsonpath={.status.certificate}"});
  std::string error;
  auto cert_pem = decodeBase64(cert.stdout_data, &error);
  ASSERT_TRUE(cert_pem) << error;
  std::ofstream(dir_ / "issued.crt") << *cert_pem;
  auto verified = run(
      {"openssl", "verify", "-CAfile", (dir_ / "ca.crt").string(), (dir_ / "issued.crt").string()});
  EXPECT_EQ(verified.exit_code, 0) << verified.stdout_data << verified.stderr_data;
  EXPECT_THAT(verified.stdout_data, HasSubstr("issued.crt: OK"));
  auto text = run({"openssl", "x509", "-in", (dir_ / "issued.crt").string(), "-noout", "-text"});
  EXPECT_THAT(text.stdout_data, HasSubstr("Subject: O = system:nodes, CN = system:node:n1"));
  EXPECT_THAT(text.stdout_data, HasSubstr("DNS:n1, IP Address:10.0.0.11"));
  EXPECT_THAT(text.stdout_data, HasSubstr("TLS Web Server Authentication"));
  EXPECT_THAT(text.stdout_data, HasSubstr("Digital Signature, Key Encipherment"));
  // expirationSeconds 3600, backdated five minutes: 65 minutes between the two dates.
  auto dates = run({"openssl", "x509", "-in", (dir_ / "issued.crt").string(), "-noout",
                    "-startdate", "-enddate", "-dateopt", "iso_8601"});
  EXPECT_EQ(dates.exit_code, 0) << dates.stderr_data;
  auto stamp = [&](const std::string& key) {
    auto at = dates.stdout_data.find(key + "=");
    std::tm tm{};
    strptime(dates.stdout_data.substr(at + key.size() + 1, 20).c_str(), "%Y-%m-%d %H:%M:%SZ", &tm);
    return timegm(&tm);
  };
  EXPECT_EQ(stamp("notAfter") - stamp("notBefore"), 65 * 60);
}

TEST_F(KubectlCsrTest, DenyLeavesTheRequestUnissuedAndApprovingItThenIsInvalid) {
  startWithUsers();
  const std::string pem = request("/O=system:nodes/CN=system:node:n1", "DNS:n1");
  ASSERT_EQ(as("node", {"create", "-f", "-"},
               csrYaml("denied", pem, "kubernetes.io/kubelet-serving", kServingUsages))
                .exit_code,
            0);
  auto denied = kubectl({"certificate", "deny", "denied"});
  ASSERT_EQ(denied.exit_code, 0) << denied.stderr_data;
  server_->runKubelet();
  EXPECT_FALSE(getCsr("denied")["status"].contains("certificate"));
  EXPECT_THAT(kubectl({"get", "csr", "denied"}).stdout_data, HasSubstr("Denied"));
  // kubectl refuses to approve a denied request itself; the API refuses it too.
  auto again = kubectl({"certificate", "approve", "denied"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_THAT(again.stderr_data, HasSubstr("is already Denied"));
  auto both = kubectl({"patch", "csr", "denied", "--subresource=approval", "--type=json", "-p",
                       R"([{"op":"add","path":"/status/conditions/-",)"
                       R"("value":{"type":"Approved","status":"True"}}])"});
  EXPECT_NE(both.exit_code, 0);
  EXPECT_THAT(both.stderr_data,
              HasSubstr("status.conditions[1].type: Invalid value: \"Approved\": Approved and "
                        "Denied conditions are mutually exclusive"));
}

TEST_F(KubectlCsrTest, StatusChangesOnlyThroughItsSubresources) {
  startWithUsers();
  const std::string pem = request("/O=system:nodes/CN=system:node:n1", "DNS:n1");
  ASSERT_EQ(as("node", {"create", "-f", "-"},
               csrYaml("sub", pem, "kubernetes.io/kubelet-serving", kServingUsages))
                .exit_code,
            0);
  // A replace of the main resource keeps the stored status (and spec).
  json body = getCsr("sub");
  body["status"]["conditions"] = {{{"type", "Approved"}, {"status", "True"}}};
  body["spec"]["signerName"] = "example.com/other";
  auto replaced = kubectl({"replace", "-f", "-"}, body.dump());
  ASSERT_EQ(replaced.exit_code, 0) << replaced.stderr_data;
  json after = getCsr("sub");
  EXPECT_FALSE(after["status"].contains("conditions"));
  EXPECT_EQ(after["spec"]["signerName"], "kubernetes.io/kubelet-serving");
  // /status may not add Approved.
  auto via_status = kubectl({"patch", "csr", "sub", "--subresource=status", "--type=merge", "-p",
                             R"({"status":{"conditions":[{"type":"Approved","status":"True"}]}})"});
  EXPECT_NE(via_status.exit_code, 0);
  EXPECT_THAT(via_status.stderr_data,
              HasSubstr("status.conditions: Forbidden: updates may not add a condition of type "
                        "\"Approved\""));
  // /approval may not remove an approval once given.
  ASSERT_EQ(kubectl({"certificate", "approve", "sub"}).exit_code, 0);
  auto removed = kubectl({"patch", "csr", "sub", "--subresource=approval", "--type=merge", "-p",
                          R"({"status":{"conditions":[]}})"});
  EXPECT_NE(removed.exit_code, 0);
  EXPECT_THAT(removed.stderr_data,
              HasSubstr("updates may not remove a condition of type \"Approved\""));
}

TEST_F(KubectlCsrTest, ApprovingNeedsApproveOnTheSigner) {
  startWithUsers();
  const std::string pem = request("/O=system:nodes/CN=system:node:n1", "DNS:n1");
  ASSERT_EQ(as("node", {"create", "-f", "-"},
               csrYaml("rbac", pem, "kubernetes.io/kubelet-serving", kServingUsages))
                .exit_code,
            0);
  auto role = [&](const std::string& signers_rule) {
    return grant("approver", R"(- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests]
  verbs: [get, list]
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests/approval]
  verbs: [update]
)" + signers_rule + "\n");
  };
  ASSERT_EQ(role("").exit_code, 0);
  auto refused = as("approver", {"certificate", "approve", "rbac"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.stderr_data,
              HasSubstr("certificatesigningrequests.certificates.k8s.io \"rbac\" is forbidden: "
                        "user not permitted to approve requests with signerName "
                        "\"kubernetes.io/kubelet-serving\""));
  ASSERT_EQ(role(R"(- apiGroups: [certificates.k8s.io]
  resources: [signers]
  resourceNames: [kubernetes.io/kubelet-serving]
  verbs: [approve])")
                .exit_code,
            0);
  auto approved = as("approver", {"certificate", "approve", "rbac"});
  EXPECT_EQ(approved.exit_code, 0) << approved.stderr_data;
}

// The CertificateSigning admission plugin: issuing (a /status write setting
// status.certificate) needs `sign` on the signer, by its name or `<domain>/*`; updating
// certificatesigningrequests/status alone is not enough.
TEST_F(KubectlCsrTest, SigningNeedsSignOnTheSigner) {
  startWithUsers();
  const std::string pem = request("/CN=alice");
  ASSERT_EQ(kubectl({"create", "-f", "-"},
                    csrYaml("alice", pem, "example.com/signer", "[digital signature]"))
                .exit_code,
            0);
  ASSERT_EQ(kubectl({"certificate", "approve", "alice"}).exit_code, 0);
  // The token user "approver" here plays a signer.
  auto role = [&](const std::string& signers_rule) {
    return grant("approver", R"(- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests]
  verbs: [get]
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests/status]
  verbs: [update]
)" + signers_rule + "\n");
  };
  json signed_csr = getCsr("alice");
  signed_csr["status"]["certificate"] = base64Encode(server_->pki().ca_cert_pem);
  const std::string path = "/apis/certificates.k8s.io/v1/certificatesigningrequests/alice/status";

  ASSERT_EQ(role("").exit_code, 0);
  auto refused = as("approver", {"replace", "--raw", path, "-f", "-"}, signed_csr.dump());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.stderr_data,
              HasSubstr("certificatesigningrequests.certificates.k8s.io \"alice\" is forbidden: "
                        "user not permitted to sign requests with signerName "
                        "\"example.com/signer\""));
  EXPECT_FALSE(getCsr("alice")["status"].contains("certificate"));

  ASSERT_EQ(role(R"(- apiGroups: [certificates.k8s.io]
  resources: [signers]
  resourceNames: [example.com/*]
  verbs: [sign])")
                .exit_code,
            0);
  auto issued = as("approver", {"replace", "--raw", path, "-f", "-"}, signed_csr.dump());
  EXPECT_EQ(issued.exit_code, 0) << issued.stderr_data;
  EXPECT_EQ(getCsr("alice")["status"]["certificate"], signed_csr["status"]["certificate"]);
}

TEST_F(KubectlCsrTest, CreateValidatesTheRequestSignerAndUsages) {
  startWithUsers();
  auto bad_pem =
      kubectl({"create", "-f", "-"},
              csrYaml("bad", "not a pem\n", "kubernetes.io/kubelet-serving", kServingUsages));
  EXPECT_NE(bad_pem.exit_code, 0);
  EXPECT_THAT(bad_pem.stderr_data,
              HasSubstr("The CertificateSigningRequest \"bad\" is invalid: spec.request: Invalid "
                        "value: []byte{0x6e, 0x6f"));
  EXPECT_THAT(bad_pem.stderr_data, HasSubstr("PEM block type must be CERTIFICATE REQUEST"));
  const std::string pem = request("/CN=someone");
  auto bad =
      kubectl({"create", "-f", "-"}, csrYaml("bad2", pem, "signer-without-domain",
                                             "[client auth, flying]", "  expirationSeconds: 60\n"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.stderr_data,
              HasSubstr("spec.usages[1]: Unsupported value: \"flying\": supported values: "
                        "\"any\", \"cert sign\""));
  EXPECT_THAT(bad.stderr_data,
              HasSubstr("spec.signerName: Invalid value: \"signer-without-domain\": must be a "
                        "fully qualified domain and path of the form 'example.com/signer-name'"));
  EXPECT_THAT(bad.stderr_data, HasSubstr("spec.expirationSeconds: Invalid value: 60: may not "
                                         "specify a duration less than 600 seconds (10 minutes)"));
  auto no_signer = kubectl({"create", "-f", "-"}, csrYaml("bad3", pem, "\"\"", "[client auth]"));
  EXPECT_THAT(no_signer.stderr_data, HasSubstr("spec.signerName: Required value"));
}

TEST_F(KubectlCsrTest, TheSignerFailsARequestItsRulesRefuse) {
  startWithUsers();
  // A serving request without SANs: kube-controller-manager's signer marks it Failed.
  const std::string pem = request("/O=system:nodes/CN=system:node:n1");
  ASSERT_EQ(as("node", {"create", "-f", "-"},
               csrYaml("nosan", pem, "kubernetes.io/kubelet-serving", kServingUsages))
                .exit_code,
            0);
  ASSERT_EQ(kubectl({"certificate", "approve", "nosan"}).exit_code, 0);
  server_->runKubelet();
  json csr = getCsr("nosan");
  EXPECT_FALSE(csr["status"].contains("certificate"));
  ASSERT_EQ(csr["status"]["conditions"].size(), 2u);
  EXPECT_EQ(csr["status"]["conditions"][1]["type"], "Failed");
  EXPECT_EQ(csr["status"]["conditions"][1]["reason"], "SignerValidationFailure");
  EXPECT_EQ(csr["status"]["conditions"][1]["message"],
            "invalid certificate request: DNS or IP subjectAltName is required");
  EXPECT_THAT(kubectl({"get", "csr", "nosan"}).stdout_data, HasSubstr("Approved,Failed"));
  // A client certificate for the API (kube-apiserver-client) is issued with clientAuth.
  const std::string client = request("/O=team/CN=jane");
  ASSERT_EQ(kubectl({"create", "-f", "-"},
                    csrYaml("jane", client, "kubernetes.io/kube-apiserver-client", "[client auth]"))
                .exit_code,
            0);
  ASSERT_EQ(kubectl({"certificate", "approve", "jane"}).exit_code, 0);
  server_->runKubelet();
  EXPECT_THAT(kubectl({"get", "csr", "jane"}).stdout_data, HasSubstr("Approved,Issued"));
}

}  // namespace
}  // namespace ekco::kubesim
