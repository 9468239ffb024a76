// A kubeadm-shaped PKI in a temporary host root, made by the openssl command: the three CAs,
// every leaf certificate kubeadm makes under /etc/kubernetes/pki and the kubeconfigs with
// embedded client certificates, the leaves valid for `days` days.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/os/process.h"
#include "pki/certificate.h"

namespace ekco::agent::testing {

class KubeadmPki {
 public:
  // `root` is the host root; files go to <root>/etc/kubernetes{,/pki}.
  explicit KubeadmPki(std::filesystem::path root) : root_(std::move(root)) {}

  std::filesystem::path pki() const { return root_ / "etc/kubernetes/pki"; }
  std::filesystem::path k8s() const { return root_ / "etc/kubernetes"; }

  // openssl in `dir`; the test fails on a non-zero exit.
  base::ProcessResult openssl(std::vector<std::string> args,
                              const std::filesystem::path& dir) const {
    args.insert(args.begin(), "openssl");
    base::ProcessRequest request{
        .argv = args, .working_dir = dir.string(), .timeout = std::chrono::seconds(60)};
    auto r = runner_.run(request);
    EXPECT_TRUE(r) << r.error().message();
    if (!r) return {};
    EXPECT_EQ(r->exit_code, 0) << base::formatArgv(args) << ": " << r->stderr_data;
    return *r;
  }

  // The PKI, made once per test program for each `days` and copied: openssl's RSA key
  // generation is what costs (about 16 keys).
  void make(int days) {
    static std::mutex mu;
    static std::map<int, std::filesystem::path> made;
    std::filesystem::path source;
    {
      std::lock_guard lock(mu);
      auto it = made.find(days);
      if (it == made.end()) {
        std::string tmpl = "/tmp/ekco-kubeadm-pki-XXXXXX";
        EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
        KubeadmPki fresh(tmpl);
        fresh.generate(days);
        it = made.emplace(days, std::filesystem::path(tmpl)).first;
        // Removed when the test program exits.
        static struct Cleanup {
          ~Cleanup() {
            std::error_code ec;
            for (const auto& [d, p] : made) std::filesystem::remove_all(p, ec);
          }
        } cleanup;
      }
      source = it->second;
    }
    std::filesystem::create_directories(root_ / "etc");
    std::filesystem::copy(source / "etc", root_ / "etc",
                          std::filesystem::copy_options::recursive |
                              std::filesystem::copy_options::overwrite_existing);
  }

  void generate(int days, const std::vector<std::string>& kubeconfigs = {
                              "admin.conf", "controller-manager.conf", "scheduler.conf"}) {
    std::filesystem::create_directories(pki() / "etcd");
    ca("ca", "kubernetes");
    ca("front-proxy-ca", "front-proxy-ca");
    ca("etcd/ca", "etcd-ca");
    const std::string server = "keyUsage=critical,digitalSignature,keyEncipherment\n";
    leaf("apiserver", "ca", "/CN=kube-apiserver",
         server +
             "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:cp-1,DNS:kubernetes,"
             "DNS:kubernetes.default,IP:10.96.0.1,IP:127.0.0.1\n",
         days);
    leaf("apiserver-kubelet-client", "ca",
         "/O=kubeadm:cluster-admins/CN=kube-apiserver-kubelet-client",
         server + "extendedKeyUsage=clientAuth\n", days);
    leaf("apiserver-etcd-client", "etcd/ca", "/CN=kube-apiserver-etcd-client",
         server + "extendedKeyUsage=clientAuth\n", days);
    leaf("front-proxy-client", "front-proxy-ca", "/CN=front-proxy-client",
         server + "extendedKeyUsage=clientAuth\n", days);
    leaf("etcd/server", "etcd/ca", "/CN=cp-1",
         server +
             "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:cp-1,"
             "DNS:localhost,IP:127.0.0.1\n",
         days);
    leaf("etcd/peer", "etcd/ca", "/CN=cp-1",
         server +
             "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:cp-1,"
             "DNS:localhost,IP:127.0.0.1\n",
         days);
    leaf("etcd/healthcheck-client", "etcd/ca", "/CN=kube-etcd-healthcheck-client",
         server + "extendedKeyUsage=clientAuth\n", days);
    for (const std::string& conf : kubeconfigs) kubeconfig(conf, days);
  }

