#include "kube/transport/kubeconfig.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "base/strings.h"
#include "kube/transport/token_source.h"

namespace ekco::kube {

using base::Error;
using base::ErrorCode;
using base::quoteForMessage;
using base::Result;

namespace {

// One kubeconfig being read: its path for messages and for resolving relative file names.
class Reader {
 public:
  Reader(const hostfs::HostFs& fs, std::string path, bool token_file_later)
      : fs_(fs), path_(std::move(path)), token_file_later_(token_file_later) {}

  Result<Connection> load(std::string_view context_override) {
    auto text = fs_.read(path_);
    if (!text) return fail(text.error().message(), text.error().code());
    try {
      return parse(YAML::Load(*text), context_override);
    } catch (const YAML::Exception& e) {
      // yaml-cpp's message carries line and column, and may quote the offending byte raw.
      return fail("malformed YAML: " + base::escapeForMessage(e.what()), ErrorCode::kParse);
    }
  }

 private:
  Error fail(std::string_view what, ErrorCode code) const {
    return Error("kubeconfig " + path_ + ": " + std::string(what), code);
  }

  // The entry of a named list ("clusters", "contexts", "users") whose name is `name`, or an
  // undefined node.
  static YAML::Node findNamed(const YAML::Node& root, const char* list, const std::string& name,
                              const char* inner) {
    const YAML::Node entries = root[list];
    if (!entries || !entries.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
    for (const auto& entry : entries) {
      if (entry.IsMap() && entry["name"] && entry["name"].IsScalar() &&
          entry["name"].as<std::string>() == name) {
        const YAML::Node body = entry[inner];
        return body ? body : YAML::Node(YAML::NodeType::Map);
      }
    }
    return YAML::Node(YAML::NodeType::Undefined);
  }

  static std::string scalar(const YAML::Node& map, const char* key) {
    const YAML::Node node = map[key];
    return node && node.IsScalar() ? node.as<std::string>() : std::string();
  }

  // A file named in the kubeconfig: relative names are relative to its directory. Normalised
  // lexically ("pki/../ca.crt"), because HostFs refuses ".." components; a name that climbs
  // above the root stays invalid and HostFs reports it.
  std::string resolve(const std::string& file) const {
    const std::filesystem::path name(file);
    const std::filesystem::path full =
        name.is_absolute() ? name : std::filesystem::path(path_).parent_path() / name;
    return full.lexically_normal().string();
  }

  // A file name with a control character names no file a kubeconfig means (and would carry the
  // character into messages): an error, before anything is read.
  Result<std::string> checkedFileName(const std::string& name, const std::string& where,
                                      const std::string& field) const {
    const bool control = std::any_of(name.begin(), name.end(), [](char ch) {
      const auto c = static_cast<unsigned char>(ch);
      return c < 0x20 || c == 0x7f;
    });
    if (control) {
      return fail(where + ": " + field + ": not a file name: " + quoteForMessage(name),
                  ErrorCode::kInvalidArgument);
    }
    return resolve(name);
  }

  // Inline "<field>-data" (base64) or file "<field>", not both. "" when neither is set.
  Result<std::string> pem(const YAML::Node& map, const std::string& where,
                          const std::string& field) const {
    const std::string data = scalar(map, (field + "-data").c_str());
    const std::string file = scalar(map, field.c_str());
    if (!data.empty() && !file.empty()) {
      return fail(where + ": both " + field + " and " + field + "-data are set",
                  ErrorCode::kInvalidArgument);
    }
    if (!data.empty()) {
      auto decoded = base64Decode(data);
      if (!decoded)
        return fail(where + ": " + field + "-data is not valid base64", ErrorCode::kParse);
      return *decoded;
    }
    if (!file.empty()) {
      auto path = checkedFileName(file, where, field);
      if (!path) return std::move(path).error();
      auto content = fs_.read(*path);
      if (!content) {
        return fail(where + ": " + field + ": " + content.error().message(),
                    content.error().code());
      }
      return *content;
    }
    return std::string();
  }

  Result<Connection> parse(const YAML::Node& root, std::string_view context_override) {
    if (!root.IsMap()) return fail("not a YAML mapping", ErrorCode::kParse);
    // (1) Context.
    std::string context_name(context_override);
    if (context_name.empty()) context_name = scalar(root, "current-context");
    if (context_name.empty()) return fail("current-context is not set", ErrorCode::kNotFound);
    const YAML::Node context = findNamed(root, "contexts", context_name, "context");
    if (!context) {
      return fail("context " + quoteForMessage(context_name) + " not found", ErrorCode::kNotFound);
    }
    const std::string cluster_name = scalar(context, "cluster");
    const std::string user_name = scalar(context, "user");
    // (2) Cluster.
    const YAML::Node cluster = findNamed(root, "clusters", cluster_name, "cluster");
    if (!cluster) {
      return fail("context " + quoteForMessage(context_name) + ": cluster " +
                      quoteForMessage(cluster_name) + " not found",
                  ErrorCode::kNotFound);
    }
    // Names and values from the file are quoted and escaped in messages (one line, whatever
    // the file holds).
    const std::string cluster_where = "cluster " + quoteForMessage(cluster_name);
    Connection conn;
    conn.server = scalar(cluster, "server");
    if (conn.server.rfind("https://", 0) != 0 && conn.server.rfind("http://", 0) != 0) {
      return fail(
          cluster_where + ": server " + quoteForMessage(conn.server) + " is not an http(s) URL",
          ErrorCode::kInvalidArgument);
    }
    while (conn.server.size() > 8 && conn.server.back() == '/') conn.server.pop_back();
    auto ca = pem(cluster, cluster_where, "certificate-authority");
    if (!ca) return std::move(ca).error();
    conn.ca_pem = std::move(*ca);
    if (const YAML::Node insecure = cluster["insecure-skip-tls-verify"]) {
      if (!YAML::convert<bool>::decode(insecure, conn.insecure_skip_tls_verify)) {
        return fail(cluster_where + ": insecure-skip-tls-verify is not a boolean",
                    ErrorCode::kParse);
      }
    }
    if (conn.insecure_skip_tls_verify && !conn.ca_pem.empty()) {
      // kubectl refuses this too: which one was meant is anyone's guess, and guessing
      // "insecure" would silently drop the verification the CA asks for.
      return fail(cluster_where +
                      ": certificate-authority and insecure-skip-tls-verify are both set; keep "
                      "one",
                  ErrorCode::kInvalidArgument);
    }
    conn.tls_server_name = scalar(cluster, "tls-server-name");
    if (!scalar(cluster, "proxy-url").empty()) {
      return fail(cluster_where + ": proxy-url is not supported", ErrorCode::kInvalidArgument);
    }
    // (3) User. A context without a user is allowed (anonymous, or the CA alone).
    if (!user_name.empty()) {
      const YAML::Node user = findNamed(root, "users", user_name, "user");
      if (!user) {
        return fail("context " + quoteForMessage(context_name) + ": user " +
                        quoteForMessage(user_name) + " not found",
                    ErrorCode::kNotFound);
      }
      const std::string user_where = "user " + quoteForMessage(user_name);
      for (const char* unsupported : {"exec", "auth-provider", "username", "password"}) {
        if (user[unsupported]) {
          return fail(user_where + ": " + unsupported + " is not supported",
                      ErrorCode::kInvalidArgument);
        }
      }
      auto cert = pem(user, user_where, "client-certificate");
      if (!cert) return std::move(cert).error();
      auto key = pem(user, user_where, "client-key");
      if (!key) return std::move(key).error();
      if (cert->empty() != key->empty()) {
        return fail(user_where + ": client-certificate and client-key must be set together",
                    ErrorCode::kInvalidArgument);
      }
      conn.client_cert_pem = std::move(*cert);
      conn.client_key_pem = std::move(*key);
      conn.token = scalar(user, "token");
      if (const std::string token_file = scalar(user, "tokenFile"); !token_file.empty()) {
        auto checked = checkedFileName(token_file, user_where, "tokenFile");
        if (!checked) return std::move(checked).error();
        const std::string resolved = std::move(*checked);
        auto token = readTokenFile(fs_, resolved);
        if (!token) {
          return fail(user_where + ": tokenFile: " + token.error().message(), token.error().code());
        }
        conn.token = std::move(*token);
        if (token_file_later_) conn.token_file = resolved;
      }
    }
    conn.source = "kubeconfig " + path_ + " (context " + base::escapeForMessage(context_name) + ")";
    return conn;
  }

  const hostfs::HostFs& fs_;
  std::string path_;
  bool token_file_later_;
};

bool isNotFound(const Result<bool>& exists) { return exists && !*exists; }

std::string absolute(std::string_view dir, std::string_view path) {
  if (!path.empty() && path.front() == '/') return std::string(path);
  std::string out(dir);
  if (out.empty() || out.back() != '/') out += '/';
  return out + std::string(path);
}

}  // namespace

std::optional<std::string> base64Decode(std::string_view text) {
  std::string out;
  unsigned int buffer = 0;
  int bits = 0;
  int padding = 0;
  std::size_t symbols = 0;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    if (padding > 0) return std::nullopt;  // data after padding
    int value;
    if (c >= 'A' && c <= 'Z')
      value = c - 'A';
    else if (c >= 'a' && c <= 'z')
      value = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      value = c - '0' + 52;
    else if (c == '+')
      value = 62;
    else if (c == '/')
      value = 63;
    else
      return std::nullopt;
    ++symbols;
    buffer = (buffer << 6) | static_cast<unsigned int>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  // 6 leftover bits cannot come from whole bytes; leftover bits must be zero; at most "==".
  if (bits >= 6 || (buffer & ((1u << bits) - 1)) != 0) return std::nullopt;
  // Padding, when present, completes the last group of four exactly.
  if (padding > 0 && (padding > 2 || (symbols + padding) % 4 != 0)) return std::nullopt;
  return out;
}

Environment processEnvironment() {
  Environment env;
  for (const char* name : {"KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  return env;
}

Result<Connection> loadKubeconfig(const hostfs::HostFs& fs, std::string_view path,
                                  std::string_view context, bool token_file_readable_later) {
  return Reader(fs, std::string(path), token_file_readable_later).load(context);
}

Result<Connection> loadInCluster(const hostfs::HostFs& fs, const Environment& env,
                                 std::string_view dir) {
  const auto host = env.find("KUBERNETES_SERVICE_HOST");
  const auto port = env.find("KUBERNETES_SERVICE_PORT");
  if (host == env.end() || host->second.empty() || port == env.end() || port->second.empty()) {
    return Error(
        "in-cluster service account: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must "
        "both be set",
        ErrorCode::kNotFound);
  }
  Connection conn;
  const bool ipv6 = host->second.find(':') != std::string::npos;
  conn.server = "https://" + (ipv6 ? "[" + host->second + "]" : host->second) + ":" + port->second;
  const std::string token_path = std::string(dir) + "/token";
  auto token = readTokenFile(fs, token_path);
  if (!token) return std::move(token).error().wrap("in-cluster service account: token");
  conn.token = std::move(*token);
  conn.token_file = token_path;
  auto ca = fs.read(std::string(dir) + "/ca.crt");
  if (!ca) return std::move(ca).error().wrap("in-cluster service account: CA");
  conn.ca_pem = std::move(*ca);
  conn.source = "in-cluster service account";
  return conn;
}

Result<Connection> loadNodeConnection(const hostfs::HostFs& host_fs, const Environment& env) {
  auto conn = loadKubeconfig(host_fs, kKubeletConf, {}, /*token_file_readable_later=*/false);
  if (!conn) return conn;
  const auto host = env.find("KUBERNETES_SERVICE_HOST");
  const auto port = env.find("KUBERNETES_SERVICE_PORT");
  if (host != env.end() && !host->second.empty() && port != env.end() && !port->second.empty()) {
    const bool ipv6 = host->second.find(':') != std::string::npos;
    conn->server =
        "https://" + (ipv6 ? "[" + host->second + "]" : host->second) + ":" + port->second;
    conn->source += ", server " + conn->server + " (in-cluster)";
  }
  return conn;
}

Result<Connection> loadConnection(const ConnectionSources& sources) {
  // (1)
  if (!sources.explicit_kubeconfig.empty()) {
    return loadKubeconfig(sources.process_fs,
                          absolute(sources.working_dir, sources.explicit_kubeconfig),
                          sources.context);
  }
  // (2)
  if (auto it = sources.env.find("KUBECONFIG"); it != sources.env.end()) {
    std::string_view list = it->second;
    while (!list.empty()) {
      const auto colon = list.find(':');
      const std::string_view first = list.substr(0, colon);
      if (!first.empty()) {
        return loadKubeconfig(sources.process_fs, absolute(sources.working_dir, first),
                              sources.context);
      }
      if (colon == std::string_view::npos) break;
      list.remove_prefix(colon + 1);
    }
  }
  // (3)
  if (sources.env.contains("KUBERNETES_SERVICE_HOST") &&
      sources.env.contains("KUBERNETES_SERVICE_PORT")) {
    return loadInCluster(sources.process_fs, sources.env);
  }
  // (4), (5)
  for (std::string_view path : {kAdminConf, kKubeletConf}) {
    auto exists = sources.host_fs.exists(path);
    if (isNotFound(exists)) continue;
    if (!exists) return std::move(exists).error().wrap("kubeconfig");
    auto conn = loadKubeconfig(sources.host_fs, path, sources.context,
                               /*token_file_readable_later=*/false);
    if (conn) conn->from_host_kubeconfig = true;
    return conn;
  }
  return Error(
      "no Kubernetes connection: no --kubeconfig, KUBECONFIG, in-cluster service account, " +
          std::string(kAdminConf) + " or " + std::string(kKubeletConf),
      ErrorCode::kNotFound);
}

}  // namespace ekco::kube
