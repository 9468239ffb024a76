// The system trust store: which CA bundle file verifies a server when ekco has no CA of its own
// for it (kURL's installer for `ekco upgrade`, a kubeconfig without certificate-authority).
//
// Why ekco chooses. The packaged binary carries Debian's libcurl, whose built-in defaults are
// Debian's: CA file /etc/ssl/certs/ca-certificates.crt, CA directory /etc/ssl/certs. On RHEL,
// Rocky, Alma, Oracle, Amazon Linux and SUSE that file does not exist, so every transfer without
// an explicit CA would fail. libcurl reads no environment variable for this (Debian 12's 7.88
// ignores SSL_CERT_FILE and SSL_CERT_DIR), so SSL_CERT_FILE is honoured here.
//
// The rule (chooseSystemTrust), first match wins:
//   (1) SSL_CERT_FILE, when set and not empty: that file in place of the well-known ones, as
//       OpenSSL's and Go's SSL_CERT_FILE replaces their default file. An operator who set it
//       means it; if it cannot be read the choice stands and `problem` says why (transfers
//       without an explicit CA then fail naming it) rather than ekco quietly trusting another
//       bundle.
//   (2) the first usable file of kWellKnownCaBundles, the locations Go's crypto/x509 searches on
//       Linux (less OpenELEC's), each kept there by one distribution family.
//   (3) none: ca_file is empty, `problem` lists what was searched, and libcurl keeps its
//       built-in defaults (transfers without an explicit CA fail; everything else works).
// "Usable" is the probe's answer: the real one (bundleProbe) reads the file and wants at least
// one PEM certificate in it, so an empty bundle left by a half-done package operation is passed
// over for the next location. The chosen file is all that is trusted: no CA directory is
// (kube/transport/curl_transport.cc, useSystemTrust, says why).
//
// Explicit CAs (a kubeconfig's certificate-authority(-data), the in-cluster CA, etcd's CA,
// UrlFetchRequest::ca_pem) are not affected by any of this.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "hostfs/host_fs.h"
#include "kube/transport/kubeconfig.h"

namespace ekco::kube {

struct CaBundleLocation {
  std::string_view path;
  std::string_view family;  // who keeps a bundle there, for the log and `ekco status`
};

// Searched in this order; a host normally has the files of one family only. RHEL family means
// RHEL, CentOS, Rocky, Alma, Oracle Linux, Fedora and Amazon Linux: update-ca-trust writes
// tls-ca-bundle.pem and ca-bundle.crt is a symlink to it (since RHEL 7); the older name comes
// first, as in Go's list, and the extracted file is still found where the link is missing.
// SUSE is SLES and openSUSE (update-ca-certificates links /etc/ssl/ca-bundle.pem to
// /var/lib/ca-certificates/ca-bundle.pem). /etc/ssl/cert.pem is Alpine's (and LibreSSL's).
inline constexpr std::array<CaBundleLocation, 5> kWellKnownCaBundles = {{
    {"/etc/ssl/certs/ca-certificates.crt", "Debian/Ubuntu"},
    {"/etc/pki/tls/certs/ca-bundle.crt", "RHEL family"},
    {"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "RHEL family"},
    {"/etc/ssl/ca-bundle.pem", "SUSE"},
    {"/etc/ssl/cert.pem", "Alpine and others"},
}};

inline constexpr std::string_view kSslCertFile = "SSL_CERT_FILE";

struct SystemTrust {
  // The PEM bundle that transfers without an explicit CA trust; "" when none was found.
  std::string ca_file{};
  // "SSL_CERT_FILE", or the family of the well-known location ca_file is ("RHEL family");
  // "" when none was found.
  std::string source{};
  // "" when ca_file is a usable bundle. Otherwise one line for the log and `ekco status`:
  // why SSL_CERT_FILE's file is not usable, or that no bundle was found and where ekco looked.
  std::string problem{};

  bool operator==(const SystemTrust&) const = default;
};

// "" when the file at `path` is a usable CA bundle, otherwise why not ("read /x: No such file
// or directory", "/x holds no PEM certificate").
using BundleProbe = std::function<std::string(const std::string& path)>;

// The rule above over an injected environment (only SSL_CERT_FILE is read) and probe. Pure.
SystemTrust chooseSystemTrust(const Environment& env, const BundleProbe& usable);

// The real probe: reads `path` through `fs` (this process's own filesystem, "/": libcurl opens
// the file in this process's mount namespace, which in the DaemonSet pod is the image's, not the
// host's) and wants a PEM certificate in it. `fs` must outlive the probe.
BundleProbe bundleProbe(const hostfs::HostFs& fs);

// The choice for this process: chooseSystemTrust over the process's SSL_CERT_FILE and its own
// filesystem, made once on first use (thread-safe) and kept for the process's life, so every
// transfer, the log line and `ekco status` agree. The CA transports use it unless told
// otherwise (CurlTransportOptions::system_trust, UrlFetchRequest::system_trust).
const SystemTrust& processSystemTrust();

// One phrase for messages: "/etc/pki/tls/certs/ca-bundle.crt (RHEL family)",
// "/x (SSL_CERT_FILE; SSL_CERT_FILE is not usable: read /x: No such file or directory; ...)", or
// "none (<problem>)".
std::string describeSystemTrust(const SystemTrust& trust);

}  // namespace ekco::kube