  // This primary's own apiserver.crt and key, as kubeadm makes them on `node` advertising `ip`
  // (signed by the PKI's CA), in place of the ones make() copied.
  void apiserverFor(const std::string& node, const std::string& ip, int days) {
    leaf("apiserver", "ca", "/CN=kube-apiserver",
         "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
         "subjectAltName=DNS:" +
             node + ",DNS:kubernetes,DNS:kubernetes.default,IP:10.96.0.1,IP:" + ip + "\n",
         days);
  }

  std::string read(const std::filesystem::path& p) const {
    std::ifstream in(p);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  // RSA 2048 as kubeadm makes them for `ca`, `apiserver` and `admin.conf`; EC P-256 (SEC1)
  // for the rest, which keeps the PKI quick to make and covers both key types.
  static bool rsa(const std::string& name) {
    return name == "ca" || name == "apiserver" || name == "kc-admin.conf";
  }
  void ca(const std::string& name, const std::string& cn) {
    const std::vector<std::string> key =
        rsa(name)
            ? std::vector<std::string>{"-newkey", "rsa:2048"}
            : std::vector<std::string>{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"};
    std::vector<std::string> args = {"req", "-x509"};
    args.insert(args.end(), key.begin(), key.end());
    args.insert(args.end(),
                {"-nodes", "-keyout", name + ".key", "-out", name + ".crt", "-subj", "/CN=" + cn,
                 "-days", "3650", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                 "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign"});
    openssl(args, pki());
  }
  void leaf(const std::string& name, const std::string& ca, const std::string& subject,
            const std::string& extensions, int days) {
    if (rsa(name)) {
      openssl({"genrsa", "-traditional", "-out", name + ".key", "2048"}, pki());
    } else {
      openssl({"ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", name + ".key"},
              pki());
    }
    openssl({"req", "-new", "-key", name + ".key", "-subj", subject, "-out", name + ".csr"}, pki());
    std::ofstream(pki() / (name + ".ext"))
        << extensions << "basicConstraints=critical,CA:FALSE\nauthorityKeyIdentifier=keyid\n";
    openssl({"x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
             "-CAcreateserial", "-days", std::to_string(days), "-extfile", name + ".ext", "-out",
             name + ".crt"},
            pki());
    std::filesystem::remove(pki() / (name + ".csr"));
    std::filesystem::remove(pki() / (name + ".ext"));
  }
  void kubeconfig(const std::string& conf, int days) {
    const std::string user = conf == "admin.conf"       ? "kubernetes-admin"
                             : conf == "scheduler.conf" ? "system:kube-scheduler"
                                                        : "system:kube-controller-manager";
    const std::string base = "kc-" + conf;
    leaf(base, "ca", "/CN=" + user,
         "keyUsage=critical,digitalSignature,keyEncipherment\n"
         "extendedKeyUsage=clientAuth\n",
         days);
    const auto b64 = [&](const std::string& file) { return pki::base64Encode(read(pki() / file)); };
    std::ofstream(k8s() / conf)
        << "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: "
        << b64("ca.crt") << "\n    server: https://127.0.0.1:6443\n  name: kubernetes\n"
        << "contexts:\n- context:\n    cluster: kubernetes\n    user: " << user
        << "\n  name: " << user << "@kubernetes\ncurrent-context: " << user
        << "@kubernetes\nkind: Config\npreferences: {}\nusers:\n- name: " << user
        << "\n  user:\n    client-certificate-data: " << b64(base + ".crt")
        << "\n    client-key-data: " << b64(base + ".key") << "\n";
    std::filesystem::remove(pki() / (base + ".crt"));
    std::filesystem::remove(pki() / (base + ".key"));
  }

  std::filesystem::path root_;
  base::SystemClock clock_;
  mutable base::BoostProcessRunner runner_{clock_};
};

}  // namespace ekco::agent::testing
