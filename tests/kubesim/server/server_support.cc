// Helpers of ekco-kubesim's server: query strings and paths, discovery documents, watch
// filtering, client identities.
#include <cctype>

#include "tests/kubesim/server/server_impl.h"
#include "tests/kubesim/store/list_options.h"

namespace ekco::kubesim::server_detail {

std::string percentDecode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%') {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      int hi = i + 1 < s.size() ? hex(s[i + 1]) : -1;
      int lo = i + 2 < s.size() ? hex(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        out += s[i];
        continue;
      }
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

Query parseQuery(std::string_view q) {
  Query out;
  while (!q.empty()) {
    auto amp = q.find('&');
    std::string_view part = q.substr(0, amp);
    auto eq = part.find('=');
    if (!part.empty()) {
      out.emplace_back(percentDecode(part.substr(0, eq)),
                       eq == std::string_view::npos ? "" : percentDecode(part.substr(eq + 1)));
    }
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return out;
}

std::string queryValue(const Query& q, std::string_view key, std::string fallback) {
  for (const auto& [k, v] : q) {
    if (k == key) return v;
  }
  return fallback;
}

// List options with just the label and field selectors of the query: a whole, unpaged list.
ListOptions selectorsOnly(const Query& q) {
  ListOptions options;
  options.label_selector = queryValue(q, "labelSelector");
  options.field_selector = queryValue(q, "fieldSelector");
  return options;
}

bool queryFlag(const Query& q, std::string_view key) {
  return parseGoBool(queryValue(q, key)).value_or(false);
}

std::vector<std::string> splitPath(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    auto slash = path.find('/');
    if (slash != 0) out.emplace_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

std::optional<std::int64_t> toInt(const std::string& s) {
  if (s.empty()) return std::nullopt;
  try {
    std::size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used != s.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

base::Status writeFileAtomic(const std::filesystem::path& path, const std::string& data) {
  std::filesystem::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << data;
    if (!out.flush()) return base::Error("write " + tmp.string(), base::ErrorCode::kIo);
  }
  std::filesystem::permissions(
      tmp, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return base::Error("rename " + path.string() + ": " + ec.message(), base::ErrorCode::kIo);
  return base::ok();
}

json resourceList(const std::vector<ResourceInfo>& all, const std::string& group,
                  const std::string& version) {
  json resources = json::array();
  const json all_verbs = {"create", "delete", "deletecollection", "get",
                          "list",   "patch",  "update",           "watch"};
  for (const ResourceInfo& r : all) {
    if (r.group != group || r.version != version) continue;
    json entry = {{"name", r.plural},
                  {"singularName", r.singular},
                  {"namespaced", r.namespaced},
                  {"kind", r.kind},
                  {"verbs", r.verbs.empty() ? all_verbs : json(r.verbs)}};
    if (!r.short_names.empty()) entry["shortNames"] = r.short_names;
    resources.push_back(entry);
    for (const std::string& sub : r.subresources) {
      json s = {{"name", r.plural + "/" + sub}, {"singularName", ""}, {"namespaced", r.namespaced}};
      if (sub == "status") {
        s["kind"] = r.kind;
        s["verbs"] = {"get", "patch", "update"};
      } else if (sub == "scale") {
        s["group"] = "autoscaling";
        s["version"] = "v1";
        s["kind"] = "Scale";
        s["verbs"] = {"get", "patch", "update"};
      } else if (sub == "eviction") {
        s["group"] = "policy";
        s["version"] = "v1";
        s["kind"] = "Eviction";
        s["verbs"] = {"create"};
      } else if (sub == "exec") {
        s["kind"] = "PodExecOptions";
        s["verbs"] = {"create", "get"};
      } else {
        // "approval" (CertificateSigningRequests) and the like: the object's own kind, as the
        // real discovery lists them (clients such as Python's dynamic client need a kind).
        s["kind"] = r.kind;
        s["verbs"] = {"get", "patch", "update"};
      }
      resources.push_back(s);
    }
  }
  return {{"kind", "APIResourceList"},
          {"apiVersion", "v1"},
          {"groupVersion", group.empty() ? version : group + "/" + version},
          {"resources", resources}};
}

json groupVersions(const std::vector<ResourceInfo>& all, const std::string& group) {
  json versions = json::array();
  std::vector<std::string> seen;
  for (const ResourceInfo& r : all) {
    if (r.group != group || std::find(seen.begin(), seen.end(), r.version) != seen.end()) continue;
    seen.push_back(r.version);
    versions.push_back({{"groupVersion", group + "/" + r.version}, {"version", r.version}});
  }
  return versions;
}

json apiGroup(const std::vector<ResourceInfo>& all, const std::string& group) {
  json versions = groupVersions(all, group);
  return {{"kind", "APIGroup"},
          {"apiVersion", "v1"},
          {"name", group},
          {"versions", versions},
          {"preferredVersion", versions.empty() ? json::object() : versions[0]}};
}

// Whether a watch event passes the watch's selectors, and as which type: an object that starts
// or stops matching is ADDED or DELETED for this watcher, as the API server's filtered watch.
std::optional<std::string> filteredType(const WatchEvent& e, const std::string& ns,
                                        const LabelSelector& labels, const FieldSelector& fields) {
  auto matches = [&](const json& obj) {
    if (!obj.is_object()) return false;
    const json& meta = obj.value("metadata", json::object());
    if (!ns.empty() && meta.value("namespace", "") != ns) return false;
    return labels.matches(meta.value("labels", json())) && fields.matches(obj);
  };
  bool now = matches(e.object);
  bool before = matches(e.old);
  if (e.type == "ADDED") return now ? std::optional<std::string>("ADDED") : std::nullopt;
  if (e.type == "DELETED") return now ? std::optional<std::string>("DELETED") : std::nullopt;
  if (now && before) return "MODIFIED";
  if (now) return "ADDED";
  if (before) return "DELETED";
  return std::nullopt;
}

json goneEvent(std::uint64_t requested, std::uint64_t oldest) {
  return {{"type", "ERROR"},
          {"object",
           {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"metadata", json::object()},
            {"status", "Failure"},
            {"message", "too old resource version: " + std::to_string(requested) + " (" +
                            std::to_string(oldest) + ")"},
            {"reason", "Expired"},
            {"code", 410}}}};
}

// The identity of a TLS client certificate (verified against the CA): CN is the user name, each
// O a group, as kube-apiserver's x509 authenticator.
std::optional<UserInfo> certificateUser(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return std::nullopt;
  UserInfo user;
  X509_NAME* subject = X509_get_subject_name(cert);
  auto entries = [&](int nid, auto&& each) {
    for (int i = X509_NAME_get_index_by_NID(subject, nid, -1); i >= 0;
         i = X509_NAME_get_index_by_NID(subject, nid, i)) {
      ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
      unsigned char* utf8 = nullptr;
      int len = ASN1_STRING_to_UTF8(&utf8, data);
      if (len >= 0) each(std::string(reinterpret_cast<char*>(utf8), static_cast<std::size_t>(len)));
      OPENSSL_free(utf8);
    }
  };
  entries(NID_commonName, [&](std::string v) { user.name = std::move(v); });
  entries(NID_organizationName, [&](std::string v) { user.groups.push_back(std::move(v)); });
  user.groups.push_back("system:authenticated");
  X509_free(cert);
  return user;
}

// The bearer token of an Authorization header ("Bearer TOKEN", scheme case-insensitive), or "".
std::string bearerToken(std::string_view header) {
  while (!header.empty() && (header.front() == ' ' || header.front() == '\t')) {
    header.remove_prefix(1);
  }
  while (!header.empty() && (header.back() == ' ' || header.back() == '\t'))
    header.remove_suffix(1);
  auto space = header.find(' ');
  if (space == std::string_view::npos || space != 6) return {};
  std::string scheme(header.substr(0, space));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "bearer") return {};
  std::string_view token = header.substr(space + 1);
  if (token.find(' ') != std::string_view::npos) token = token.substr(0, token.find(' '));
  return std::string(token);
}

ImpersonationHeaders impersonationHeaders(const Request& req) {
  constexpr std::string_view kExtraPrefix = "impersonate-extra-";
  ImpersonationHeaders out;
  for (const auto& field : req) {
    std::string name(field.name_string().data(), field.name_string().size());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string value(field.value().data(), field.value().size());
    if (name == "impersonate-user") {
      if (out.user.empty()) out.user = value;  // headers.Get: the first
    } else if (name == "impersonate-group") {
      out.groups.push_back(value);
    } else if (name == "impersonate-uid") {
      if (out.uid.empty()) out.uid = value;
    } else if (name.size() > kExtraPrefix.size() && name.starts_with(kExtraPrefix)) {
      out.extras.emplace_back(percentDecode(std::string_view(name).substr(kExtraPrefix.size())),
                              value);
    }
  }
  return out;
}

// Splits ".../namespaces/NS/RES/NAME/SUB" or ".../RES/NAME/SUB" (segments after the version).
std::optional<ParsedRoute> parseResourcePath(std::vector<std::string> rest) {
  ParsedRoute route;
  if (rest.empty()) return std::nullopt;
  if (rest[0] == "namespaces" && rest.size() >= 3 &&
      !(rest.size() == 3 && (rest[2] == "status" || rest[2] == "finalize"))) {
    route.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  if (rest.size() > 3) return std::nullopt;
  route.resource = rest[0];
  if (rest.size() > 1) route.name = rest[1];
  if (rest.size() > 2) route.sub = rest[2];
  return route;
}

}  // namespace ekco::kubesim::server_detail
