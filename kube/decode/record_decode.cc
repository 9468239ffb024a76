// decodeNode / decodePod (kube/decode/records.h): the informers' records straight from JSON text
// with simdjson On-Demand, one forward pass, no DOM. They keep what projectNode / projectPod keep
// and reject what those reject: every field parseNode / parsePod read is type-checked here too (a
// label value that is not a string, a bad timestamp in a condition ekco does not keep), with the
// same message naming the object and the field. Where an object repeats a key the last one
// wins, as in a DOM. Scalars in parts no field is read from are not validated (On-Demand skips
// them); the list page as a whole was checked to be well-formed structure.
#include <algorithm>
#include <map>
#include <optional>

#include "base/strings.h"
#include "kube/decode/records.h"
#include "kube/decode/simdjson_support.h"
#include "kube/decode/timestamp.h"

namespace ekco::kube {

namespace simd {

namespace {
thread_local std::unique_ptr<ondemand::parser> t_item_parser;
}  // namespace

ondemand::parser& itemParser() {
  if (!t_item_parser) t_item_parser = std::make_unique<ondemand::parser>();
  return *t_item_parser;
}

void trimItemParser() {
  if (t_item_parser && t_item_parser->capacity() > kKeptItemCapacity) t_item_parser.reset();
}

}  // namespace simd

namespace {

namespace ondemand = simd::ondemand;
using ondemand::json_type;
using ondemand::value;

struct FieldError {
  std::string field;
  std::string what;
};

// A field's path, spelled out only for an error message (decoding builds none).
struct Path {
  Path(const char* p) : base(p) {}         // NOLINT: implicit by design
  Path(std::string_view p) : base(p) {}    // NOLINT
  Path(const std::string& p) : base(p) {}  // NOLINT
  Path(std::string_view b, std::string_view l) : base(b), leaf(l) {}
  std::string full() const {
    std::string out(base);
    if (!leaf.empty()) out.append(".").append(leaf);
    return out;
  }
  std::string_view base;
  std::string_view leaf{};
};

std::string at(std::string_view path, std::size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

[[noreturn]] void invalid(const Path& path) { throw FieldError{path.full(), "invalid JSON"}; }

json_type typeOf(value& v, const Path& path) {
  json_type type;
  if (v.type().get(type) != simdjson::SUCCESS) invalid(path);
  return type;
}

// The wrong type for `expected` at `path`; a scalar that is no valid literal at all (`tru`,
// `1.e`: On-Demand types a value by its first byte) is "invalid JSON" instead.
[[noreturn]] void wrongType(value& v, json_type type, const Path& path, const char* expected) {
  bool valid = true;
  if (type == json_type::boolean) {
    bool b = false;
    valid = v.get_bool().get(b) == simdjson::SUCCESS;
  } else if (type == json_type::null) {
    bool is = false;
    valid = v.is_null().get(is) == simdjson::SUCCESS && is;
  } else if (type == json_type::number) {
    double d = 0;
    std::int64_t i = 0;
    std::uint64_t u = 0;
    valid = v.get_double().get(d) == simdjson::SUCCESS ||
            v.get_int64().get(i) == simdjson::SUCCESS || v.get_uint64().get(u) == simdjson::SUCCESS;
  } else if (type == json_type::string) {
    std::string_view s;
    valid = v.get_string().get(s) == simdjson::SUCCESS;
  }
  if (!valid) invalid(path);
  throw FieldError{path.full(),
                   std::string("expected ") + expected + ", got " + simd::typeName(type)};
}

// True for JSON null (the API's "absent"); throws on an invalid literal.
bool null(value& v, json_type type, const Path& path) {
  if (type != json_type::null) return false;
  bool is = false;
  if (v.is_null().get(is) != simdjson::SUCCESS || !is) invalid(path);
  return true;
}

std::string_view str(value& v, const Path& path) {
  const json_type type = typeOf(v, path);
  if (null(v, type, path)) return {};
  if (type != json_type::string) wrongType(v, type, path, "string");
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) invalid(path);
  return s;
}

bool boolean(value& v, const Path& path) {
  const json_type type = typeOf(v, path);
  if (null(v, type, path)) return false;
  if (type != json_type::boolean) wrongType(v, type, path, "boolean");
  bool b = false;
  if (v.get_bool().get(b) != simdjson::SUCCESS) invalid(path);
  return b;
}

std::optional<std::int64_t> integer(value& v, const Path& path) {
  const json_type type = typeOf(v, path);
  if (null(v, type, path)) return std::nullopt;
  if (type == json_type::number) {
    std::int64_t i = 0;
    if (v.get_int64().get(i) == simdjson::SUCCESS) return i;
    // Above INT64_MAX a DOM stores it unsigned and converts it the same way.
    std::uint64_t u = 0;
    if (v.get_uint64().get(u) == simdjson::SUCCESS) return static_cast<std::int64_t>(u);
  }
  wrongType(v, type, path, "integer");
}

std::optional<base::WallTime> time(value& v, const Path& path) {
  const std::string_view text = str(v, path);
  if (text.empty()) return std::nullopt;
  auto parsed = parseRfc3339(text);
  if (!parsed) throw FieldError{path.full(), parsed.error().message()};
  return *parsed;
}

// Calls f(key, value) for each member of an object. JSON null counts as an empty object when
// `null_ok` (a member the API omitted), and as the wrong type when not (an array element).
template <typename F>
void fields(value& v, const Path& path, bool null_ok, F&& f) {
  const json_type type = typeOf(v, path);
  if (null_ok && null(v, type, path)) return;
  if (type != json_type::object) wrongType(v, type, path, "object");
  ondemand::object object;
  if (v.get_object().get(object) != simdjson::SUCCESS) invalid(path);
  for (auto field : object) {
    std::string_view key;
    value member;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS ||
        field.value().get(member) != simdjson::SUCCESS) {
      invalid(path);
    }
    f(key, member);
  }
}

// Calls f(index, value) for each element of an array member (null: none).
template <typename F>
void elements(value& v, const Path& path, F&& f) {
  const json_type type = typeOf(v, path);
  if (null(v, type, path)) return;
  if (type != json_type::array) wrongType(v, type, path, "array");
  ondemand::array array;
  if (v.get_array().get(array) != simdjson::SUCCESS) invalid(path);
  std::size_t i = 0;
  for (auto element : array) {
    value item;
    if (element.get(item) != simdjson::SUCCESS) invalid(path);
    f(i, item);
    ++i;
  }
}

// Every value must be a string (labels, annotations); f(key, value) for each.
template <typename F>
void stringMap(value& v, const Path& path, F&& f) {
  fields(v, path, true, [&](std::string_view key, value& member) {
    const json_type type = typeOf(member, path);
    if (type != json_type::string) {
      wrongType(member, type, path.full() + "." + base::escapeForMessage(key), "string");
    }
    std::string_view s;
    if (member.get_string().get(s) != simdjson::SUCCESS) invalid(path);
    f(key, s);
  });
}

// The top level of `text` with f(key, value) per member; meta from its metadata.
template <typename F>
void decodeTop(JsonText text, F&& f) {
  ondemand::document doc;
  ondemand::object top;
  if (simd::iterate(simd::itemParser(), text).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(top) != simdjson::SUCCESS) {
    throw FieldError{"", "invalid JSON"};
  }
  for (auto field : top) {
    std::string_view key;
    value member;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS ||
        field.value().get(member) != simdjson::SUCCESS) {
      throw FieldError{"", "invalid JSON"};
    }
    f(key, member);
  }
}

