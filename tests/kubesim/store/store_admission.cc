// The Store's admission and registry-strategy steps (defaults.h, validation.h) and the namespace
// lifecycle: the default namespaces, NamespaceLifecycle admission (404 for a missing namespace,
// 403 for a terminating one, immortal namespaces), namespace deletion (Terminating with the
// `kubernetes` finalizer) and the namespace controller that empties a terminating namespace and
// then removes it. Service cluster IPs and node ports are allocated here too.
#include <algorithm>
#include <random>
#include <set>

#include "tests/kubesim/admission/admission_webhooks.h"
#include "tests/kubesim/controllers/csr.h"
#include "tests/kubesim/rbac/request_user.h"
#include "tests/kubesim/store/store.h"
#include "tests/kubesim/store/store_support.h"
#include "tests/kubesim/validation/defaults.h"
#include "tests/kubesim/validation/validation.h"

namespace ekco::kubesim {

using nlohmann::json;
using store_detail::hasFinalizers;
using store_detail::str;

namespace {

constexpr std::uint32_t kServiceCidrBase = (10u << 24) | (96u << 16);  // 10.96.0.0/12
constexpr std::uint32_t kServiceCidrSize = 1u << 20;
constexpr const char* kServiceCidr = "10.96.0.0/12";

bool isCore(const ResourceInfo& r, const char* plural) {
  return r.group.empty() && r.plural == plural;
}

std::string ipText(std::uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." +
         std::to_string((ip >> 8) & 255) + "." + std::to_string(ip & 255);
}

std::optional<std::uint32_t> parseIp(const std::string& text) {
  std::uint32_t out = 0;
  int parts = 0;
  std::size_t pos = 0;
  while (parts < 4) {
    std::size_t end = text.find('.', pos);
    std::string part = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (part.empty() || part.size() > 3 ||
        part.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    int v = std::stoi(part);
    if (v > 255) return std::nullopt;
    out = out << 8 | static_cast<std::uint32_t>(v);
    ++parts;
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  if (parts != 4) return std::nullopt;
  return out;
}

json activeNamespace(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Namespace"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/metadata.name", name}}}}},
          {"spec", {{"finalizers", {"kubernetes"}}}},
          {"status", {{"phase", "Active"}}}};
}

}  // namespace

// Whether finalizers hold a terminating object: metadata.finalizers, and for a namespace its
// spec.finalizers too (ShouldDeleteNamespaceDuringUpdate).
bool Store::heldByFinalizers(const ResourceInfo& r, const json& object) {
  if (hasFinalizers(object)) return true;
  if (!isCore(r, "namespaces")) return false;
  const json& f = object.value("spec", json::object()).value("finalizers", json::array());
  return f.is_array() && !f.empty();
}

void Store::bootstrapNamespacesLocked() {
  auto r = resources_.find("/v1/namespaces");
  if (r == resources_.end()) return;
  for (const char* name : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    if (findLocked(r->second, "", name) != nullptr) continue;
    json ns = activeNamespace(name);
    ns["metadata"]["uid"] = newUid();
    ns["metadata"]["creationTimestamp"] = nowText();
    commitLocked(r->second, "ADDED", std::move(ns), json());
  }
}

void Store::ensureNamespaceLocked(const std::string& ns) {
  auto r = resources_.find("/v1/namespaces");
  if (ns.empty() || r == resources_.end() || findLocked(r->second, "", ns) != nullptr) return;
  json obj = activeNamespace(ns);
  obj["metadata"]["uid"] = newUid();
  obj["metadata"]["creationTimestamp"] = nowText();
  commitLocked(r->second, "ADDED", std::move(obj), json());
}

std::optional<Reply> Store::admitNamespaceLocked(const ResourceInfo& r, const std::string& ns,
                                                 const json& object) {
  if (!r.namespaced || ns.empty()) return std::nullopt;
  auto nr = resources_.find("/v1/namespaces");
  const json* namespace_obj = nr == resources_.end() ? nullptr : findLocked(nr->second, "", ns);
  if (namespace_obj == nullptr) {
    return statusReply(404, "NotFound", "namespaces \"" + ns + "\" not found", ns, &nr->second);
  }
  if (str(*namespace_obj, {"status", "phase"}) != "Terminating") return std::nullopt;
  std::string name = str(object, {"metadata", "name"});
  if (name.empty()) name = str(object, {"metadata", "generateName"});
  if (name.empty()) name = "Unknown";
  Reply reply = statusReply(403, "Forbidden",
                            r.qualified() + " \"" + name +
                                "\" is forbidden: unable to create new content in namespace " + ns +
                                " because it is being terminated",
                            name, &r);
  reply.body["details"]["causes"] = {{{"reason", "NamespaceTerminating"},
                                      {"message", "namespace " + ns + " is being terminated"},
                                      {"field", "metadata.namespace"}}};
  return reply;
}

