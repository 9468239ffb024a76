// Field sets and the typed operations of structured-merge-diff (ToFieldSet, Compare, Merge,
// RemoveItems) over JSON, with the type model of managed_fields.h.
#include "tests/kubesim/apply/managed_fields.h"

#include <algorithm>

#include "tests/kubesim/apply/patch.h"

namespace ekco::kubesim::managed {

using nlohmann::json;

// --- FieldSet ---

bool FieldSet::empty() const {
  if (member) return false;
  return std::all_of(children.begin(), children.end(),
                     [](const auto& c) { return c.second.empty(); });
}

void FieldSet::insert(const Path& path) {
  FieldSet* node = this;
  for (const std::string& e : path) node = &node->children[e];
  node->member = true;
}

bool FieldSet::has(const Path& path) const {
  const FieldSet* node = this;
  for (const std::string& e : path) {
    auto it = node->children.find(e);
    if (it == node->children.end()) return false;
    node = &it->second;
  }
  return node->member;
}

void FieldSet::erase(const Path& path) {
  if (path.empty()) {
    member = false;
    return;
  }
  auto it = children.find(path.front());
  if (it == children.end()) return;
  it->second.erase(Path(path.begin() + 1, path.end()));
  if (it->second.empty()) children.erase(it);
}

namespace {

void collect(const FieldSet& node, Path& prefix, std::vector<Path>& out) {
  if (node.member) out.push_back(prefix);
  for (const auto& [e, child] : node.children) {
    prefix.push_back(e);
    collect(child, prefix, out);
    prefix.pop_back();
  }
}

}  // namespace

std::vector<Path> FieldSet::paths() const {
  std::vector<Path> out;
  Path prefix;
  collect(*this, prefix, out);
  return out;
}

FieldSet FieldSet::minus(const FieldSet& other) const {
  FieldSet out = *this;
  for (const Path& p : other.paths()) out.erase(p);
  return out;
}

FieldSet FieldSet::plus(const FieldSet& other) const {
  FieldSet out = *this;
  for (const Path& p : other.paths()) out.insert(p);
  return out;
}

FieldSet FieldSet::intersect(const FieldSet& other) const {
  FieldSet out;
  for (const Path& p : paths()) {
    if (other.has(p)) out.insert(p);
  }
  return out;
}

json FieldSet::toFieldsV1() const {
  json out = json::object();
  if (member && !children.empty()) out["."] = json::object();
  for (const auto& [e, child] : children) {
    if (!child.empty()) out[e] = child.toFieldsV1();
  }
  return out;
}

FieldSet FieldSet::fromFieldsV1(const json& fields) {
  FieldSet out;
  if (!fields.is_object()) return out;
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    if (it.key() == ".") {
      out.member = true;
      continue;
    }
    FieldSet child = fromFieldsV1(it.value());
    if (it.value().is_object() && it.value().empty()) child.member = true;
    out.children[it.key()] = std::move(child);
  }
  return out;
}

std::string pathString(const Path& path) {
  std::string out;
  for (const std::string& e : path) {
    std::string rest = e.substr(2);
    if (e.rfind("f:", 0) == 0) {
      out += "." + rest;
    } else if (e.rfind("k:", 0) == 0) {
      json key = json::parse(rest, nullptr, false);
      std::string inner;
      if (key.is_object()) {
        for (auto it = key.begin(); it != key.end(); ++it) {
          if (!inner.empty()) inner += ",";
          inner += it.key() + "=" + it.value().dump();
        }
      }
      out += "[" + inner + "]";
    } else if (e.rfind("v:", 0) == 0) {
      out += "[=" + rest + "]";
    } else {
      out += "[" + rest + "]";
    }
  }
  return out;
}

// --- the type model ---

