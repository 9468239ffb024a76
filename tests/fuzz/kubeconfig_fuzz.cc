// kubeconfig files (kube/transport/kubeconfig.h): loadKubeconfig reads /etc/kubernetes/admin.conf
// (or
// --kubeconfig, KUBECONFIG, kubelet.conf) and the files it names. The input is the kubeconfig;
// the files it may name (ca.crt, pki/ca.crt, pki/admin.crt, pki/admin.key, token, and kubelet's
// client certificate) exist in a real host root (LocalHostFs on a temporary directory), so a
// relative, absolute or escaping file name is resolved the way the agent resolves it.
//
// Checks: an error is one line that starts with "kubeconfig <path>: "; a loaded connection has
// an http(s) server without a trailing slash, never both insecure-skip-tls-verify and a CA, and
// a client certificate exactly when it has a key; its source (used in messages) is one line.
// And base64Decode (the -data fields) inverts a standard encoding of the input bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "kube/transport/kubeconfig.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using ekco::fuzz::check;

constexpr std::string_view kPath = "/etc/kubernetes/admin.conf";

// The host root: created once, removed at exit.
struct Root {
  std::string dir;
  ekco::base::SystemClock clock;
  std::unique_ptr<ekco::hostfs::LocalHostFs> fs;

  Root() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ekco-fuzz-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) ekco::fuzz::fail("mkdtemp failed");
    dir = tmpl;
    const std::pair<const char*, const char*> files[] = {
        {"etc/kubernetes/pki/ca.crt",
         "-----BEGIN CERTIFICATE-----\nfake CA\n-----END CERTIFICATE-----\n"},
        {"etc/kubernetes/ca.crt",
         "-----BEGIN CERTIFICATE-----\nfake CA\n-----END CERTIFICATE-----\n"},
        {"etc/kubernetes/pki/admin.crt",
         "-----BEGIN CERTIFICATE-----\nfake admin\n-----END CERTIFICATE-----\n"},
        {"etc/kubernetes/pki/admin.key",
         "-----BEGIN PRIVATE KEY-----\nfake key\n-----END PRIVATE KEY-----\n"},
        {"etc/kubernetes/token", "abc.def.ghi\n"},
        {"var/lib/kubelet/pki/kubelet-client-current.pem",
         "-----BEGIN CERTIFICATE-----\nkubelet\n-----END CERTIFICATE-----\n"
         "-----BEGIN PRIVATE KEY-----\nkubelet key\n-----END PRIVATE KEY-----\n"},
    };
    for (const auto& [name, content] : files) {
      const std::filesystem::path path = std::filesystem::path(dir) / name;
      std::filesystem::create_directories(path.parent_path());
      std::ofstream(path) << content;
    }
    auto opened = ekco::hostfs::LocalHostFs::open(dir, clock);
    if (!opened) ekco::fuzz::fail("LocalHostFs::open", opened.error().message());
    fs = std::move(*opened);
  }
  ~Root() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

// The host root, except that the kubeconfig itself is the input.
class InputFs final : public ekco::hostfs::HostFs {
 public:
  InputFs(ekco::hostfs::HostFs& host, std::string_view input) : host_(host), input_(input) {}

  std::string root() const override { return host_.root(); }
  std::string realPath(std::string_view path) const override { return host_.realPath(path); }
  ekco::base::Result<std::string> read(std::string_view path) const override {
    if (path == kPath) return std::string(input_);
    return host_.read(path);
  }
  ekco::base::Result<bool> exists(std::string_view path) const override {
    return path == kPath ? true : host_.exists(path);
  }
  ekco::base::Result<ekco::hostfs::FileInfo> stat(std::string_view path) const override {
    return host_.stat(path);
  }
  ekco::base::Result<ekco::hostfs::Changed> write(std::string_view path, std::string_view,
                                                  const ekco::hostfs::WriteOptions&) override {
    ekco::fuzz::fail("loadKubeconfig wrote a file", path);
  }
  ekco::base::Status remove(std::string_view path) override {
    ekco::fuzz::fail("loadKubeconfig removed a file", path);
  }
  ekco::base::Status makeDirs(std::string_view path, std::uint32_t) override {
    ekco::fuzz::fail("loadKubeconfig made a directory", path);
  }
  ekco::base::Result<std::vector<std::string>> list(std::string_view dir) const override {
    return host_.list(dir);
  }
  ekco::base::Result<std::size_t> sweepStaleTemps(std::string_view dir,
                                                  std::chrono::seconds) override {
    ekco::fuzz::fail("loadKubeconfig swept a directory", dir);
  }

 private:
  ekco::hostfs::HostFs& host_;
  std::string_view input_;
};

std::string base64Encode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16U) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8U) |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(v >> shift) & 63U];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16U;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8U;
    out += kAlphabet[(v >> 18U) & 63U];
    out += kAlphabet[(v >> 12U) & 63U];
    out += rest == 2 ? kAlphabet[(v >> 6U) & 63U] : '=';
    out += '=';
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Root root;
  const std::string_view input = ekco::fuzz::asText(data, size);

  auto decoded = ekco::kube::base64Decode(base64Encode(input));
  check(decoded.has_value() && *decoded == input, "base64Decode does not invert the encoding",
        input);

  InputFs fs(*root.fs, input);
  for (const bool token_file_later : {true, false}) {
    auto conn = ekco::kube::loadKubeconfig(fs, kPath, {}, token_file_later);
    if (!conn) {
      const std::string& message = conn.error().message();
      ekco::fuzz::checkOneLine(message, "loadKubeconfig error");
      check(message.starts_with("kubeconfig /etc/kubernetes/admin.conf: "),
            "loadKubeconfig error does not name the file", message);
      continue;
    }
    check(conn->server.starts_with("https://") || conn->server.starts_with("http://"),
          "server is not an http(s) URL", conn->server);
    check(conn->server.size() <= 8 || conn->server.back() != '/', "server ends in '/'",
          conn->server);
    check(!(conn->insecure_skip_tls_verify && !conn->ca_pem.empty()),
          "both insecure-skip-tls-verify and a CA", input);
    check(conn->client_cert_pem.empty() == conn->client_key_pem.empty(),
          "a client certificate without a key, or a key without a certificate", input);
    check(token_file_later || conn->token_file.empty(), "token_file kept though not asked for",
          conn->token_file);
    ekco::fuzz::checkOneLine(conn->source, "connection source");
  }
  return 0;
}