std::optional<Reply> Store::admitCreateLocked(const ResourceInfo& r, json& object) {
  applyDefaults(r, object);
  if (webhooks::isConfiguration(r)) webhooks::applyConfigurationDefaults(object);
  if (isCore(r, "pods")) admitPod(object, true);
  prepareForCreate(r, object);
  if (csr::isCsr(r)) csr::prepareForCreate(object, currentUser());
  auto errors = validateCreate(r, object);
  if (csr::isCsr(r)) {
    for (FieldError& e : csr::validateCreate(object)) errors.push_back(std::move(e));
  }
  if (webhooks::isConfiguration(r)) {
    for (FieldError& e : webhooks::validateConfiguration(object)) errors.push_back(std::move(e));
  }
  if (!errors.empty()) {
    return invalidReply(r.group, r.kind, str(object, {"metadata", "name"}), errors);
  }
  return std::nullopt;
}

std::optional<Reply> Store::admitUpdateLocked(const ResourceInfo& r, json& next, const json& old) {
  applyDefaults(r, next);
  if (webhooks::isConfiguration(r)) webhooks::applyConfigurationDefaults(next);
  if (isCore(r, "pods")) admitPod(next, false);
  if (isCore(r, "namespaces")) {
    // Spec finalizers change only through namespaces/finalize; status only through its
    // subresource.
    json& spec = next["spec"];
    if (!spec.is_object()) spec = json::object();
    const json& old_spec = old.value("spec", json::object());
    if (old_spec.contains("finalizers")) {
      spec["finalizers"] = old_spec["finalizers"];
    } else {
      spec.erase("finalizers");
    }
  }
  if (isCore(r, "services")) {
    // patchAllocatedValues: what the allocator filled in stays when the body leaves it out.
    json& spec = next["spec"];
    const json& old_spec = old.value("spec", json::object());
    if (spec.is_object() && spec.value("type", "") == old_spec.value("type", "")) {
      for (const char* key : {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}) {
        if (!spec.contains(key) && old_spec.contains(key)) spec[key] = old_spec[key];
      }
      if (spec.value("clusterIP", "") != old_spec.value("clusterIP", "")) {
        return invalidReply("", "Service", str(old, {"metadata", "name"}),
                            {invalidValue("spec.clusterIPs[0]", spec.value("clusterIP", ""),
                                          "may not change once set")});
      }
    }
  }
  // The stored object as the API server would hold it: objects seeded verbatim (put, --load)
  // lack the defaults a real create gives, which must not read as spec changes.
  json base = old;
  applyDefaults(r, base);
  if (isCore(r, "pods")) admitPod(base, false);
  auto errors = validateUpdate(r, next, base);
  if (webhooks::isConfiguration(r)) {
    for (FieldError& e : webhooks::validateConfiguration(next)) errors.push_back(std::move(e));
  }
  if (!errors.empty()) {
    return invalidReply(r.group, r.kind, str(old, {"metadata", "name"}), errors);
  }
  if (bumpsGeneration(r, next, base)) {
    next["metadata"]["generation"] = old["metadata"].value("generation", std::int64_t{0}) + 1;
  }
  return std::nullopt;
}

std::optional<Reply> Store::allocateServiceLocked(json& svc) {
  json& spec = svc["spec"];
  const std::string type = spec.value("type", "ClusterIP");
  if (type == "ExternalName") return std::nullopt;
  std::set<std::uint32_t> used_ips;
  std::set<std::int64_t> used_ports;
  for (const auto& [key, other] : data_["/v1/services"].objects) {
    const json& os = other.value("spec", json::object());
    if (auto ip = parseIp(os.value("clusterIP", ""))) used_ips.insert(*ip);
    for (const json& p : os.value("ports", json::array())) {
      if (p.is_object() && p.contains("nodePort") && p["nodePort"].is_number_integer()) {
        used_ports.insert(p["nodePort"].get<std::int64_t>());
      }
    }
  }
  const std::string name = str(svc, {"metadata", "name"});
  std::string ip = spec.value("clusterIP", "");
  if (ip != "None") {
    if (ip.empty()) {
      // The dynamic band above the static one (the first 256 addresses), as the allocator
      // prefers; 10.96.0.1 is the kubernetes service's.
      std::uniform_int_distribution<std::uint32_t> pick(256, kServiceCidrSize - 2);
      std::uint32_t candidate = 0;
      do {
        candidate = kServiceCidrBase + pick(rng_);
      } while (used_ips.count(candidate) != 0);
      ip = ipText(candidate);
    } else {
      auto parsed = parseIp(ip);
      std::string detail;
      if (!parsed) {
        detail = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
      } else if (*parsed < kServiceCidrBase || *parsed >= kServiceCidrBase + kServiceCidrSize) {
        detail = "failed to allocate IP " + ip + ": the provided IP (" + ip +
                 ") is not in the valid range. The range of valid IPs is " + kServiceCidr;
      } else if (used_ips.count(*parsed) != 0) {
        detail = "failed to allocate IP " + ip + ": provided IP is already allocated";
      }
      if (!detail.empty()) {
        return invalidReply("", "Service", name,
                            {invalidValue("spec.clusterIPs", json::array({ip}), detail)});
      }
    }
  }
  spec["clusterIP"] = ip;
  spec["clusterIPs"] = json::array({ip});
  if (!spec.contains("ipFamilies")) spec["ipFamilies"] = json::array({"IPv4"});
  if (!spec.contains("ipFamilyPolicy")) spec["ipFamilyPolicy"] = "SingleStack";
  if (type == "NodePort" || type == "LoadBalancer") {
    std::uniform_int_distribution<std::int64_t> pick(30000, 32767);
    json& ports = spec["ports"];
    for (std::size_t i = 0; ports.is_array() && i < ports.size(); ++i) {
      json& p = ports[i];
      if (p.contains("nodePort") && p["nodePort"].is_number_integer()) {
        std::int64_t port = p["nodePort"].get<std::int64_t>();
        if (used_ports.count(port) != 0) {
          return invalidReply("", "Service", name,
                              {invalidValue("spec.ports[" + std::to_string(i) + "].nodePort", port,
                                            "provided port is already allocated")});
        }
        used_ports.insert(port);
        continue;
      }
      std::int64_t port = 0;
      do {
        port = pick(rng_);
      } while (used_ports.count(port) != 0);
      used_ports.insert(port);
      p["nodePort"] = port;
    }
  }
  return std::nullopt;
}

