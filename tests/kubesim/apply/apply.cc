// The fieldmanager's two operations over managedFields entries: Update (every non-apply write)
// and Apply (PATCH application/apply-patch+yaml), after k8s.io/apiserver's fieldmanager and
// structured-merge-diff's merge.Updater.
#include <algorithm>
#include <tuple>

#include "tests/kubesim/apply/managed_fields.h"

namespace ekco::kubesim::managed {

using nlohmann::json;

namespace {

struct Entry {
  std::string manager{};
  std::string operation{};
  std::string api_version{};
  std::string time{};
  std::string subresource{};
  FieldSet set{};
};

std::vector<Entry> decode(const json& managed) {
  std::vector<Entry> out;
  if (!managed.is_array()) return out;
  for (const json& e : managed) {
    if (!e.is_object()) continue;
    out.push_back(Entry{.manager = e.value("manager", ""),
                        .operation = e.value("operation", ""),
                        .api_version = e.value("apiVersion", ""),
                        .time = e.value("time", ""),
                        .subresource = e.value("subresource", ""),
                        .set = FieldSet::fromFieldsV1(e.value("fieldsV1", json::object()))});
  }
  return out;
}

json encode(std::vector<Entry> entries) {
  // sortEncodedManagedFields: operation (Apply before Update), time, manager, apiVersion,
  // subresource.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& p, const Entry& q) {
    return std::tie(p.operation, p.time, p.manager, p.api_version, p.subresource) <
           std::tie(q.operation, q.time, q.manager, q.api_version, q.subresource);
  });
  json out = json::array();
  for (const Entry& e : entries) {
    if (e.set.empty()) continue;
    json entry = {{"manager", e.manager},
                  {"operation", e.operation},
                  {"apiVersion", e.api_version},
                  {"fieldsType", "FieldsV1"},
                  {"fieldsV1", e.set.toFieldsV1()}};
    if (!e.time.empty()) entry["time"] = e.time;
    if (!e.subresource.empty()) entry["subresource"] = e.subresource;
    out.push_back(std::move(entry));
  }
  return out;
}

// The manager identifier's equality (BuildManagerIdentifier: appliers regardless of version).
bool same(const Entry& e, const Writer& w, const std::string& operation) {
  return e.manager == w.manager && e.operation == operation && e.subresource == w.subresource &&
         (operation == "Apply" || e.api_version == w.api_version);
}

// printManager: "\"kubectl\"", "\"x\" using v1", "\"x\" with subresource \"status\" using v1".
std::string printManager(const Entry& e) {
  std::string out = json(e.manager).dump();
  if (!e.subresource.empty()) out += " with subresource " + json(e.subresource).dump();
  if (e.operation == "Update") out += " using " + e.api_version;
  return out;
}

// The fields the fieldmanager never tracks (stripMetaManager), and status or everything else
// by the resource's reset fields (a main-resource write does not own status when status is a
// subresource; a status write owns only status).
json stripped(const json& object, const std::string& subresource, bool has_status_subresource) {
  if (!object.is_object()) return json::object();
  json out = object;
  out.erase("apiVersion");
  out.erase("kind");
  if (subresource == "status") {
    json only = json::object();
    if (out.contains("status")) only["status"] = out["status"];
    return only;
  }
  if (has_status_subresource) out.erase("status");
  if (out.contains("metadata") && out["metadata"].is_object()) {
    json& m = out["metadata"];
    for (const char* f :
         {"name", "namespace", "creationTimestamp", "selfLink", "uid", "generation",
          "managedFields", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"}) {
      m.erase(f);
    }
  }
  return out;
}

}  // namespace

std::string managerFor(std::string_view field_manager, std::string_view user_agent) {
  std::string out(field_manager);
  if (out.empty()) out = std::string(user_agent.substr(0, user_agent.find('/')));
  if (out.size() > 128) out.resize(128);
  return out;
}