namespace {

enum class Shape { kLeaf, kObject, kAssociative, kSet };

struct Field {
  std::string name{};    // this field's name ("" at the root)
  std::string parent{};  // the field whose value holds it, or the list it is an item of
};

// Go value structs (and the one non-omitempty list) an old object always serializes, so a write
// never "adds" them when their parent exists.
bool alwaysPresent(const std::string& name) {
  return name == "spec" || name == "status" || name == "template" || name == "strategy" ||
         name == "updateStrategy" || name == "metadata" || name == "resources" ||
         name == "containers";
}

std::vector<std::string> keyFields(const Field& f) {
  auto key = strategicMergeKey(f.name, f.parent);
  if (!key) return {};
  // The list-map keys of ContainerPort and ServicePort include the (defaulted) protocol.
  if (f.name == "ports") return {*key, "protocol"};
  return {*key};
}

Shape shapeOf(const Field& f, const json& v) {
  if (v.is_array()) {
    if (!keyFields(f).empty()) return Shape::kAssociative;
    if (f.name == "finalizers") return Shape::kSet;
    return Shape::kLeaf;
  }
  if (v.is_object()) {
    if (f.name == "selector" && (v.contains("matchLabels") || v.contains("matchExpressions"))) {
      return Shape::kLeaf;  // LabelSelector is +structType=atomic
    }
    return Shape::kObject;
  }
  return Shape::kLeaf;
}

std::optional<json> itemKey(const Field& f, const json& item) {
  if (!item.is_object()) return std::nullopt;
  json key = json::object();
  for (const std::string& k : keyFields(f)) {
    if (item.contains(k) && !item[k].is_null()) {
      key[k] = item[k];
    } else if (k == "protocol") {
      key[k] = "TCP";
    } else {
      return std::nullopt;
    }
  }
  return key;
}

std::string keyElement(const json& key) { return "k:" + key.dump(); }

// The items of an associative list by their path element, in list order.
std::vector<std::pair<std::string, const json*>> items(const Field& f, const json& list) {
  std::vector<std::pair<std::string, const json*>> out;
  if (!list.is_array()) return out;
  for (const json& item : list) {
    if (auto key = itemKey(f, item)) out.emplace_back(keyElement(*key), &item);
  }
  return out;
}

const json* findItem(const std::vector<std::pair<std::string, const json*>>& list,
                     const std::string& element) {
  for (const auto& [e, item] : list) {
    if (e == element) return item;
  }
  return nullptr;
}

// --- ToFieldSet ---

void applied(const json& v, const Field& f, Path& path, FieldSet& out) {
  switch (shapeOf(f, v)) {
    case Shape::kLeaf:
      if (!path.empty()) out.insert(path);
      return;
    case Shape::kObject:
      for (auto it = v.begin(); it != v.end(); ++it) {
        path.push_back("f:" + it.key());
        applied(it.value(), Field{.name = it.key(), .parent = f.name}, path, out);
        path.pop_back();
      }
      return;
    case Shape::kAssociative:
      for (const auto& [e, item] : items(f, v)) {
        path.push_back(e);
        out.insert(path);
        applied(*item, f, path, out);
        path.pop_back();
      }
      return;
    case Shape::kSet:
      for (const json& value : v) {
        path.push_back("v:" + value.dump());
        out.insert(path);
        path.pop_back();
      }
      return;
  }
}

// --- Compare ---

// Every path of a subtree that exists on one side only, the node's own included, into `out`.
void whole(const json& v, const Field& f, Path& path, FieldSet& out) {
  if (!path.empty()) out.insert(path);
  switch (shapeOf(f, v)) {
    case Shape::kLeaf:
      return;
    case Shape::kObject:
      for (auto it = v.begin(); it != v.end(); ++it) {
        path.push_back("f:" + it.key());
        whole(it.value(), Field{.name = it.key(), .parent = f.name}, path, out);
        path.pop_back();
      }
      return;
    case Shape::kAssociative:
      for (const auto& [e, item] : items(f, v)) {
        path.push_back(e);
        whole(*item, f, path, out);
        path.pop_back();
      }
      return;
    case Shape::kSet:
      for (const json& value : v) {
        path.push_back("v:" + value.dump());
        out.insert(path);
        path.pop_back();
      }
      return;
  }
}

// `present`: the node's parent exists on the old side, so an absent value struct is still
// (as a zero value) there.
void compareNode(const json* lhs, const json* rhs, const Field& f, Path& path, bool present,
                 Comparison& c) {
  if (lhs != nullptr && lhs->is_null()) lhs = nullptr;
  if (rhs != nullptr && rhs->is_null()) rhs = nullptr;
  if (lhs == nullptr && rhs == nullptr) return;
  const bool zero_there = present && alwaysPresent(f.name);
  if (lhs == nullptr || rhs == nullptr) {
    const json& v = lhs == nullptr ? *rhs : *lhs;
    if (zero_there && shapeOf(f, v) != Shape::kLeaf) {
      // The zero value exists on the other side: compare its contents only.
      static const json kEmpty = json::object();
      static const json kNoItems = json::array();
      const json& zero = v.is_array() ? kNoItems : kEmpty;
      compareNode(lhs == nullptr ? &zero : lhs, rhs == nullptr ? &zero : rhs, f, path, present, c);
      return;
    }
    whole(v, f, path, lhs == nullptr ? c.added : c.removed);
    return;
  }
  Shape shape = shapeOf(f, *rhs);
  if (shape != shapeOf(f, *lhs) || shape == Shape::kLeaf) {
    if (*lhs != *rhs && !path.empty()) c.modified.insert(path);
    return;
  }
  switch (shape) {
    case Shape::kObject: {
      std::vector<std::string> keys;
      for (auto it = lhs->begin(); it != lhs->end(); ++it) keys.push_back(it.key());
      for (auto it = rhs->begin(); it != rhs->end(); ++it) {
        if (!lhs->contains(it.key())) keys.push_back(it.key());
      }
      for (const std::string& k : keys) {
        path.push_back("f:" + k);
        auto l = lhs->find(k);
        auto r = rhs->find(k);
        compareNode(l == lhs->end() ? nullptr : &*l, r == rhs->end() ? nullptr : &*r,
                    Field{.name = k, .parent = f.name}, path, true, c);
        path.pop_back();
      }
      return;
    }
    case Shape::kAssociative: {
      auto left = items(f, *lhs);
      auto right = items(f, *rhs);
      const Field& item = f;  // an item's fields have the list as their parent
      for (const auto& [e, l] : left) {
        path.push_back(e);
        compareNode(l, findItem(right, e), item, path, false, c);
        path.pop_back();
      }
      for (const auto& [e, r] : right) {
        if (findItem(left, e) != nullptr) continue;
        path.push_back(e);
        compareNode(nullptr, r, item, path, false, c);
        path.pop_back();
      }
      return;
    }
    case Shape::kSet: {
      for (const json& v : *lhs) {
        if (std::find(rhs->begin(), rhs->end(), v) != rhs->end()) continue;
        path.push_back("v:" + v.dump());
        c.removed.insert(path);
        path.pop_back();
      }
      for (const json& v : *rhs) {
        if (std::find(lhs->begin(), lhs->end(), v) != lhs->end()) continue;
        path.push_back("v:" + v.dump());
        c.added.insert(path);
        path.pop_back();
      }
      return;
    }
    case Shape::kLeaf:
      return;
  }
}

json mergeValue(const json& live, const json& config, const Field& f) {
  if (live.is_null()) return config;
  Shape shape = shapeOf(f, config);
  if (shape != shapeOf(f, live)) return config;
  switch (shape) {
    case Shape::kObject: {
      json out = live;
      for (auto it = config.begin(); it != config.end(); ++it) {
        if (it.value().is_null()) {
          out.erase(it.key());
          continue;
        }
        auto cur = out.find(it.key());
        out[it.key()] = mergeValue(cur == out.end() ? json() : *cur, it.value(),
                                   Field{.name = it.key(), .parent = f.name});
      }
      return out;
    }
    case Shape::kAssociative: {
      json out = live;
      const Field& item = f;  // an item's fields have the list as their parent
      for (const json& c : config) {
        auto key = itemKey(f, c);
        auto found = key ? std::find_if(out.begin(), out.end(),
                                        [&](const json& l) { return itemKey(f, l) == key; })
                         : out.end();
        if (found == out.end()) {
          out.push_back(c);
        } else {
          *found = mergeValue(*found, c, item);
        }
      }
      return out;
    }
    case Shape::kSet: {
      json out = live;
      for (const json& v : config) {
        if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
      }
      return out;
    }
    case Shape::kLeaf:
      return config;
  }
  return config;
}

// Walks to the value at `path`; `f` receives its Field. Null when absent.
json* locate(json& object, const Path& path, std::size_t depth, Field& f) {
  json* cur = &object;
  for (std::size_t i = 0; i < depth; ++i) {
    const std::string& e = path[i];
    std::string rest = e.substr(2);
    if (e.rfind("f:", 0) == 0) {
      if (!cur->is_object() || !cur->contains(rest)) return nullptr;
      f = Field{.name = rest, .parent = f.name};
      cur = &(*cur)[rest];
    } else if (e.rfind("k:", 0) == 0) {
      if (!cur->is_array()) return nullptr;
      json key = json::parse(rest, nullptr, false);
      auto it = std::find_if(cur->begin(), cur->end(),
                             [&](const json& item) { return itemKey(f, item) == key; });
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else {
      return nullptr;
    }
  }
  return cur;
}

}  // namespace

FieldSet appliedSet(const json& config) {
  FieldSet out;
  Path path;
  if (config.is_object()) applied(config, Field{}, path, out);
  return out;
}

Comparison compare(const json& old, const json& next) {
  Comparison c;
  Path path;
  static const json kEmpty = json::object();
  compareNode(old.is_null() ? &kEmpty : &old, next.is_null() ? &kEmpty : &next, Field{}, path,
              false, c);
  return c;
}

json mergeApplied(const json& live, const json& config) {
  return mergeValue(live, config, Field{});
}

void removePath(json& object, const Path& path) {
  if (path.empty()) return;
  Field f;
  json* parent = locate(object, path, path.size() - 1, f);
  if (parent == nullptr) return;
  const std::string& last = path.back();
  std::string rest = last.substr(2);
  if (last.rfind("f:", 0) == 0) {
    if (parent->is_object()) parent->erase(rest);
  } else if (last.rfind("k:", 0) == 0 && parent->is_array()) {
    json key = json::parse(rest, nullptr, false);
    for (auto it = parent->begin(); it != parent->end(); ++it) {
      if (itemKey(f, *it) == key) {
        parent->erase(it);
        break;
      }
    }
  } else if (last.rfind("v:", 0) == 0 && parent->is_array()) {
    json value = json::parse(rest, nullptr, false);
    auto it = std::find(parent->begin(), parent->end(), value);
    if (it != parent->end()) parent->erase(it);
  }
}

}  // namespace ekco::kubesim::managed
