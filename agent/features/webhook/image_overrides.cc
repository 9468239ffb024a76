#include "agent/features/webhook/image_overrides.h"

#include <array>
#include <cstdint>
#include <exception>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "kube/decode/json_depth.h"
#include "kube/decode/json_fields.h"

namespace ekco::agent::admission {

using nlohmann::json;

namespace {

constexpr std::string_view kV1 = "admission.k8s.io/v1";
constexpr std::string_view kV1beta1 = "admission.k8s.io/v1beta1";
constexpr std::array<std::string_view, 3> kLists = {"containers", "initContainers",
                                                    "ephemeralContainers"};

std::string base64(std::string_view data) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(data[i]) << 16) |
                       (static_cast<unsigned char>(data[i + 1]) << 8) |
                       static_cast<unsigned char>(data[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < data.size()) {
    unsigned v = static_cast<unsigned char>(data[i]) << 16;
    if (i + 1 < data.size()) v |= static_cast<unsigned char>(data[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < data.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// What the review reads of a request body, collected while it is parsed (nlohmann's SAX
// interface): a few strings, the types of the values on the paths it follows, and the list
// indexes whose image has an override. Nothing else of the body is kept: a DOM of a hostile
// 3 MiB body ([{},{},...]) took ~20 times its size, and eight at once killed the agent (issue
// 34). Duplicate keys count as the last one, as in a DOM (and in the apiserver's decoder): the
// facts under a key are reset when it appears again.
using Type = json::value_t;
constexpr Type kAbsent = Type::discarded;

// Strings the review keeps (uid, names, kinds) are kept up to this size: the apiserver's are
// tens of bytes, and a longer one is never equal to anything the review compares it with.
constexpr std::size_t kMaxKeptString = 1024;

std::string_view typeName(Type t) {
  switch (t) {
    case Type::null:
      return "null";
    case Type::object:
      return "object";
    case Type::array:
      return "array";
    case Type::string:
      return "string";
    case Type::boolean:
      return "boolean";
    case Type::binary:
      return "binary";
    case Type::number_integer:
    case Type::number_unsigned:
    case Type::number_float:
      return "number";
    case Type::discarded:
      break;
  }
  return "discarded";
}

struct Str {
  Type type = kAbsent;
  std::string text{};  // when type is string: the first kMaxKeptString bytes
  bool truncated = false;

  bool present() const { return type != kAbsent && type != Type::null; }
  bool is(std::string_view v) const { return type == Type::string && !truncated && text == v; }
};

// A value for messages: a string quoted, anything else by its type.
std::string describe(const Str& v) {
  return v.type == Type::string ? base::quoteForMessage(v.text) : std::string(typeName(v.type));
}

// An index of a container list whose image is an override's original.
struct Hit {
  std::size_t index = 0;
  ImageOverrides::const_iterator entry{};
};

struct ListFacts {
  Type type = kAbsent;
  std::string error{};      // the first element (in index order) of the wrong shape
  std::vector<Hit> hits{};  // before the first error, at most kMaxImageChanges + 1
};

struct OldListFacts {
  Type type = kAbsent;
  std::vector<Hit> hits{};
};

struct Facts {
  Type top = kAbsent;
  Str api_version{};
  Str kind{};
  struct Request {
    Type type = kAbsent;
    Str uid{}, operation{}, ns{}, name{};
    struct Kind {
      Type type = kAbsent;
      Str kind{}, group{};
    } kind{};
    struct Object {
      Type type = kAbsent;
      Str kind{};
      struct Meta {
        Type type = kAbsent;
        Str name{}, generate_name{};
      } meta{};
      struct Spec {
        Type type = kAbsent;
        std::array<ListFacts, kLists.size()> lists{};
      } spec{};
    } object{};
    struct OldObject {
      Type type = kAbsent;
      struct Spec {
        Type type = kAbsent;
        std::array<OldListFacts, kLists.size()> lists{};
      } spec{};
    } old{};
  } request{};
};

// The SAX handler: a stack of the containers open, each knowing which of the review's values
// its next value is (the slot, from its key or its index), or that nothing below it matters.
class Collector {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit Collector(const ImageOverrides& overrides) : overrides_(overrides) {
    stack_.push_back({.frame = Frame::kRoot, .slot = Slot::kTop});
  }

  Facts facts{};
  std::string error{};  // the parser's, when the body is not JSON

  bool null() { return scalar(Type::null, nullptr); }
  bool boolean(bool) { return scalar(Type::boolean, nullptr); }
  bool number_integer(number_integer_t) { return scalar(Type::number_integer, nullptr); }
  bool number_unsigned(number_unsigned_t) { return scalar(Type::number_unsigned, nullptr); }
  bool number_float(number_float_t, const string_t&) { return scalar(Type::number_float, nullptr); }
  bool string(string_t& v) { return scalar(Type::string, &v); }
  bool binary(binary_t&) { return scalar(Type::binary, nullptr); }
  bool start_object(std::size_t) { return open(Type::object); }
  bool start_array(std::size_t) { return open(Type::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k) {
    Level& l = stack_.back();
    l.slot = slotFor(l.frame, k);
    if (l.slot == Slot::kList || l.slot == Slot::kOldList) l.list = listOf(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error = e.what();
    return false;
  }

 private:
  // A container being parsed.
  enum class Frame : std::uint8_t {
    kSkip,  // nothing below matters
    kRoot,
    kReview,
    kRequest,
    kRequestKind,
    kObject,
    kMeta,
    kSpec,
    kList,
    kContainer,
    kOldObject,
    kOldSpec,
    kOldList,
    kOldContainer,
  };
  // What the next value is.
  enum class Slot : std::uint8_t {
    kNone,
    kTop,
    kApiVersion,
    kKind,
    kRequest,
    kUid,
    kOperation,
    kNamespace,
    kName,
    kRequestKind,
    kRequestKindKind,
    kRequestKindGroup,
    kObject,
    kObjectKind,
    kMeta,
    kMetaName,
    kMetaGenerateName,
    kSpec,
    kList,
    kImage,
    kOldObject,
    kOldSpec,
    kOldList,
    kOldImage,
  };
  struct Level {
    Frame frame = Frame::kSkip;
    Slot slot = Slot::kNone;  // an object's: from its last key
    std::size_t list = 0;     // kSpec/kOldSpec (its last key), kList, kContainer (and old)
    std::size_t index = 0;    // kList/kOldList: the next element's; a container: its own
    // kContainer/kOldContainer: its image, as last given.
    Type image = kAbsent;
    bool hit = false;
    ImageOverrides::const_iterator entry{};
  };

  static Slot slotFor(Frame frame, std::string_view k) {
    switch (frame) {
      case Frame::kReview:
        if (k == "apiVersion") return Slot::kApiVersion;
        if (k == "kind") return Slot::kKind;
        if (k == "request") return Slot::kRequest;
        return Slot::kNone;
      case Frame::kRequest:
        if (k == "uid") return Slot::kUid;
        if (k == "operation") return Slot::kOperation;
        if (k == "namespace") return Slot::kNamespace;
        if (k == "name") return Slot::kName;
        if (k == "kind") return Slot::kRequestKind;
        if (k == "object") return Slot::kObject;
        if (k == "oldObject") return Slot::kOldObject;
        return Slot::kNone;
      case Frame::kRequestKind:
        if (k == "kind") return Slot::kRequestKindKind;
        if (k == "group") return Slot::kRequestKindGroup;
        return Slot::kNone;
      case Frame::kObject:
        if (k == "kind") return Slot::kObjectKind;
        if (k == "metadata") return Slot::kMeta;
        if (k == "spec") return Slot::kSpec;
        return Slot::kNone;
      case Frame::kMeta:
        if (k == "name") return Slot::kMetaName;
        if (k == "generateName") return Slot::kMetaGenerateName;
        return Slot::kNone;
      case Frame::kSpec:
        return listOf(k) < kLists.size() ? Slot::kList : Slot::kNone;
      case Frame::kOldSpec:
        return listOf(k) < kLists.size() ? Slot::kOldList : Slot::kNone;
      case Frame::kOldObject:
        return k == "spec" ? Slot::kOldSpec : Slot::kNone;
      case Frame::kContainer:
        return k == "image" ? Slot::kImage : Slot::kNone;
      case Frame::kOldContainer:
        return k == "image" ? Slot::kOldImage : Slot::kNone;
      default:
        return Slot::kNone;
    }
  }

  static std::size_t listOf(std::string_view k) {
    for (std::size_t i = 0; i < kLists.size(); ++i) {
      if (kLists[i] == k) return i;
    }
    return kLists.size();
  }

  // A string value kept (the last one given counts: a repeated key overwrites).
  static void keep(Str& s, Type type, string_t* v) {
    s = {};
    s.type = type;
    if (v == nullptr) return;
    s.truncated = v->size() > kMaxKeptString;
    s.text = s.truncated ? v->substr(0, kMaxKeptString) : std::move(*v);
  }

  // The image of the container on top (v: its text when a string).
  void image(Type type, const string_t* v) {
    Level& l = stack_.back();
    l.image = type;
    l.hit = false;
    if (v != nullptr) {
      l.entry = overrides_.find(*v);
      l.hit = l.entry != overrides_.end();
    }
  }

  // A value of `type` for the container on top (v: a string's text). What was read under an
  // earlier value of the same key is forgotten. Returns the frame a container value opens.
  Frame record(Type type, string_t* v) {
    Level& l = stack_.back();
    auto& r = facts.request;
    auto frameIf = [type](Type want, Frame frame) { return type == want ? frame : Frame::kSkip; };
    if (l.frame == Frame::kList) {
      const std::size_t i = l.index++;
      ListFacts& list = r.object.spec.lists[l.list];
      if (type == Type::object) return Frame::kContainer;
      if (list.error.empty()) {
        list.error = fmt::format("request.object.spec.{}[{}] is {}, not an object", kLists[l.list],
                                 i, typeName(type));
        list.hits.clear();
      }
      return Frame::kSkip;
    }
    if (l.frame == Frame::kOldList) {
      ++l.index;
      return frameIf(Type::object, Frame::kOldContainer);
    }
    switch (l.slot) {
      case Slot::kTop:
        facts.top = type;
        return frameIf(Type::object, Frame::kReview);
      case Slot::kApiVersion:
        keep(facts.api_version, type, v);
        break;
      case Slot::kKind:
        keep(facts.kind, type, v);
        break;
      case Slot::kRequest:
        r = {};
        r.type = type;
        return frameIf(Type::object, Frame::kRequest);
      case Slot::kUid:
        keep(r.uid, type, v);
        break;
      case Slot::kOperation:
        keep(r.operation, type, v);
        break;
      case Slot::kNamespace:
        keep(r.ns, type, v);
        break;
      case Slot::kName:
        keep(r.name, type, v);
        break;
      case Slot::kRequestKind:
        r.kind = {};
        r.kind.type = type;
        return frameIf(Type::object, Frame::kRequestKind);
      case Slot::kRequestKindKind:
        keep(r.kind.kind, type, v);
        break;
      case Slot::kRequestKindGroup:
        keep(r.kind.group, type, v);
        break;
      case Slot::kObject:
        r.object = {};
        r.object.type = type;
        return frameIf(Type::object, Frame::kObject);
      case Slot::kObjectKind:
        keep(r.object.kind, type, v);
        break;
      case Slot::kMeta:
        r.object.meta = {};
        r.object.meta.type = type;
        return frameIf(Type::object, Frame::kMeta);
      case Slot::kMetaName:
        keep(r.object.meta.name, type, v);
        break;
      case Slot::kMetaGenerateName:
        keep(r.object.meta.generate_name, type, v);
        break;
      case Slot::kSpec:
        r.object.spec = {};
        r.object.spec.type = type;
        return frameIf(Type::object, Frame::kSpec);
      case Slot::kList:
        r.object.spec.lists[l.list] = {};
        r.object.spec.lists[l.list].type = type;
        return frameIf(Type::array, Frame::kList);
      case Slot::kImage:
      case Slot::kOldImage:
        image(type, v);
        break;
      case Slot::kOldObject:
        r.old = {};
        r.old.type = type;
        return frameIf(Type::object, Frame::kOldObject);
      case Slot::kOldSpec:
        r.old.spec = {};
        r.old.spec.type = type;
        return frameIf(Type::object, Frame::kOldSpec);
      case Slot::kOldList:
        r.old.spec.lists[l.list] = {};
        r.old.spec.lists[l.list].type = type;
        return frameIf(Type::array, Frame::kOldList);
      case Slot::kNone:
        break;
    }
    return Frame::kSkip;
  }

  bool scalar(Type type, string_t* v) {
    if (stack_.back().frame != Frame::kSkip) record(type, v);
    return true;
  }

  bool open(Type type) {
    const Level& parent = stack_.back();
    if (parent.frame == Frame::kSkip) {
      stack_.push_back({.frame = Frame::kSkip});
      return true;
    }
    const std::size_t list = parent.list;
    const std::size_t index = parent.index;  // an element's own, before record() counts it
    const Frame child = record(type, nullptr);
    stack_.push_back({.frame = child, .list = list, .index = index});
    return true;
  }

  bool close() {
    const Level done = stack_.back();
    stack_.pop_back();
    auto& r = facts.request;
    if (done.frame == Frame::kContainer) {
      ListFacts& list = r.object.spec.lists[done.list];
      if (!list.error.empty()) return true;
      if (done.image == kAbsent || done.image == Type::null) return true;  // the API refuses it
      if (done.image != Type::string) {
        list.error = fmt::format("request.object.spec.{}[{}].image is {}, not a string",
                                 kLists[done.list], done.index, typeName(done.image));
        list.hits.clear();
        return true;
      }
      // One more than the limit is enough to refuse the pod (see decide()).
      if (done.hit && list.hits.size() <= kMaxImageChanges) {
        list.hits.push_back({.index = done.index, .entry = done.entry});
      }
    } else if (done.frame == Frame::kOldContainer && done.hit) {
      r.old.spec.lists[done.list].hits.push_back({.index = done.index, .entry = done.entry});
    }
    return true;
  }

  const ImageOverrides& overrides_;
  std::vector<Level> stack_{};
};

std::string podName(const Facts::Request& request) {
  auto text = [](const Str& s) {
    return s.type == Type::string ? s.text + (s.truncated ? "..." : "") : std::string();
  };
  const std::string ns = text(request.ns);
  std::string name = text(request.name);
  if (name.empty() && request.object.meta.type == Type::object) {
    name = text(request.object.meta.name);
    if (name.empty() && request.object.meta.generate_name.type == Type::string) {
      name = text(request.object.meta.generate_name) + "*";
    }
  }
  return base::escapeForMessage(ns.empty() ? name : ns + "/" + name);
}

// What the request asks, from the facts read (`request` is an object with a string uid), as
// changes in `out`; a one-line refusal when something has the wrong shape.
std::optional<std::string> decide(const Facts::Request& request, ReviewOutcome& out) {
  if (request.operation.type == Type::string) out.operation = request.operation.text;
  if (request.kind.type != kAbsent) {
    if (request.kind.type != Type::object) {
      return fmt::format("request.kind is {}, not an object", typeName(request.kind.type));
    }
    const Str& k = request.kind.kind;
    const Str& g = request.kind.group;
    const bool pod = k.is("Pod") && (g.type == kAbsent || g.is(""));
    if (!pod) {
      return fmt::format("request.kind is {}/{}, not a core Pod",
                         g.type == kAbsent ? std::string("\"\"") : describe(g),
                         k.type == kAbsent ? std::string("missing") : describe(k));
    }
  }
  const auto& object = request.object;
  if (object.type == kAbsent || object.type == Type::null) return "request.object is missing";
  if (object.type != Type::object) {
    return fmt::format("request.object is {}, not an object", typeName(object.type));
  }
  out.pod = podName(request);
  if (object.kind.type != kAbsent && !object.kind.is("Pod")) {
    return fmt::format("request.object.kind is {}, not Pod", describe(object.kind));
  }
  if (object.spec.type == kAbsent) return "request.object.spec is missing";
  if (object.spec.type != Type::object) {
    return fmt::format("request.object.spec is {}, not an object", typeName(object.spec.type));
  }
  const bool update = request.operation.is("UPDATE") && request.old.type == Type::object &&
                      request.old.spec.type == Type::object;
  for (std::size_t l = 0; l < kLists.size(); ++l) {
    const ListFacts& list = object.spec.lists[l];
    if (list.type == kAbsent || list.type == Type::null) continue;
    if (list.type != Type::array) {
      return fmt::format("request.object.spec.{} is {}, not an array", kLists[l],
                         typeName(list.type));
    }
    if (!list.error.empty()) return list.error;
    if (list.hits.size() > kMaxImageChanges) {
      return fmt::format("request.object.spec.{} has more than {} images with an override",
                         kLists[l], kMaxImageChanges);
    }
    const OldListFacts& old = request.old.spec.lists[l];
    const bool old_array = update && old.type == Type::array;
    auto old_hit = old.hits.begin();
    for (const Hit& hit : list.hits) {
      // An image the update does not change (the same at this index in oldObject) is left alone.
      if (old_array) {
        while (old_hit != old.hits.end() && old_hit->index < hit.index) ++old_hit;
        if (old_hit != old.hits.end() && old_hit->index == hit.index &&
            old_hit->entry == hit.entry) {
          continue;
        }
      }
      if (out.changes.size() == kMaxImageChanges) {
        return fmt::format("the pod has more than {} images to replace", kMaxImageChanges);
      }
      out.changes.push_back({.path = fmt::format("/spec/{}/{}/image", kLists[l], hit.index),
                             .from = hit.entry->first,
                             .to = hit.entry->second});
    }
  }
  return std::nullopt;
}

std::string respond(std::string_view api_version, const std::string& uid,
                    const std::vector<ImageChange>& changes) {
  json response = {{"uid", uid}, {"allowed", true}};
  if (!changes.empty()) {
    json patch = json::array();
    for (const ImageChange& c : changes) {
      patch.push_back({{"op", "replace"}, {"path", c.path}, {"value", c.to}});
    }
    response["patchType"] = "JSONPatch";
    response["patch"] = base64(kube::jsonDump(patch));
  }
  const json review = {
      {"apiVersion", api_version}, {"kind", "AdmissionReview"}, {"response", std::move(response)}};
  // A uid is a string the parser checked as UTF-8; replace guards anything else.
  return kube::jsonDump(review);
}

}  // namespace

ImageOverrides parseImageOverrides(const std::vector<std::string>& entries) {
  ImageOverrides out;
  for (const std::string& entry : entries) {
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) continue;
    out.insert_or_assign(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return out;
}

ReviewOutcome reviewPod(std::string_view body, const ImageOverrides& overrides) {
  ReviewOutcome out;
  std::string_view api_version = kV1;
  auto refuse = [&](std::string message) {
    out.changes.clear();
    out.error = std::move(message);
    out.response = respond(api_version, out.uid, {});
    return std::move(out);
  };
  if (body.size() > kMaxReviewBytes) {
    return refuse(fmt::format("the request body is {} bytes, over the {} limit", body.size(),
                              base::describeBytes(kMaxReviewBytes)));
  }
  if (kube::jsonNestedDeeperThan(body)) {
    return refuse(
        fmt::format("the request body is nested deeper than {} levels", kube::kMaxJsonDepth));
  }
  Collector collector(overrides);
  bool parsed = false;
  try {
    parsed = json::sax_parse(body.begin(), body.end(), &collector);
  } catch (const std::exception& e) {
    // nlohmann throws only on misuse; a bug here still answers.
    return refuse("internal error: " + base::escapeForMessage(e.what()));
  }
  if (!parsed) {
    return refuse("the request body is not JSON: " + base::escapeForMessage(collector.error));
  }
  const Facts& f = collector.facts;
  if (f.top != Type::object) {
    return refuse(fmt::format("the request body is a JSON {}, not an AdmissionReview object",
                              typeName(f.top)));
  }
  const Facts::Request& request = f.request;
  // The uid first, so that every later refusal can echo it.
  if (request.type == Type::object && request.uid.type == Type::string && !request.uid.truncated) {
    out.uid = request.uid.text;
  }
  if (f.api_version.type != Type::string) {
    return refuse("apiVersion is missing or not a string (want admission.k8s.io/v1)");
  }
  if (f.api_version.is(kV1beta1)) {
    api_version = kV1beta1;  // answered in its own version, as the apiserver requires
    return refuse("admission.k8s.io/v1beta1 is not served (the configuration asks for v1)");
  }
  if (!f.api_version.is(kV1)) {
    return refuse(fmt::format("apiVersion is {}, not admission.k8s.io/v1",
                              base::quoteForMessage(f.api_version.text)));
  }
  if (!f.kind.is("AdmissionReview")) return refuse("kind is not AdmissionReview");
  if (request.type == kAbsent || request.type == Type::null) return refuse("request is missing");
  if (request.type != Type::object) {
    return refuse(fmt::format("request is {}, not an object", typeName(request.type)));
  }
  if (request.uid.type == kAbsent) return refuse("request.uid is missing");
  if (request.uid.type != Type::string) {
    return refuse(fmt::format("request.uid is {}, not a string", typeName(request.uid.type)));
  }
  if (request.uid.truncated) {
    return refuse(fmt::format("request.uid is longer than {} bytes", kMaxKeptString));
  }
  if (out.uid.empty()) return refuse("request.uid is empty");
  if (auto refusal = decide(request, out)) return refuse(std::move(*refusal));
  try {
    out.response = respond(api_version, out.uid, out.changes);
  } catch (const std::exception& e) {
    return refuse("internal error: " + base::escapeForMessage(e.what()));
  }
  return out;
}

}  // namespace ekco::agent::admission
