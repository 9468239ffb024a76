// kube::chooseSystemTrust, the system CA bundle of transfers without a CA of their own: the
// decision over an injected probe (each family's location, the order, SSL_CERT_FILE set, unset,
// empty and unusable, nothing found), and the real probe over each family's layout in a
// temporary root.
#include "kube/transport/system_trust.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "tests/kube/temp_root.h"

namespace ekco::kube {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempRoot;

constexpr const char* kPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

// A probe over a set of usable paths that records what it was asked.
struct FakeProbe {
  std::set<std::string> usable;
  std::vector<std::string> asked{};

  BundleProbe probe() {
    return [this](const std::string& path) -> std::string {
      asked.push_back(path);
      return usable.count(path) != 0 ? "" : "read " + path + ": No such file or directory";
    };
  }
};

TEST(SystemTrust, EachFamilysBundleIsFoundWhereItKeepsIt) {
  struct Case {
    std::string path;
    std::string family;
  };
  const Case cases[] = {
      {"/etc/ssl/certs/ca-certificates.crt", "Debian/Ubuntu"},
      {"/etc/pki/tls/certs/ca-bundle.crt", "RHEL family"},
      {"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "RHEL family"},
      {"/etc/ssl/ca-bundle.pem", "SUSE"},
      {"/etc/ssl/cert.pem", "Alpine and others"},
  };
  for (const Case& c : cases) {
    FakeProbe fake{.usable = {c.path}};
    EXPECT_EQ(chooseSystemTrust({}, fake.probe()),
              (SystemTrust{.ca_file = c.path, .source = c.family}))
        << c.path;
  }
}

TEST(SystemTrust, TheFirstUsableLocationWinsAndNothingAfterItIsRead) {
  FakeProbe all;
  for (const CaBundleLocation& l : kWellKnownCaBundles) all.usable.insert(std::string(l.path));
  EXPECT_EQ(chooseSystemTrust({}, all.probe()).ca_file, "/etc/ssl/certs/ca-certificates.crt");
  EXPECT_THAT(all.asked, ElementsAre("/etc/ssl/certs/ca-certificates.crt"));

  // A RHEL host: both of its names, the older one (the symlink) first.
  FakeProbe rhel{.usable = {"/etc/pki/tls/certs/ca-bundle.crt",
                            "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"}};
  EXPECT_EQ(chooseSystemTrust({}, rhel.probe()).ca_file, "/etc/pki/tls/certs/ca-bundle.crt");
  EXPECT_THAT(rhel.asked, ElementsAre("/etc/ssl/certs/ca-certificates.crt",
                                      "/etc/pki/tls/certs/ca-bundle.crt"));

  FakeProbe last{.usable = {"/etc/ssl/cert.pem"}};
  EXPECT_EQ(chooseSystemTrust({}, last.probe()).ca_file, "/etc/ssl/cert.pem");
  EXPECT_THAT(last.asked,
              ElementsAre("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
                          "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
                          "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem"));
}

TEST(SystemTrust, SslCertFileWinsOverEveryLocation) {
  FakeProbe fake{.usable = {"/opt/corp/ca.pem", "/etc/ssl/certs/ca-certificates.crt"}};
  EXPECT_EQ(chooseSystemTrust({{"SSL_CERT_FILE", "/opt/corp/ca.pem"}}, fake.probe()),
            (SystemTrust{.ca_file = "/opt/corp/ca.pem", .source = "SSL_CERT_FILE"}));
  EXPECT_THAT(fake.asked, ElementsAre("/opt/corp/ca.pem"));
}

// An operator who set SSL_CERT_FILE expects it to be used: an unusable one is still the choice
// (transfers then fail naming it), never silently replaced by a bundle found elsewhere.
TEST(SystemTrust, AnUnusableSslCertFileIsStillTheChoiceAndSaysWhy) {
  FakeProbe fake{.usable = {"/etc/ssl/certs/ca-certificates.crt"}};
  const SystemTrust trust =
      chooseSystemTrust({{"SSL_CERT_FILE", "/opt/corp/typo.pem"}}, fake.probe());
  EXPECT_EQ(trust.ca_file, "/opt/corp/typo.pem");
  EXPECT_EQ(trust.source, "SSL_CERT_FILE");
  EXPECT_EQ(trust.problem,
            "SSL_CERT_FILE is not usable: read /opt/corp/typo.pem: No such file or directory; "
            "ekco tries no other bundle: fix or unset it");
  EXPECT_THAT(fake.asked, ElementsAre("/opt/corp/typo.pem"));
}

TEST(SystemTrust, AnEmptySslCertFileIsUnset) {
  FakeProbe fake{.usable = {"/etc/ssl/ca-bundle.pem"}};
  EXPECT_EQ(chooseSystemTrust({{"SSL_CERT_FILE", ""}}, fake.probe()),
            (SystemTrust{.ca_file = "/etc/ssl/ca-bundle.pem", .source = "SUSE"}));
}

TEST(SystemTrust, NothingFoundIsNotAnErrorAndSaysWhereEkcoLooked) {
  FakeProbe none;
  const SystemTrust trust = chooseSystemTrust({{"KUBECONFIG", "/x"}}, none.probe());
  EXPECT_EQ(trust.ca_file, "");
  EXPECT_EQ(trust.source, "");
  EXPECT_EQ(trust.problem,
            "no CA bundle found: SSL_CERT_FILE is not set and none of "
            "/etc/ssl/certs/ca-certificates.crt, /etc/pki/tls/certs/ca-bundle.crt, "
            "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem, /etc/ssl/ca-bundle.pem, "
            "/etc/ssl/cert.pem is usable; set SSL_CERT_FILE to the host's bundle");
  EXPECT_EQ(none.asked.size(), kWellKnownCaBundles.size());
}

TEST(SystemTrust, DescribedInOnePhrase) {
  EXPECT_EQ(
      describeSystemTrust({.ca_file = "/etc/pki/tls/certs/ca-bundle.crt", .source = "RHEL family"}),
      "/etc/pki/tls/certs/ca-bundle.crt (RHEL family)");
  EXPECT_EQ(describeSystemTrust(
                {.ca_file = "/x", .source = "SSL_CERT_FILE", .problem = "SSL_CERT_FILE is bad"}),
            "/x (SSL_CERT_FILE; SSL_CERT_FILE is bad)");
  EXPECT_EQ(describeSystemTrust({.problem = "no CA bundle found: ..."}),
            "none (no CA bundle found: ...)");
}

// The real probe, over each family's layout as its package lays it out (symlinks included),
// in a temporary root.
TEST(SystemTrustProbe, FindsEachFamilysRealLayout) {
  namespace fs = std::filesystem;
  {
    TempRoot debian;
    debian.write("/usr/share/ca-certificates/mozilla/A.crt", kPem);
    debian.write("/etc/ssl/certs/ca-certificates.crt", kPem);
    fs::create_symlink("/usr/share/ca-certificates/mozilla/A.crt",
                       debian.dir() + "/etc/ssl/certs/A.pem");
    EXPECT_EQ(
        chooseSystemTrust({}, bundleProbe(debian.fs())),
        (SystemTrust{.ca_file = "/etc/ssl/certs/ca-certificates.crt", .source = "Debian/Ubuntu"}));
  }
  {
    // RHEL 8/9 (and Rocky, Alma, Oracle, Amazon Linux): /etc/ssl/certs is a symlink to
    // /etc/pki/tls/certs, where ca-bundle.crt links to update-ca-trust's extracted bundle.
    TempRoot rhel;
    rhel.write("/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", kPem);
    fs::create_directories(rhel.dir() + "/etc/pki/tls/certs");
    fs::create_symlink("/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
                       rhel.dir() + "/etc/pki/tls/certs/ca-bundle.crt");
    fs::create_directories(rhel.dir() + "/etc/ssl");
    fs::create_symlink("../pki/tls/certs", rhel.dir() + "/etc/ssl/certs");
    EXPECT_EQ(
        chooseSystemTrust({}, bundleProbe(rhel.fs())),
        (SystemTrust{.ca_file = "/etc/pki/tls/certs/ca-bundle.crt", .source = "RHEL family"}));
    // Without the compatibility link the extracted bundle itself is found.
    fs::remove(rhel.dir() + "/etc/pki/tls/certs/ca-bundle.crt");
    EXPECT_EQ(chooseSystemTrust({}, bundleProbe(rhel.fs())).ca_file,
              "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem");
  }
  {
    TempRoot suse;
    suse.write("/var/lib/ca-certificates/ca-bundle.pem", kPem);
    fs::create_directories(suse.dir() + "/etc/ssl/certs");
    fs::create_symlink("/var/lib/ca-certificates/ca-bundle.pem",
                       suse.dir() + "/etc/ssl/ca-bundle.pem");
    EXPECT_EQ(chooseSystemTrust({}, bundleProbe(suse.fs())),
              (SystemTrust{.ca_file = "/etc/ssl/ca-bundle.pem", .source = "SUSE"}));
  }
  {
    TempRoot alpine;
    alpine.write("/etc/ssl/cert.pem", kPem);
    EXPECT_EQ(chooseSystemTrust({}, bundleProbe(alpine.fs())),
              (SystemTrust{.ca_file = "/etc/ssl/cert.pem", .source = "Alpine and others"}));
  }
}

// A bundle left empty or truncated by a half-done package operation, a directory or a dangling
// link is passed over for the next location.
TEST(SystemTrustProbe, PassesOverWhatHoldsNoCertificate) {
  namespace fs = std::filesystem;
  TempRoot root;
  const BundleProbe probe = bundleProbe(root.fs());
  root.write("/empty.pem", "");
  root.write("/key.pem", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");
  root.write("/trusted.pem",
             "# RHEL's OpenSSL-trust form\n-----BEGIN TRUSTED CERTIFICATE-----\nMIIB\n"
             "-----END TRUSTED CERTIFICATE-----\n");
  root.write("/dir/x", kPem);
  fs::create_symlink("/nowhere.pem", root.dir() + "/dangling.pem");
  EXPECT_EQ(probe("/empty.pem"), "/empty.pem holds no PEM certificate");
  EXPECT_EQ(probe("/key.pem"), "/key.pem holds no PEM certificate");
  EXPECT_EQ(probe("/trusted.pem"), "");
  EXPECT_THAT(probe("/dir"), HasSubstr("read /dir: "));
  EXPECT_THAT(probe("/dangling.pem"), HasSubstr("read /dangling.pem: "));
  EXPECT_THAT(probe("/missing.pem"), HasSubstr("read /missing.pem: "));

  // Debian's file emptied, SUSE's fine: SUSE's is chosen.
  root.write("/etc/ssl/certs/ca-certificates.crt", "");
  root.write("/etc/ssl/ca-bundle.pem", kPem);
  EXPECT_EQ(chooseSystemTrust({}, probe).ca_file, "/etc/ssl/ca-bundle.pem");
  // An SSL_CERT_FILE that holds no certificate is still the choice, with the reason.
  const SystemTrust chosen = chooseSystemTrust({{"SSL_CERT_FILE", "/key.pem"}}, probe);
  EXPECT_EQ(chosen.ca_file, "/key.pem");
  EXPECT_THAT(chosen.problem, HasSubstr("/key.pem holds no PEM certificate"));
}

}  // namespace
}  // namespace ekco::kube
