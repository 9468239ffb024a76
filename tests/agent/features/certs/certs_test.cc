// agent/features/certs/certs.h on a kubeadm-shaped PKI made by openssl in a temporary host root:
// inspection, renewal of files and kubeconfigs, backups and modes, external CAs, bad input, and a
// renewal cut short after every write it makes.
#include "agent/features/certs/certs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "hostfs/local_host_fs.h"
#include "pki/renew.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/features/certs/kubeadm_pki.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

// Forwards to a real HostFs; after `budget` mutating calls every further one fails, as if ekco
// had been killed there (nothing after that point reaches the disk).
class CutShortFs final : public hostfs::HostFs {
 public:
  CutShortFs(hostfs::HostFs& real, int budget) : real_(real), budget_(budget) {}
  std::string root() const override { return real_.root(); }
  std::string realPath(std::string_view p) const override { return real_.realPath(p); }
  base::Result<std::string> read(std::string_view p) const override { return real_.read(p); }
  base::Result<bool> exists(std::string_view p) const override { return real_.exists(p); }
  base::Result<hostfs::FileInfo> stat(std::string_view p) const override { return real_.stat(p); }
  base::Result<hostfs::Changed> write(std::string_view p, std::string_view c,
                                      const hostfs::WriteOptions& o = {}) override {
    if (!spend()) return cut();
    return real_.write(p, c, o);
  }
  base::Status remove(std::string_view p) override {
    if (!spend()) return cut();
    return real_.remove(p);
  }
  base::Status makeDirs(std::string_view p, std::uint32_t mode = 0755) override {
    if (!spend()) return cut();
    return real_.makeDirs(p, mode);
  }
  base::Result<std::vector<std::string>> list(std::string_view d) const override {
    return real_.list(d);
  }
  base::Result<std::size_t> sweepStaleTemps(std::string_view d, std::chrono::seconds s) override {
    return real_.sweepStaleTemps(d, s);
  }
  base::Status removeEmptyDir(std::string_view p) override {
    if (!spend()) return cut();
    return real_.removeEmptyDir(p);
  }
  int used() const { return used_; }

 private:
  bool spend() {
    if (used_ >= budget_) return false;
    ++used_;
    return true;
  }
  static base::Error cut() { return base::Error("cut short here", base::ErrorCode::kCancelled); }
  hostfs::HostFs& real_;
  int budget_;
  int used_ = 0;
};

class CertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_.make(10);
    auto opened = hostfs::LocalHostFs::open(tmp_.path(), clock_);
    ASSERT_TRUE(opened) << opened.error().message();
    fs_ = std::move(*opened);
    options_.now = std::chrono::system_clock::now();
    options_.ttl = std::chrono::hours(720);
  }
  const CertSpec& spec(std::string_view name) {
    specs_ = kubeadmCertificates(options_.certificates_dir, options_.kubernetes_dir);
    auto it = std::find_if(specs_.begin(), specs_.end(), [&](auto& s) { return s.name == name; });
    EXPECT_NE(it, specs_.end()) << name;
    return *it;
  }
  const CertState& state(const Inspection& in, std::string_view name) {
    for (const auto* list : {&in.certificates, &in.authorities}) {
      for (const CertState& s : *list) {
        if (s.name == name) return s;
      }
    }
    ADD_FAILURE() << "no state for " << name;
    return in.certificates.front();
  }
  std::string host(std::string_view p) const { return tmp_.path() + std::string(p); }
  std::uint32_t mode(std::string_view p) const {
    struct stat st {};
    EXPECT_EQ(::stat(host(p).c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }
  bool verifies(const std::string& cert_pem, const std::string& ca_file) {
    std::ofstream(host("/check.crt")) << cert_pem;
    return pki_.openssl({"verify", "-CAfile", host(ca_file), host("/check.crt")}, tmp_.path())
               .exit_code == 0;
  }

  testing::TempDir tmp_{"ekco-certs"};
  testing::KubeadmPki pki_{tmp_.path()};
  base::SystemClock clock_;
  std::unique_ptr<hostfs::LocalHostFs> fs_;
  InspectOptions options_;
  std::vector<CertSpec> specs_;
};

TEST_F(CertsTest, InspectsEveryKubeadmCertificateAndReportsTheMissingOne) {
  Inspection in = inspectCertificates(*fs_, options_);
  ASSERT_EQ(in.certificates.size(), 11u);
  ASSERT_EQ(in.authorities.size(), 3u);
  for (const CertState& s : in.certificates) {
    if (s.name == "super-admin.conf") {
      EXPECT_TRUE(s.missing);
      EXPECT_FALSE(s.due);
      continue;
    }
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(s.problem.empty()) << s.problem;
    ASSERT_TRUE(s.cert);
    EXPECT_GT(s.left, std::chrono::hours(24 * 9));
    EXPECT_LE(s.left, std::chrono::hours(24 * 10));
    EXPECT_TRUE(s.due);
    EXPECT_FALSE(s.external_ca);
  }
  EXPECT_EQ(state(in, "etcd-server").ca, "etcd-ca");
  EXPECT_EQ(state(in, "front-proxy-client").ca, "front-proxy-ca");
  EXPECT_EQ(state(in, "admin.conf").cert->subject, "CN=kubernetes-admin");
  EXPECT_FALSE(state(in, "etcd-ca").due);  // a CA is reported, never renewed
  EXPECT_GT(state(in, "ca").left, std::chrono::hours(24 * 3000));

  options_.ttl = std::chrono::hours(24 * 5);
  EXPECT_FALSE(state(inspectCertificates(*fs_, options_), "apiserver").due);
}

TEST_F(CertsTest, RenewsAFilePairWithABackupAndTheRightModes) {
  const std::string old_cert = pki_.read(host("/etc/kubernetes/pki/apiserver.crt"));
  const std::string old_key = pki_.read(host("/etc/kubernetes/pki/apiserver.key"));
  auto renewed = renewOne(*fs_, spec("apiserver"), options_);
  ASSERT_TRUE(renewed) << renewed.error().message();
  const std::string new_cert = pki_.read(host("/etc/kubernetes/pki/apiserver.crt"));
  EXPECT_NE(new_cert, old_cert);
  EXPECT_TRUE(verifies(new_cert, "/etc/kubernetes/pki/ca.crt"));
  EXPECT_TRUE(pki::checkKeyMatches(new_cert, pki_.read(host("/etc/kubernetes/pki/apiserver.key")),
                                   "apiserver"));
  EXPECT_EQ(mode("/etc/kubernetes/pki/apiserver.key"), 0600u);
  EXPECT_EQ(renewed->before.subject, renewed->after.subject);
  EXPECT_GT(renewed->after.not_after, renewed->before.not_after + std::chrono::hours(24 * 300));

  // The backup: 0700, the old pair (0600), no journal left.
  ASSERT_THAT(renewed->backup_dir, StartsWith("/etc/kubernetes/pki/.ekco-backup/"));
  EXPECT_EQ(mode(renewed->backup_dir), 0700u);
  EXPECT_EQ(mode("/etc/kubernetes/pki/.ekco-backup"), 0700u);
  EXPECT_EQ(pki_.read(host(renewed->backup_dir + "/apiserver.crt")), old_cert);
  EXPECT_EQ(pki_.read(host(renewed->backup_dir + "/apiserver.key")), old_key);
  EXPECT_EQ(mode(renewed->backup_dir + "/apiserver.key"), 0600u);
  EXPECT_FALSE(fs::exists(host(renewed->backup_dir + "/pending.apiserver")));

  EXPECT_FALSE(state(inspectCertificates(*fs_, options_), "apiserver").due);
}

TEST_F(CertsTest, RenewsAKubeconfigInPlaceKeepingTheRestOfTheFile) {
  const std::string before = pki_.read(host("/etc/kubernetes/admin.conf"));
  auto renewed = renewOne(*fs_, spec("admin.conf"), options_);
  ASSERT_TRUE(renewed) << renewed.error().message();
  const std::string after = pki_.read(host("/etc/kubernetes/admin.conf"));
  auto pair = readEmbeddedPair(after, "admin.conf");
  ASSERT_TRUE(pair) << pair.error().message();
  EXPECT_TRUE(pki::checkKeyMatches(pair->cert_pem, pair->key_pem, "admin.conf"));
  EXPECT_TRUE(verifies(pair->cert_pem, "/etc/kubernetes/pki/ca.crt"));
  // Only the two data fields changed: same lines otherwise.
  auto lines = [](const std::string& t) {
    std::vector<std::string> out;
    std::istringstream in(t);
    for (std::string l; std::getline(in, l);) {
      if (l.find("client-certificate-data") == std::string::npos &&
          l.find("client-key-data") == std::string::npos) {
        out.push_back(l);
      }
    }
    return out;
  };
  EXPECT_EQ(lines(after), lines(before));
  EXPECT_EQ(pki_.read(host(renewed->backup_dir + "/admin.conf")), before);
}

TEST_F(CertsTest, AnExternalCaIsReportedAndLeftAlone) {
  fs::remove(host("/etc/kubernetes/pki/front-proxy-ca.key"));
  Inspection in = inspectCertificates(*fs_, options_);
  EXPECT_TRUE(state(in, "front-proxy-client").external_ca);
  EXPECT_FALSE(state(in, "front-proxy-client").due);
  EXPECT_TRUE(state(in, "front-proxy-ca").external_ca);
  const std::string before = pki_.read(host("/etc/kubernetes/pki/front-proxy-client.crt"));
  auto renewed = renewOne(*fs_, spec("front-proxy-client"), options_);
  ASSERT_FALSE(renewed);
  EXPECT_EQ(renewed.error().message(),
            "/etc/kubernetes/pki/front-proxy-client.crt: signed by an external CA "
            "(/etc/kubernetes/pki/front-proxy-ca.key is not on this host); renew it with that CA");
  EXPECT_EQ(pki_.read(host("/etc/kubernetes/pki/front-proxy-client.crt")), before);
  EXPECT_FALSE(fs::exists(host("/etc/kubernetes/pki/.ekco-backup")));
}

TEST_F(CertsTest, BadInputIsOneLineNamingTheFileAndNothingIsWritten) {
  std::ofstream(host("/etc/kubernetes/pki/apiserver.crt")) << "-----BEGIN CERTIFICATE-----\nxx\n";
  fs::copy_file(host("/etc/kubernetes/pki/etcd/peer.key"),
                host("/etc/kubernetes/pki/etcd/server.key"), fs::copy_options::overwrite_existing);
  std::ofstream(host("/etc/kubernetes/scheduler.conf")) << "users: [{name: x, user: {}}]\n";
  Inspection in = inspectCertificates(*fs_, options_);
  EXPECT_EQ(state(in, "apiserver").problem,
            "/etc/kubernetes/pki/apiserver.crt: not a PEM certificate");
  EXPECT_EQ(state(in, "etcd-server").problem,
            "/etc/kubernetes/pki/etcd/server.key: the private key does not match the "
            "certificate");
  EXPECT_EQ(state(in, "scheduler.conf").problem,
            "/etc/kubernetes/scheduler.conf: the user has no embedded client-certificate-data");
  for (const char* name : {"apiserver", "etcd-server", "scheduler.conf"}) {
    EXPECT_FALSE(state(in, name).due) << name;
    auto renewed = renewOne(*fs_, spec(name), options_);
    EXPECT_FALSE(renewed) << name;
  }
  EXPECT_FALSE(fs::exists(host("/etc/kubernetes/pki/.ekco-backup")));
}

TEST_F(CertsTest, ARenewalCutShortAfterAnyWriteLeavesTheOldPairOrTheNewOne) {
  for (const char* name : {"apiserver", "controller-manager.conf"}) {
    // How many mutating calls a whole renewal makes.
    int total = 0;
    {
      testing::TempDir probe_dir{"ekco-certs-probe"};
      testing::KubeadmPki probe_pki{probe_dir.path()};
      probe_pki.make(10);
      auto probe_fs = hostfs::LocalHostFs::open(probe_dir.path(), clock_);
      ASSERT_TRUE(probe_fs);
      CutShortFs counting(**probe_fs, 1000);
      ASSERT_TRUE(renewOne(counting, spec(name), options_));
      total = counting.used();
    }
    ASSERT_GE(total, 4);
    for (int k = 0; k < total; ++k) {
      SCOPED_TRACE(std::string(name) + " cut after write " + std::to_string(k));
      const CertSpec& s = spec(name);
      const std::string before = pki_.read(host(s.cert_path));
      options_.now += 1s;  // a new backup directory per attempt
      CutShortFs cut(*fs_, k);
      EXPECT_FALSE(renewOne(cut, s, options_));
      // ekco starts again: the repair, then the pair must match and be the old or a new one.
      auto repaired = repairInterruptedRenewals(*fs_, options_);
      ASSERT_TRUE(repaired) << repaired.error().message();
      Inspection in = inspectCertificates(*fs_, options_);
      const CertState& st = state(in, name);
      EXPECT_TRUE(st.problem.empty()) << st.problem;
      const std::string now_text = pki_.read(host(s.cert_path));
      if (now_text != before) {
        EXPECT_GT(st.left, std::chrono::hours(24 * 300));  // the new pair, whole
      }
      // No journal is left behind.
      const std::string backups = host("/etc/kubernetes/pki/.ekco-backup");
      if (!fs::exists(backups)) continue;  // cut before the backup directory was made
      for (const auto& d : fs::directory_iterator(backups)) {
        for (const auto& f : fs::directory_iterator(d.path())) {
          EXPECT_THAT(f.path().filename().string(), ::testing::Not(StartsWith("pending")));
        }
      }
    }
  }
}

// Issue 34, item 12: a leaf whose CA expires first is not renewable, and the inspection says so
// once, for the Event, `ekco status`, `ekco certs check` and `ekco certs renew` alike.
TEST_F(CertsTest, ALeafWhoseCaExpiresFirstIsNotRenewableAndNotDue) {
  testing::TempDir dir{"ekco-certs-capped"};
  testing::KubeadmPki pki{dir.path()};
  pki.make(3650);  // the leaves expire with their CAs (made a moment before them)
  auto fs = hostfs::LocalHostFs::open(dir.path(), clock_);
  ASSERT_TRUE(fs);
  InspectOptions options = options_;
  options.ttl = std::chrono::hours(24 * 4000);  // every leaf inside the TTL
  const Inspection in = inspectCertificates(**fs, options);
  const CertState& s = state(in, "apiserver");
  ASSERT_TRUE(s.cert);
  EXPECT_FALSE(s.due);
  EXPECT_THAT(s.not_renewable, StartsWith("its CA ca expires "));
  EXPECT_THAT(s.not_renewable, HasSubstr("renew the CA with kubeadm"));
  // With the usual PKI (leaves of 10 days under CAs of 10 years) nothing is capped.
  for (const CertState& c : inspectCertificates(*fs_, options_).certificates) {
    EXPECT_EQ(c.not_renewable, "") << c.name;
  }
}

// Issue 34, item 7: the restore after a failed verification is journaled: cut short after any
// write, the repair finishes it and the old pair is back, whole.
TEST_F(CertsTest, ARestoreCutShortAfterAnyWriteIsFinishedByTheRepair) {
  const CertSpec& s = spec("apiserver");
  const std::string old_cert = pki_.read(host(s.cert_path));
  auto renewed = renewOne(*fs_, s, options_);
  ASSERT_TRUE(renewed) << renewed.error().message();
  ASSERT_NE(pki_.read(host(s.cert_path)), old_cert);
  int total = 0;
  {
    CutShortFs counting(*fs_, 1000);
    ASSERT_TRUE(restoreFromBackup(counting, s, renewed->backup_dir));
    total = counting.used();
  }
  ASSERT_GE(total, 3);  // the journal, the certificate, the key (and the journal's removal)
  ASSERT_EQ(pki_.read(host(s.cert_path)), old_cert);  // the restore put the old one back
  for (int k = 0; k < total; ++k) {
    SCOPED_TRACE("cut after write " + std::to_string(k));
    // The new pair in place again, as after the renewal.
    options_.now += 1s;
    auto again = renewOne(*fs_, s, options_);
    ASSERT_TRUE(again) << again.error().message();
    CutShortFs cut(*fs_, k);
    EXPECT_FALSE(restoreFromBackup(cut, s, again->backup_dir));
    auto repaired = repairInterruptedRenewals(*fs_, options_);
    ASSERT_TRUE(repaired) << repaired.error().message();
    // The old pair of that renewal (the PKI's, then each earlier renewal's), whole.
    const Inspection in = inspectCertificates(*fs_, options_);
    EXPECT_TRUE(state(in, "apiserver").problem.empty()) << state(in, "apiserver").problem;
    if (k > 0) {  // the journal was written: the repair finished the restore
      EXPECT_EQ(pki_.read(host(s.cert_path)),
                pki_.read(host(again->backup_dir + "/apiserver.crt")));
      EXPECT_EQ(pki_.read(host(s.key_path)), pki_.read(host(again->backup_dir + "/apiserver.key")));
    }
    auto left = findInterruptedRenewals(*fs_, options_);
    ASSERT_TRUE(left);
    EXPECT_TRUE(left->empty());
  }
}

TEST_F(CertsTest, KeepsTheLastFiveBackups) {
  for (int i = 0; i < 7; ++i) {
    options_.now += 1h;
    ASSERT_TRUE(renewOne(*fs_, spec("front-proxy-client"), options_));
  }
  int dirs = 0;
  for ([[maybe_unused]] const auto& d :
       fs::directory_iterator(host("/etc/kubernetes/pki/.ekco-backup"))) {
    ++dirs;
  }
  EXPECT_EQ(dirs, kKeptBackups);
}

}  // namespace
}  // namespace ekco::agent
