// Field management as kube-apiserver's fieldmanager and sigs.k8s.io/structured-merge-diff do it,
// over kubesim's JSON objects: who owns which fields (`metadata.managedFields`, FieldsV1), what a
// non-apply write (create, update, patch: operation Update) takes over, and server-side apply
// (operation Apply): merge, prune, conflicts, force.
//
// The type model is the strategic merge patch's (patch.h): lists with a merge key are
// associative (`k:{"name":"c"}`; ports keyed by port or containerPort plus protocol, defaulting
// to TCP), `finalizers` is a set (`v:"x"`), every other list is atomic, a `selector` holding
// matchLabels/matchExpressions (LabelSelector) is atomic, every other object is granular. Go
// value structs that an old object always serializes (spec, template, strategy, ...) are not
// "added" by a write, as in the real server; pointer structs and maps are (`.: {}`).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/kubesim/store/store.h"

namespace ekco::kubesim::managed {

// One path: FieldsV1 elements ("f:spec", "k:{\"name\":\"c\"}", "v:\"x\"").
using Path = std::vector<std::string>;

// fieldpath.Set: a tree of path elements; `member` marks a path in the set (FieldsV1's `.`).
struct FieldSet {
  bool member = false;
  std::map<std::string, FieldSet> children{};

  bool empty() const;
  void insert(const Path& path);
  bool has(const Path& path) const;
  void erase(const Path& path);
  std::vector<Path> paths() const;
  FieldSet minus(const FieldSet& other) const;
  FieldSet plus(const FieldSet& other) const;
  FieldSet intersect(const FieldSet& other) const;
  nlohmann::json toFieldsV1() const;
  static FieldSet fromFieldsV1(const nlohmann::json& fields);
};

// fieldpath.Path.String(): ".spec.containers[name=\"c\"].image", ".metadata.finalizers[=\"x\"]".
std::string pathString(const Path& path);

// typed.TypedValue.ToFieldSet of an apply configuration: leaves, atomic values and list items.
FieldSet appliedSet(const nlohmann::json& config);

struct Comparison {
  FieldSet added{};
  FieldSet modified{};
  FieldSet removed{};
};
// typed.Compare(old, next); either may be null (an absent object).
Comparison compare(const nlohmann::json& old, const nlohmann::json& next);

// typed.Merge: the configuration merged into the live object (associative lists by key, sets
// as unions, everything else replaced by the configuration's value).
nlohmann::json mergeApplied(const nlohmann::json& live, const nlohmann::json& config);

// Removes the value at `path` (a field, a list item by key, a set value); no-op when absent.
void removePath(nlohmann::json& object, const Path& path);

// What the write is, for the managedFields entry it touches.
struct Writer {
  std::string manager{};      // fieldManager, or the User-Agent's product ("kubectl", ...)
  std::string api_version{};  // the request's group/version ("v1", "apps/v1")
  std::string subresource{};  // "" or "status"
  std::string now{};          // RFC 3339, the entry's time
  bool force = false;         // apply: take the conflicting fields (?force=true)
  // The request's ?fieldValidation: "Ignore", "Warn" ("" too: the server's default) or "Strict"
  // (Store::decodeFieldsLocked).
  std::string field_validation{};
};

// A non-apply write (create: `old` null): `next`'s metadata.managedFields become old's (or, when
// `body_managed` holds a non-empty list, the body's; `[{}]` clears them) with the writer's
// Update entry taking the fields the write added or changed, as FieldManager.Update.
void recordUpdate(const nlohmann::json& old, nlohmann::json& next, const Writer& writer,
                  const nlohmann::json& body_managed, bool has_status_subresource);

// Server-side apply of `config` onto `live` (null: the object does not exist). Answers the
// object to store (managedFields set) or the Reply to send (409 Conflict, 400).
struct Applied {
  nlohmann::json object{};
  std::optional<Reply> error{};
};
Applied apply(const nlohmann::json& live, const nlohmann::json& config, const Writer& writer,
              bool force, bool has_status_subresource);

// The field manager of a write: the fieldManager query value, else the User-Agent up to its
// first "/" (managerOrUserAgent), at most 128 characters.
std::string managerFor(std::string_view field_manager, std::string_view user_agent);

}  // namespace ekco::kubesim::managed