void recordUpdate(const json& old, json& next, const Writer& writer, const json& body_managed,
                  bool has_status_subresource) {
  std::vector<Entry> entries;
  if (body_managed.is_array() && !body_managed.empty()) {
    // An explicit list replaces the stored one; `[{}]` (no valid entry) clears it.
    entries = decode(body_managed);
    entries.erase(std::remove_if(entries.begin(), entries.end(),
                                 [](const Entry& e) { return e.manager.empty() || e.set.empty(); }),
                  entries.end());
  } else if (old.is_object()) {
    entries = decode(old.value("metadata", json::object()).value("managedFields", json()));
  }
  Comparison c =
      compare(old.is_null() ? json() : stripped(old, writer.subresource, has_status_subresource),
              stripped(next, writer.subresource, has_status_subresource));
  FieldSet changed = c.added.plus(c.modified);
  if (!changed.empty() || !c.removed.empty()) {
    // Update is forced: the others lose what this write changed, and everyone what it removed.
    bool found = false;
    for (Entry& e : entries) {
      if (same(e, writer, "Update")) {
        e.set = e.set.plus(changed).minus(c.removed);
        e.time = writer.now;
        found = true;
      } else {
        e.set = e.set.minus(changed).minus(c.removed);
      }
    }
    if (!found && !changed.empty() && !writer.manager.empty()) {
      entries.push_back(Entry{.manager = writer.manager,
                              .operation = "Update",
                              .api_version = writer.api_version,
                              .time = writer.now,
                              .subresource = writer.subresource,
                              .set = changed.minus(c.removed)});
    }
  }
  json encoded = encode(std::move(entries));
  if (encoded.empty()) {
    next["metadata"].erase("managedFields");
  } else {
    next["metadata"]["managedFields"] = std::move(encoded);
  }
}

Applied apply(const json& live, const json& config, const Writer& writer, bool force,
              bool has_status_subresource) {
  const std::string& sub = writer.subresource;
  json config_fields = stripped(config, sub, has_status_subresource);
  FieldSet applied_set = appliedSet(config_fields);
  std::vector<Entry> entries;
  if (live.is_object()) {
    entries = decode(live.value("metadata", json::object()).value("managedFields", json()));
  }
  FieldSet last;
  bool found = false;
  for (Entry& e : entries) {
    if (!same(e, writer, "Apply")) continue;
    last = e.set;
    e.set = applied_set;
    e.api_version = writer.api_version;
    found = true;
  }
  if (!found) {
    entries.push_back(Entry{.manager = writer.manager,
                            .operation = "Apply",
                            .api_version = writer.api_version,
                            .time = writer.now,
                            .subresource = sub,
                            .set = applied_set});
  }
  json merged = live.is_object() ? mergeApplied(live, config) : config;
  // Prune: what this manager applied last time and no longer does, and nobody else owns.
  for (const Path& p : last.minus(applied_set).paths()) {
    bool owned =
        std::any_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.set.has(p); });
    if (!owned) removePath(merged, p);
  }
  Comparison c = compare(live.is_object() ? stripped(live, sub, has_status_subresource) : json(),
                         stripped(merged, sub, has_status_subresource));
  FieldSet changed = c.added.plus(c.modified);
  // Conflicts: fields another manager owns that this apply changes.
  json causes = json::array();
  std::vector<std::pair<std::string, std::string>> conflicts;  // printed manager, path
  for (Entry& e : entries) {
    if (same(e, writer, "Apply")) continue;
    for (const Path& p : e.set.intersect(changed).paths()) {
      conflicts.emplace_back(printManager(e), pathString(p));
    }
  }
  if (!conflicts.empty() && !force) {
    std::sort(conflicts.begin(), conflicts.end());
    std::string message;
    if (conflicts.size() == 1) {
      message = "Apply failed with 1 conflict: conflict with " + conflicts[0].first + ": " +
                conflicts[0].second;
    } else {
      message = "Apply failed with " + std::to_string(conflicts.size()) + " conflicts: ";
      std::string manager;
      std::string lines;
      for (const auto& [m, p] : conflicts) {
        if (m != manager) {
          lines += (lines.empty() ? "" : "\n") + std::string("conflicts with ") + m + ":";
          manager = m;
        }
        lines += "\n- " + p;
      }
      message += lines;
    }
    for (const auto& [m, p] : conflicts) {
      causes.push_back(
          {{"reason", "FieldManagerConflict"}, {"message", "conflict with " + m}, {"field", p}});
    }
    Reply reply = statusReply(409, "Conflict", message);
    reply.body["details"] = {{"causes", causes}};
    return Applied{.error = std::move(reply)};
  }
  for (Entry& e : entries) {
    if (same(e, writer, "Apply")) {
      if (!changed.empty() || !c.removed.empty() ||
          !(last.minus(applied_set).empty() && applied_set.minus(last).empty())) {
        e.time = writer.now;
      }
      continue;
    }
    e.set = e.set.minus(changed).minus(c.removed);
  }
  if (!merged.contains("metadata") || !merged["metadata"].is_object()) {
    merged["metadata"] = json::object();
  }
  json encoded = encode(std::move(entries));
  if (encoded.empty()) {
    merged["metadata"].erase("managedFields");
  } else {
    merged["metadata"]["managedFields"] = std::move(encoded);
  }
  return Applied{.object = std::move(merged)};
}

}  // namespace ekco::kubesim::managed
