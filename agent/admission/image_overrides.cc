#include "agent/admission/image_overrides.h"

#include <array>
#include <exception>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "kube/json_depth.h"
#include "kube/json_fields.h"

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

// The JSON type's name, for messages.
std::string_view typeName(const json& v) { return v.type_name(); }

// A value for messages: a string quoted, anything else by its type.
std::string describe(const json& v) {
  return v.is_string() ? base::quoteForMessage(v.get_ref<const std::string&>())
                       : std::string(typeName(v));
}

// A member of `object` (an object), or null when absent.
const json* member(const json& object, std::string_view key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// What the handler found wrong; the message is built with quoted values only.
struct Refusal {
  std::string message;
};

// The images of one list of oldObject's spec (for UPDATE), index by index; "" where absent.
std::vector<std::string> imagesOf(const json* old_spec, std::string_view list) {
  std::vector<std::string> out;
  if (old_spec == nullptr || !old_spec->is_object()) return out;
  const json* items = member(*old_spec, list);
  if (items == nullptr || !items->is_array()) return out;
  for (const json& c : *items) {
    const json* image = c.is_object() ? member(c, "image") : nullptr;
    out.push_back(image != nullptr && image->is_string() ? image->get<std::string>() : "");
  }
  return out;
}

std::string podName(const json& request, const json& object) {
  std::string ns;
  if (const json* v = member(request, "namespace"); v != nullptr && v->is_string()) {
    ns = v->get<std::string>();
  }
  std::string name;
  if (const json* v = member(request, "name"); v != nullptr && v->is_string()) {
    name = v->get<std::string>();
  }
  if (name.empty()) {
    if (const json* meta = member(object, "metadata"); meta != nullptr && meta->is_object()) {
      if (const json* n = member(*meta, "name"); n != nullptr && n->is_string()) {
        name = n->get<std::string>();
      }
      if (name.empty()) {
        if (const json* g = member(*meta, "generateName"); g != nullptr && g->is_string()) {
          name = g->get<std::string>() + "*";
        }
      }
    }
  }
  return base::escapeForMessage(ns.empty() ? name : ns + "/" + name);
}

// Builds the patch for `request` (already known to be an object with a string uid) into `out`.
// A Refusal when something has the wrong shape.
std::optional<Refusal> decide(const json& request, const ImageOverrides& overrides,
                              ReviewOutcome& out) {
  if (const json* op = member(request, "operation"); op != nullptr && op->is_string()) {
    out.operation = op->get<std::string>();
  }
  if (const json* kind = member(request, "kind"); kind != nullptr) {
    if (!kind->is_object()) {
      return Refusal{fmt::format("request.kind is {}, not an object", typeName(*kind))};
    }
    const json* k = member(*kind, "kind");
    const json* g = member(*kind, "group");
    const bool pod = k != nullptr && k->is_string() && *k == "Pod" &&
                     (g == nullptr || (g->is_string() && g->get_ref<const std::string&>().empty()));
    if (!pod) {
      return Refusal{fmt::format("request.kind is {}/{}, not a core Pod",
                                 g == nullptr ? std::string("\"\"") : describe(*g),
                                 k == nullptr ? std::string("missing") : describe(*k))};
    }
  }
  const json* object = member(request, "object");
  if (object == nullptr || object->is_null()) return Refusal{"request.object is missing"};
  if (!object->is_object()) {
    return Refusal{fmt::format("request.object is {}, not an object", typeName(*object))};
  }
  out.pod = podName(request, *object);
  if (const json* kind = member(*object, "kind"); kind != nullptr) {
    if (!kind->is_string() || *kind != "Pod") {
      return Refusal{fmt::format("request.object.kind is {}, not Pod", describe(*kind))};
    }
  }
  const json* spec = member(*object, "spec");
  if (spec == nullptr) return Refusal{"request.object.spec is missing"};
  if (!spec->is_object()) {
    return Refusal{fmt::format("request.object.spec is {}, not an object", typeName(*spec))};
  }
  const json* old_spec = nullptr;
  if (out.operation == "UPDATE") {
    if (const json* old = member(request, "oldObject"); old != nullptr && old->is_object()) {
      old_spec = member(*old, "spec");
    }
  }
  for (std::string_view list : kLists) {
    const json* items = member(*spec, list);
    if (items == nullptr || items->is_null()) continue;
    if (!items->is_array()) {
      return Refusal{
          fmt::format("request.object.spec.{} is {}, not an array", list, typeName(*items))};
    }
    const std::vector<std::string> old_images = imagesOf(old_spec, list);
    for (std::size_t i = 0; i < items->size(); ++i) {
      const json& container = (*items)[i];
      if (!container.is_object()) {
        return Refusal{fmt::format("request.object.spec.{}[{}] is {}, not an object", list, i,
                                   typeName(container))};
      }
      const json* image = member(container, "image");
      if (image == nullptr || image->is_null()) continue;  // the API refuses it; not ours to say
      if (!image->is_string()) {
        return Refusal{fmt::format("request.object.spec.{}[{}].image is {}, not a string", list, i,
                                   typeName(*image))};
      }
      const std::string& current = image->get_ref<const std::string&>();
      auto hit = overrides.find(current);
      if (hit == overrides.end()) continue;
      if (i < old_images.size() && old_images[i] == current) continue;  // unchanged by the update
      out.changes.push_back(
          {.path = fmt::format("/spec/{}/{}/image", list, i), .from = current, .to = hit->second});
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
  json review;
  try {
    review = json::parse(body);
  } catch (const std::exception& e) {
    return refuse("the request body is not JSON: " + base::escapeForMessage(e.what()));
  }
  try {
    if (!review.is_object()) {
      return refuse(fmt::format("the request body is a JSON {}, not an AdmissionReview object",
                                typeName(review)));
    }
    const json* version = member(review, "apiVersion");
    const json* request = member(review, "request");
    // The uid first, so that every later refusal can echo it.
    if (request != nullptr && request->is_object()) {
      if (const json* uid = member(*request, "uid"); uid != nullptr && uid->is_string()) {
        out.uid = uid->get<std::string>();
      }
    }
    if (version == nullptr || !version->is_string()) {
      return refuse("apiVersion is missing or not a string (want admission.k8s.io/v1)");
    }
    const std::string& v = version->get_ref<const std::string&>();
    if (v == kV1beta1) {
      api_version = kV1beta1;  // answered in its own version, as the apiserver requires
      return refuse("admission.k8s.io/v1beta1 is not served (the configuration asks for v1)");
    }
    if (v != kV1) {
      return refuse(
          fmt::format("apiVersion is {}, not admission.k8s.io/v1", base::quoteForMessage(v)));
    }
    if (const json* kind = member(review, "kind");
        kind == nullptr || !kind->is_string() || *kind != "AdmissionReview") {
      return refuse("kind is not AdmissionReview");
    }
    if (request == nullptr || request->is_null()) return refuse("request is missing");
    if (!request->is_object()) {
      return refuse(fmt::format("request is {}, not an object", typeName(*request)));
    }
    const json* uid = member(*request, "uid");
    if (uid == nullptr) return refuse("request.uid is missing");
    if (!uid->is_string()) {
      return refuse(fmt::format("request.uid is {}, not a string", typeName(*uid)));
    }
    if (out.uid.empty()) return refuse("request.uid is empty");
    if (auto refusal = decide(*request, overrides, out)) return refuse(std::move(refusal->message));
    out.response = respond(api_version, out.uid, out.changes);
    return out;
  } catch (const std::exception& e) {
    // nlohmann throws only on misuse; a bug here still answers.
    return refuse("internal error: " + base::escapeForMessage(e.what()));
  }
}

}  // namespace ekco::agent::admission