// Runs the decode; a FieldError becomes "parse <kind> <name>: <field>: <what>", and an object
// without metadata.name is "object without metadata.name" (objectKey's error, checked first).
template <typename Record, typename F>
base::Result<Record> guarded(const char* kind, JsonText text, ObjectMeta& meta, F&& decode) {
  std::optional<FieldError> error;
  std::optional<Record> record;
  try {
    record = decode();
  } catch (const FieldError& e) {
    error = e;
  }
  simd::trimItemParser();
  if (error) {
    // Read again for the name (errors are rare; the first pass stopped at the error).
    (void)decodeMeta(text, meta);
    simd::trimItemParser();
  }
  if (meta.name.empty()) {
    return base::Error("object without metadata.name", base::ErrorCode::kParse);
  }
  if (error) {
    std::string message = std::string("parse ") + kind + " " + base::escapeForMessage(meta.name);
    if (!error->field.empty()) message += ": " + error->field;
    return base::Error(message + ": " + error->what, base::ErrorCode::kParse);
  }
  return std::move(*record);
}

}  // namespace

base::Result<NodeRecord> decodeNode(JsonText text, ObjectMeta& meta) {
  meta = {};
  return guarded<NodeRecord>("Node", text, meta, [&] {
    NodeRecord r;
    decodeTop(text, [&](std::string_view key, value& v) {
      if (key == "metadata") {
        meta = {};
        r.name = Atom();
        r.uid.clear();
        r.roles.clear();
        r.hostname = Atom();
        r.control_plane = false;
        r.ekco_annotations.clear();
        fields(v, "metadata", true, [&](std::string_view k, value& m) {
          if (k == "name") {
            meta.name = str(m, "metadata.name");
            r.name = Atom(meta.name);
          } else if (k == "namespace") {
            // Not kept, but the key of a namespaced object would use it (objectKey).
            const json_type type = typeOf(m, "metadata.namespace");
            meta.ns.clear();
            if (type == json_type::string) meta.ns = str(m, "metadata.namespace");
          } else if (k == "uid") {
            r.uid = str(m, "metadata.uid");
          } else if (k == "resourceVersion") {
            meta.resource_version = str(m, "metadata.resourceVersion");
          } else if (k == "labels") {
            r.roles.clear();
            r.hostname = Atom();
            r.control_plane = false;
            stringMap(m, "metadata.labels", [&](std::string_view label, std::string_view value) {
              if (label.starts_with(kNodeRoleLabelPrefix) &&
                  label.size() > kNodeRoleLabelPrefix.size()) {
                r.roles.emplace_back(label.substr(kNodeRoleLabelPrefix.size()));
              }
              if (label == "kubernetes.io/hostname") r.hostname = Atom(value);
              if (label == "node-role.kubernetes.io/control-plane" ||
                  label == "node-role.kubernetes.io/master") {
                r.control_plane = true;
              }
            });
            // Sorted and unique, as a map's keys are.
            std::sort(r.roles.begin(), r.roles.end(),
                      [](Atom a, Atom b) { return a.view() < b.view(); });
            r.roles.erase(std::unique(r.roles.begin(), r.roles.end()), r.roles.end());
          } else if (k == "annotations") {
            std::map<std::string, std::string, std::less<>> ekco;
            stringMap(m, "metadata.annotations",
                      [&](std::string_view annotation, std::string_view value) {
                        if (annotation.starts_with(kEkcoAnnotationPrefix)) {
                          ekco.insert_or_assign(std::string(annotation), std::string(value));
                        }
                      });
            r.ekco_annotations.assign(ekco.begin(), ekco.end());
          }
        });
      } else if (key == "spec") {
        r.unschedulable = false;
        r.taints.clear();
        fields(v, "spec", true, [&](std::string_view k, value& s) {
          if (k == "unschedulable") {
            r.unschedulable = boolean(s, "spec.unschedulable");
          } else if (k == "taints") {
            r.taints.clear();
            elements(s, "spec.taints", [&](std::size_t i, value& t) {
              const std::string p = at("spec.taints", i);
              TaintRecord taint;
              fields(t, p, false, [&](std::string_view f, value& x) {
                if (f == "key") {
                  taint.key = Atom(str(x, Path{p, "key"}));
                } else if (f == "value") {
                  taint.value = str(x, Path{p, "value"});
                } else if (f == "effect") {
                  taint.effect = Atom(str(x, Path{p, "effect"}));
                } else if (f == "timeAdded") {
                  taint.time_added = time(x, Path{p, "timeAdded"});
                }
              });
              r.taints.push_back(std::move(taint));
            });
          }
        });
      } else if (key == "status") {
        r.conditions.clear();
        r.addresses.clear();
        r.boot_id.clear();
        fields(v, "status", true, [&](std::string_view k, value& s) {
          if (k == "conditions") {
            r.conditions.clear();
            elements(s, "status.conditions", [&](std::size_t i, value& c) {
              const std::string p = at("status.conditions", i);
              ConditionRecord condition;
              fields(c, p, false, [&](std::string_view f, value& x) {
                if (f == "type") {
                  condition.type = Atom(str(x, Path{p, "type"}));
                } else if (f == "status") {
                  condition.status = Atom(str(x, Path{p, "status"}));
                } else if (f == "lastTransitionTime") {
                  condition.last_transition_time = time(x, Path{p, "lastTransitionTime"});
                } else if (f == "lastHeartbeatTime") {
                  (void)time(x, Path{p, "lastHeartbeatTime"});  // checked, not kept
                }
              });
              r.conditions.push_back(condition);
            });
          } else if (k == "addresses") {
            r.addresses.clear();
            elements(s, "status.addresses", [&](std::size_t i, value& a) {
              const std::string p = at("status.addresses", i);
              AddressRecord address;
              fields(a, p, false, [&](std::string_view f, value& x) {
                if (f == "type") {
                  address.type = Atom(str(x, Path{p, "type"}));
                } else if (f == "address") {
                  address.address = str(x, Path{p, "address"});
                }
              });
              r.addresses.push_back(std::move(address));
            });
          } else if (k == "nodeInfo") {
            r.boot_id.clear();
            fields(s, "status.nodeInfo", true, [&](std::string_view f, value& x) {
              if (f == "bootID") r.boot_id = str(x, "status.nodeInfo.bootID");
            });
          }
        });
      }
    });
    return r;
  });
}