Reply Store::deleteNamespaceLocked(const ResourceInfo& r, const json& current_ref) {
  json current = current_ref;
  const std::string name = str(current, {"metadata", "name"});
  if (name == "default" || name == "kube-system" || name == "kube-public") {
    return statusReply(
        403, "Forbidden",
        "namespaces \"" + name + "\" is forbidden: this namespace may not be deleted", name, &r);
  }
  if (current["metadata"].contains("deletionTimestamp")) return Reply{.code = 200, .body = current};
  json old = current;
  current["metadata"]["deletionTimestamp"] = nowText();
  current["metadata"]["deletionGracePeriodSeconds"] = 0;
  current["status"]["phase"] = "Terminating";
  if (!heldByFinalizers(r, current)) {
    return Reply{.code = 200,
                 .body = commitLocked(r, "DELETED", std::move(current), std::move(old))};
  }
  return Reply{.code = 200,
               .body = commitLocked(r, "MODIFIED", std::move(current), std::move(old))};
}

void Store::namespaceControllerPass() {
  std::lock_guard lock(mu_);
  auto nr = resources_.find("/v1/namespaces");
  if (nr == resources_.end()) return;
  const ResourceInfo namespaces = nr->second;
  std::vector<json> terminating;
  for (const auto& [key, ns] : data_["/v1/namespaces"].objects) {
    if (str(ns, {"status", "phase"}) != "Terminating") continue;
    const json& f = ns.value("spec", json::object()).value("finalizers", json::array());
    if (std::find(f.begin(), f.end(), json("kubernetes")) != f.end()) terminating.push_back(ns);
  }
  for (json& ns : terminating) {
    const std::string name = str(ns, {"metadata", "name"});
    const std::string prefix = name + "/";
    bool remaining = false;
    for (const auto& [rkey, info] : resources_) {
      if (!info.namespaced) continue;
      auto d = data_.find(rkey);
      if (d == data_.end()) continue;
      std::vector<json> contents;
      for (auto it = d->second.objects.lower_bound(prefix);
           it != d->second.objects.end() && it->first.compare(0, prefix.size(), prefix) == 0;
           ++it) {
        contents.push_back(it->second);
      }
      for (const json& obj : contents) {
        if (!obj["metadata"].contains("deletionTimestamp")) {
          (void)deleteLocked(info, obj, DeleteOptions{});
        }
      }
      auto again = d->second.objects.lower_bound(prefix);
      if (again != d->second.objects.end() && again->first.compare(0, prefix.size(), prefix) == 0) {
        remaining = true;
      }
    }
    if (remaining) continue;
    // Empty: the controller finalizes the namespace (namespaces/finalize), which removes it
    // unless metadata.finalizers still hold it.
    json old = ns;
    json& f = ns["spec"]["finalizers"];
    f.erase(std::remove(f.begin(), f.end(), json("kubernetes")), f.end());
    if (f.empty()) ns["spec"].erase("finalizers");
    json stored = commitLocked(namespaces, "MODIFIED", std::move(ns), std::move(old));
    if (!heldByFinalizers(namespaces, stored)) finishDeletionLocked(namespaces, stored);
  }
}

}  // namespace ekco::kubesim