base::Result<PodRecord> decodePod(JsonText text, ObjectMeta& meta) {
  meta = {};
  return guarded<PodRecord>("Pod", text, meta, [&] {
    PodRecord r;
    const auto clamp = [](std::size_t n) {
      return static_cast<std::uint16_t>(std::min<std::size_t>(n, UINT16_MAX));
    };
    decodeTop(text, [&](std::string_view key, value& v) {
      if (key == "metadata") {
        meta = {};
        r.ns = Atom();
        r.name.clear();
        r.uid.clear();
        r.app = Atom();
        r.deletion_timestamp.reset();
        r.deletion_grace_period_seconds.reset();
        r.owner_kind = Atom();
        fields(v, "metadata", true, [&](std::string_view k, value& m) {
          if (k == "namespace") {
            meta.ns = str(m, "metadata.namespace");
            r.ns = Atom(meta.ns);
          } else if (k == "name") {
            meta.name = str(m, "metadata.name");
            r.name = meta.name;
          } else if (k == "uid") {
            r.uid = str(m, "metadata.uid");
          } else if (k == "resourceVersion") {
            meta.resource_version = str(m, "metadata.resourceVersion");
          } else if (k == "labels") {
            r.app = Atom();
            stringMap(m, "metadata.labels", [&](std::string_view label, std::string_view value) {
              if (label == "app") r.app = Atom(value);
            });
          } else if (k == "deletionTimestamp") {
            r.deletion_timestamp = time(m, "metadata.deletionTimestamp");
          } else if (k == "deletionGracePeriodSeconds") {
            r.deletion_grace_period_seconds = integer(m, "metadata.deletionGracePeriodSeconds");
          } else if (k == "ownerReferences") {
            r.owner_kind = Atom();
            bool found = false;
            elements(m, "metadata.ownerReferences", [&](std::size_t i, value& o) {
              const std::string p = at("metadata.ownerReferences", i);
              std::string_view kind;
              bool controller = false;
              fields(o, p, false, [&](std::string_view f, value& x) {
                if (f == "kind") {
                  kind = str(x, Path{p, "kind"});
                } else if (f == "name" || f == "uid") {
                  (void)str(x, Path{p, f});  // checked, not kept
                } else if (f == "controller") {
                  controller = boolean(x, Path{p, "controller"});
                }
              });
              if (controller && !found) {
                found = true;
                r.owner_kind = Atom(kind);
              }
            });
          }
        });
      } else if (key == "spec") {
        r.node_name = Atom();
        r.volume_kinds = 0;
        fields(v, "spec", true, [&](std::string_view k, value& s) {
          if (k == "nodeName") {
            r.node_name = Atom(str(s, "spec.nodeName"));
          } else if (k == "volumes") {
            r.volume_kinds = 0;
            elements(s, "spec.volumes", [&](std::size_t i, value& vol) {
              const std::string p = at("spec.volumes", i);
              // The volume's kind is its member other than "name" (the last in key order, as
              // a DOM's sorted keys give it); its claim is checked only for that member.
              std::string kind;
              std::optional<FieldError> claim_error;
              fields(vol, p, false, [&](std::string_view f, value& x) {
                if (f != "name" && f > kind) kind = f;
                if (f != "persistentVolumeClaim") return;
                claim_error.reset();
                try {
                  fields(x, Path{p, "persistentVolumeClaim"}, true,
                         [&](std::string_view c, value& y) {
                           if (c == "claimName")
                             (void)str(y, Path{p, "persistentVolumeClaim.claimName"});
                         });
                } catch (const FieldError& e) {
                  claim_error = e;
                }
              });
              r.volume_kinds |= volumeKindBit(kind);
              if (kind == "persistentVolumeClaim" && claim_error) throw *claim_error;
            });
          }
        });
      } else if (key == "status") {
        r.phase = Atom();
        r.containers = 0;
        r.containers_ready = 0;
        fields(v, "status", true, [&](std::string_view k, value& s) {
          if (k == "phase") {
            r.phase = Atom(str(s, "status.phase"));
          } else if (k == "containerStatuses") {
            std::size_t count = 0;
            std::size_t ready = 0;
            elements(s, "status.containerStatuses", [&](std::size_t i, value& c) {
              const std::string p = at("status.containerStatuses", i);
              bool is_ready = false;
              fields(c, p, false, [&](std::string_view f, value& x) {
                if (f == "name") {
                  (void)str(x, Path{p, "name"});
                } else if (f == "ready") {
                  is_ready = boolean(x, Path{p, "ready"});
                } else if (f == "state") {
                  fields(x, Path{p, "state"}, true, [&](std::string_view st, value& y) {
                    if (st != "running") return;
                    fields(y, Path{p, "state.running"}, true, [&](std::string_view rn, value& z) {
                      if (rn == "startedAt") (void)time(z, Path{p, "state.running.startedAt"});
                    });
                  });
                }
              });
              ++count;
              if (is_ready) ++ready;
            });
            r.containers = clamp(count);
            r.containers_ready = clamp(ready);
          } else if (k == "conditions") {
            elements(s, "status.conditions", [&](std::size_t i, value& c) {
              const std::string p = at("status.conditions", i);
              fields(c, p, false, [&](std::string_view f, value& x) {
                if (f == "type" || f == "status" || f == "reason") {
                  (void)str(x, Path{p, f});
                } else if (f == "lastTransitionTime") {
                  (void)time(x, Path{p, "lastTransitionTime"});
                }
              });
            });
          }
        });
      }
    });
    return r;
  });
}

bool decodeMeta(JsonText object, ObjectMeta& meta) {
  meta = {};
  ondemand::document doc;
  ondemand::object top;
  if (simd::iterate(simd::itemParser(), object).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(top) != simdjson::SUCCESS) {
    return false;
  }
  for (auto field : top) {
    std::string_view key;
    ondemand::value value;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS ||
        field.value().get(value) != simdjson::SUCCESS) {
      return false;
    }
    if (key != "metadata") continue;
    meta = {};
    ondemand::object m;
    if (value.get_object().get(m) != simdjson::SUCCESS) continue;
    for (auto f : m) {
      std::string_view k;
      ondemand::value v;
      if (f.unescaped_key().get(k) != simdjson::SUCCESS || f.value().get(v) != simdjson::SUCCESS) {
        return false;
      }
      if (k == "name") {
        if (!simd::stringOrEmpty(v, meta.name)) return false;
      } else if (k == "namespace") {
        if (!simd::stringOrEmpty(v, meta.ns)) return false;
      } else if (k == "resourceVersion") {
        if (!simd::stringOrEmpty(v, meta.resource_version)) return false;
      }
    }
  }
  return true;
}

}  // namespace ekco::kube
