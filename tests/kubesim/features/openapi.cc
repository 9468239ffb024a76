#include "tests/kubesim/features/openapi.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "tests/kubesim/apply/patch.h"
#include "tests/kubesim/features/api_types.h"

namespace ekco::kubesim::openapi {
namespace {

using api_types::Field;
using api_types::isScalar;
using nlohmann::json;

enum class Version { kV2, kV3 };

// Both documents' info, as kube-apiserver 1.32 writes it.
const json& info() {
  static const json value = {{"title", "Kubernetes"}, {"version", "v1.32.4"}};
  return value;
}

constexpr std::string_view kObjectMeta = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta";
constexpr std::string_view kPatchName = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

// A Go type's definition name, as kube-openapi names it: its package path reversed at the domain
// ("k8s.io.api.core.v1.Pod" → "io.k8s.api.core.v1.Pod").
std::string definitionName(std::string_view message) {
  constexpr std::string_view prefix = "k8s.io.";
  if (message.starts_with(prefix)) return "io.k8s." + std::string(message.substr(prefix.size()));
  return std::string(message);
}

// A custom resource's, as apiextensions names it: the group reversed, then version and kind
// ("ceph.rook.io", v1, CephCluster → "io.rook.ceph.v1.CephCluster").
std::string customDefinitionName(const ResourceInfo& r) {
  std::string out;
  std::string_view group = r.group;
  while (!group.empty()) {
    const auto dot = group.rfind('.');
    const std::string_view label = dot == std::string_view::npos ? group : group.substr(dot + 1);
    if (!out.empty()) out += '.';
    out += label;
    group = dot == std::string_view::npos ? std::string_view() : group.substr(0, dot);
  }
  return out + "." + r.version + "." + r.kind;
}

// The kinds with a message in the type table; the others (custom resources, kinds kubesim serves
// without a schema) get a definition of their own.
bool hasMessage(const ResourceInfo& r) {
  return r.takesStrategicMerge() &&
         api_types::jsonFields(api_types::messageOf(r.apiVersion(), r.kind)) != nullptr;
}

std::string kindDefinitionName(const ResourceInfo& r) {
  if (r.takesStrategicMerge()) {
    return definitionName(api_types::messageOf(r.apiVersion(), r.kind));
  }
  return customDefinitionName(r);
}

// {"$ref": ...} to a definition, where each version keeps them.
json plainRef(std::string_view name, Version v) {
  return {{"$ref",
           (v == Version::kV3 ? "#/components/schemas/" : "#/definitions/") + std::string(name)}};
}

// A property's reference to a definition: v3 wraps it in allOf, as kube-openapi writes it.
json ref(std::string_view name, Version v) {
  if (v == Version::kV3) return {{"allOf", json::array({plainRef(name, v)})}};
  return plainRef(name, v);
}

json scalar(std::string_view type) {
  if (type == "bytes") return {{"type", "string"}, {"format", "byte"}};
  if (type == "bool") return {{"type", "boolean"}};
  if (type == "int32" || type == "uint32" || type == "sint32" || type == "fixed32") {
    return {{"type", "integer"}, {"format", "int32"}};
  }
  if (type == "int64" || type == "uint64" || type == "sint64" || type == "fixed64") {
    return {{"type", "integer"}, {"format", "int64"}};
  }
  if (type == "double") return {{"type", "number"}, {"format", "double"}};
  if (type == "float") return {{"type", "number"}, {"format", "float"}};
  return {{"type", "string"}};
}

// The definitions of the types whose JSON form is not their message's fields, as their
// OpenAPISchemaType / OpenAPIV3OneOfTypes say.
json opaqueDefinition(std::string_view type, Version v) {
  if (type.ends_with(".Time") || type.ends_with(".MicroTime")) {
    return {{"type", "string"}, {"format", "date-time"}};
  }
  if (type.ends_with(".Quantity")) {
    if (v == Version::kV3)
      return {{"oneOf", json::array({{{"type", "string"}}, {{"type", "number"}}})}};
    return {{"type", "string"}};
  }
  if (type.ends_with(".IntOrString")) {
    if (v == Version::kV3) {
      return {{"oneOf", json::array({{{"type", "integer"}}, {{"type", "string"}}})}};
    }
    return {{"type", "string"}, {"format", "int-or-string"}};
  }
  return {{"type", "object"}};  // FieldsV1, RawExtension
}

json elementSchema(std::string_view type, Version v) {
  if (isScalar(type)) return scalar(type);
  // certificates/v1 ExtraValue is a []string.
  if (type.ends_with(".ExtraValue")) return {{"type", "array"}, {"items", {{"type", "string"}}}};
  return ref(definitionName(type), v);
}

json fieldSchema(std::string_view message, const Field& f, Version v) {
  const auto patch = patchStrategyOf(message, f.name);
  if (f.label == 'r') {
    json out = {{"type", "array"}, {"items", elementSchema(f.type, v)}};
    // A merge key only means something for a list of objects.
    if (patch && (patch->merge_key.empty() || !isScalar(f.type))) {
      out["x-kubernetes-patch-strategy"] = patch->strategy;
      if (!patch->merge_key.empty()) out["x-kubernetes-patch-merge-key"] = patch->merge_key;
    }
    return out;
  }
  if (f.label == 'm') {
    return {{"type", "object"}, {"additionalProperties", elementSchema(f.value_type, v)}};
  }
  json out = elementSchema(f.type, v);
  if (patch && patch->merge_key.empty() && !isScalar(f.type)) {
    out["x-kubernetes-patch-strategy"] = patch->strategy;
  }
  return out;
}

// Adds `type`'s definition and those of every type it reaches.
void addMessage(json& definitions, std::string_view type, Version v) {
  std::vector<std::string> todo{std::string(type)};
  while (!todo.empty()) {
    const std::string t = std::move(todo.back());
    todo.pop_back();
    const std::string name = definitionName(t);
    if (definitions.contains(name)) continue;
    if (api_types::isOpaque(t)) {
      definitions[name] = opaqueDefinition(t, v);
      continue;
    }
    const auto* fields = api_types::jsonFields(t);
    if (fields == nullptr) continue;
    json properties = json::object();
    for (const auto& [field_name, field] : *fields) {
      properties[std::string(field_name)] = fieldSchema(t, *field, v);
      for (const std::string& x : {field->type, field->value_type}) {
        if (!x.empty() && !isScalar(x) && !x.ends_with(".ExtraValue")) todo.push_back(x);
      }
    }
    definitions[name] = {{"type", "object"}, {"properties", std::move(properties)}};
  }
}

// A CRD schema as OpenAPI v2 has room for, as apiextensions' ToStructuralOpenAPIV2 makes it:
// without v3's allOf, oneOf, anyOf and not; a nullable or x-kubernetes-preserve-unknown-fields
// node untyped, without items or properties (kubectl's v2 parser breaks on them there). What no
// v2 reader takes is dropped too: a $ref (apiextensions refuses it), an array's type when it has
// no items schema.
void toV2(json& schema) {
  if (!schema.is_object()) return;
  for (const char* key : {"allOf", "oneOf", "anyOf", "not", "$ref"}) schema.erase(key);
  const bool nullable = schema.value("nullable", false) == true;
  const bool open = schema.value("x-kubernetes-preserve-unknown-fields", false) == true;
  schema.erase("nullable");
  if (nullable || open) {
    for (const char* key : {"type", "items", "properties"}) schema.erase(key);
  }
  if (auto it = schema.find("properties"); it != schema.end()) {
    if (it->is_object()) {
      for (auto& [name, sub] : it->items()) toV2(sub);
    } else {
      schema.erase(it);
    }
  }
  if (auto it = schema.find("items"); it != schema.end()) {
    if (it->is_object()) {
      toV2(*it);
    } else {
      schema.erase(it);
    }
  }
  if (auto it = schema.find("additionalProperties"); it != schema.end() && it->is_object()) {
    toV2(*it);
  }
  if (schema.value("type", json()) == "array" && !schema.contains("items")) schema.erase("type");
}

// A kind outside the type table: a custom resource by its CRD's schema, another kind as what
// kubesim checks of it (its metadata). A CRD's schema comes from its author: whatever its shape,
// the definition is an object with object properties.
json ownDefinition(const ResourceInfo& r, Version v) {
  json schema = json::object();
  if (r.crd_version != nullptr) {
    schema =
        r.crd_version->value("schema", json::object()).value("openAPIV3Schema", json::object());
    if (!schema.is_object()) schema = {{"x-kubernetes-preserve-unknown-fields", true}};
    if (v == Version::kV2) toV2(schema);
  } else {
    schema["x-kubernetes-preserve-unknown-fields"] = true;
  }
  schema["type"] = "object";
  if (!schema.contains("properties") || !schema["properties"].is_object()) {
    schema["properties"] = json::object();
  }
  schema["properties"]["metadata"] = ref(definitionName(kObjectMeta), v);
  schema.erase("x-kubernetes-group-version-kind");  // describe() says which kind it is
  return schema;
}

json gvkOf(const ResourceInfo& r) {
  return {{"group", r.group}, {"version", r.version}, {"kind", r.kind}};
}

bool patchable(const ResourceInfo& r) {
  return r.verbs.empty() || std::find(r.verbs.begin(), r.verbs.end(), "patch") != r.verbs.end();
}

std::vector<std::string> patchTypes(const ResourceInfo& r) {
  std::vector<std::string> types = {"application/apply-patch+yaml", "application/json-patch+json",
                                    "application/merge-patch+json"};
  // Only where the schema has the patch strategies: for a built-in kind outside the type table,
  // kubectl apply then builds its patch from its own compiled-in type, as against a real server,
  // instead of from a schema that knows no merge keys.
  if (hasMessage(r)) types.push_back("application/strategic-merge-patch+json");
  return types;
}

// "api/v1", "apis/apps/v1": where a group-version is served, under / and under /openapi/v3/.
std::string groupVersionPath(const ResourceInfo& r) {
  return r.group.empty() ? "api/" + r.version : "apis/" + r.group + "/" + r.version;
}

std::string itemPath(const ResourceInfo& r) {
  return "/" + groupVersionPath(r) + (r.namespaced ? "/namespaces/{namespace}/" : "/") + r.plural +
         "/{name}";
}

// The PATCH operation of a resource's item path: the one kubectl asks whether it takes
// fieldValidation (then it leaves validation to the server) and which patch types it takes.
json patchOperation(const ResourceInfo& r, Version v) {
  json op = {{"operationId", "patch" + r.kind},
             {"x-kubernetes-action", "patch"},
             {"x-kubernetes-group-version-kind", gvkOf(r)}};
  const json kind_ref = plainRef(kindDefinitionName(r), v);
  if (v == Version::kV3) {
    json content = json::object();
    for (const std::string& type : patchTypes(r)) {
      content[type] = {{"schema", plainRef(kPatchName, v)}};
    }
    op["parameters"] = {{{"name", "fieldValidation"},
                         {"in", "query"},
                         {"schema", {{"type", "string"}, {"uniqueItems", true}}}}};
    op["requestBody"] = {{"content", content}, {"required", true}};
    op["responses"] = {
        {"200",
         {{"description", "OK"}, {"content", {{"application/json", {{"schema", kind_ref}}}}}}}};
  } else {
    op["consumes"] = patchTypes(r);
    op["produces"] = {"application/json"};
    op["parameters"] = {
        {{"name", "fieldValidation"}, {"in", "query"}, {"type", "string"}, {"uniqueItems", true}}};
    op["responses"] = {{"200", {{"description", "OK"}, {"schema", kind_ref}}}};
  }
  return op;
}

// The definitions and paths of `resources`; every served kind's definition carries apiVersion,
// kind and its x-kubernetes-group-version-kind wherever it appears.
std::pair<json, json> describe(const std::vector<ResourceInfo>& all,
                               const std::vector<const ResourceInfo*>& resources, Version v) {
  json definitions = json::object();
  json paths = json::object();
  for (const ResourceInfo* r : resources) {
    if (hasMessage(*r)) {
      addMessage(definitions, api_types::messageOf(r->apiVersion(), r->kind), v);
    } else {
      definitions[kindDefinitionName(*r)] = ownDefinition(*r, v);
      addMessage(definitions, kObjectMeta, v);
    }
    if (patchable(*r)) paths[itemPath(*r)] = {{"patch", patchOperation(*r, v)}};
  }
  if (v == Version::kV3) definitions[std::string(kPatchName)] = {{"type", "object"}};
  std::set<std::pair<std::string, std::string>> seen;  // a kind served in two resources
  for (const ResourceInfo& r : all) {
    auto it = definitions.find(kindDefinitionName(r));
    if (it == definitions.end() || !seen.emplace(r.apiVersion(), r.kind).second) continue;
    json& properties = (*it)["properties"];
    if (!properties.contains("apiVersion")) properties["apiVersion"] = {{"type", "string"}};
    if (!properties.contains("kind")) properties["kind"] = {{"type", "string"}};
    (*it)["x-kubernetes-group-version-kind"].push_back(gvkOf(r));
  }
  return {std::move(definitions), std::move(paths)};
}

std::vector<const ResourceInfo*> inGroupVersion(const std::vector<ResourceInfo>& all,
                                                std::string_view group, std::string_view version) {
  std::vector<const ResourceInfo*> out;
  for (const ResourceInfo& r : all) {
    if (r.group == group && r.version == version) out.push_back(&r);
  }
  return out;
}

// A hash of what a group-version's document is made of: its resources and their CRD schemas (the
// built-in kinds' schemas do not change while kubesim runs).
std::string groupVersionHash(const std::vector<const ResourceInfo*>& resources) {
  json makings = json::array();
  for (const ResourceInfo* r : resources) {
    makings.push_back({r->plural, r->kind, r->crd_version != nullptr ? *r->crd_version : json()});
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016zX", std::hash<std::string>{}(makings.dump()));
  return buf;
}

// The protobuf wire format, as much as gnostic's openapi_v2 messages need.
class Writer {
 public:
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  void bytes(int field, std::string_view s) {
    tag(field, 2);
    varint(s.size());
    out_ += s;
  }
  void boolean(int field, bool b) {
    tag(field, 0);
    varint(b ? 1 : 0);
  }
  void integer(int field, std::int64_t v) {
    tag(field, 0);
    varint(static_cast<std::uint64_t>(v));
  }
  void number(int field, double d) {
    tag(field, 1);
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    for (int i = 0; i < 8; ++i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  const std::string& str() const { return out_; }

 private:
  void tag(int field, int wire) {
    varint(static_cast<std::uint64_t>(field) << 3 | static_cast<unsigned>(wire));
  }
  std::string out_;
};

// An object's member, or an empty object: read in place, not copied as json::value would.
const json& memberOf(const json& object, const char* key) {
  static const json empty = json::object();
  auto it = object.find(key);
  return it == object.end() ? empty : *it;
}

// openapi_v2.Any: the value as YAML text (JSON is YAML).
std::string any(const json& value) {
  Writer w;
  w.bytes(2, value.dump());
  return w.str();
}

// openapi_v2.NamedAny, for a vendor extension.
std::string namedAny(const std::string& name, const json& value) {
  Writer w;
  w.bytes(1, name);
  w.bytes(2, any(value));
  return w.str();
}

std::string schemaMessage(const json& s);

std::string namedSchema(const std::string& name, const json& s) {
  Writer w;
  w.bytes(1, name);
  w.bytes(2, schemaMessage(s));
  return w.str();
}

// openapi_v2.Schema; keywords OpenAPI v2 has no room for are left out.
std::string schemaMessage(const json& s) {
  Writer w;
  if (!s.is_object()) return w.str();
  static const std::map<std::string, int, std::less<>> strings = {
      {"$ref", 1}, {"format", 2}, {"title", 3}, {"description", 4}, {"pattern", 13}};
  static const std::map<std::string, int, std::less<>> integers = {
      {"maxLength", 11}, {"minLength", 12},     {"maxItems", 14},
      {"minItems", 15},  {"maxProperties", 17}, {"minProperties", 18}};
  static const std::map<std::string, int, std::less<>> numbers = {
      {"multipleOf", 6}, {"maximum", 7}, {"minimum", 9}};
  static const std::map<std::string, int, std::less<>> booleans = {
      {"exclusiveMaximum", 8}, {"exclusiveMinimum", 10}, {"uniqueItems", 16}, {"readOnly", 27}};
  for (const auto& [key, value] : s.items()) {
    if (auto f = strings.find(key); f != strings.end() && value.is_string()) {
      w.bytes(f->second, value.get<std::string>());
    } else if (auto i = integers.find(key); i != integers.end() && value.is_number_integer()) {
      w.integer(i->second, value.get<std::int64_t>());
    } else if (auto n = numbers.find(key); n != numbers.end() && value.is_number()) {
      w.number(n->second, value.get<double>());
    } else if (auto b = booleans.find(key); b != booleans.end() && value.is_boolean()) {
      w.boolean(b->second, value.get<bool>());
    } else if (key == "default" || key == "example") {
      w.bytes(key == "default" ? 5 : 30, any(value));
    } else if (key == "required" && value.is_array()) {
      for (const json& r : value) {
        if (r.is_string()) w.bytes(19, r.get<std::string>());
      }
    } else if (key == "enum" && value.is_array()) {
      for (const json& e : value) w.bytes(20, any(e));
    } else if (key == "additionalProperties") {
      Writer item;  // AdditionalPropertiesItem: schema = 1 | boolean = 2
      if (value.is_boolean()) {
        item.boolean(2, value.get<bool>());
      } else {
        item.bytes(1, schemaMessage(value));
      }
      w.bytes(21, item.str());
    } else if (key == "type") {
      Writer type;  // TypeItem
      if (value.is_string()) type.bytes(1, value.get<std::string>());
      if (value.is_array()) {
        for (const json& t : value) {
          if (t.is_string()) type.bytes(1, t.get<std::string>());
        }
      }
      w.bytes(22, type.str());
    } else if (key == "items") {
      Writer items;  // ItemsItem
      if (value.is_array()) {
        for (const json& element : value) items.bytes(1, schemaMessage(element));
      } else {
        items.bytes(1, schemaMessage(value));
      }
      w.bytes(23, items.str());
    } else if (key == "allOf" && value.is_array()) {
      for (const json& a : value) w.bytes(24, schemaMessage(a));
    } else if (key == "properties" && value.is_object()) {
      Writer properties;  // Properties
      for (const auto& [name, sub] : value.items()) properties.bytes(1, namedSchema(name, sub));
      w.bytes(25, properties.str());
    } else if (key.starts_with("x-")) {
      w.bytes(31, namedAny(key, value));
    }
  }
  return w.str();
}

// openapi_v2.Operation, from patchOperation's v2 form.
std::string operationMessage(const json& op) {
  Writer w;
  for (const json& p : op.value("produces", json::array())) w.bytes(6, p.get<std::string>());
  for (const json& c : op.value("consumes", json::array())) w.bytes(7, c.get<std::string>());
  w.bytes(5, op.value("operationId", std::string()));
  for (const json& p : op.value("parameters", json::array())) {
    Writer query;  // QueryParameterSubSchema
    query.bytes(2, p.value("in", std::string()));
    query.bytes(4, p.value("name", std::string()));
    query.bytes(6, p.value("type", std::string()));
    query.boolean(20, p.value("uniqueItems", false));
    Writer non_body;  // NonBodyParameter
    non_body.bytes(3, query.str());
    Writer parameter;  // Parameter
    parameter.bytes(2, non_body.str());
    Writer item;  // ParametersItem
    item.bytes(1, parameter.str());
    w.bytes(8, item.str());
  }
  Writer responses;  // Responses
  for (const auto& [code, response] : memberOf(op, "responses").items()) {
    Writer r;  // Response
    r.bytes(1, response.value("description", std::string()));
    if (response.contains("schema")) {
      Writer item;  // SchemaItem
      item.bytes(1, schemaMessage(response["schema"]));
      r.bytes(2, item.str());
    }
    Writer value;  // ResponseValue
    value.bytes(1, r.str());
    Writer named;  // NamedResponseValue
    named.bytes(1, code);
    named.bytes(2, value.str());
    responses.bytes(1, named.str());
  }
  w.bytes(9, responses.str());
  for (const auto& [key, value] : op.items()) {
    if (key.starts_with("x-")) w.bytes(13, namedAny(key, value));
  }
  return w.str();
}

}  // namespace

json v3Index(const std::vector<ResourceInfo>& all) {
  std::map<std::string, std::vector<const ResourceInfo*>> by_gv;
  for (const ResourceInfo& r : all) {
    by_gv[groupVersionPath(r)].push_back(&r);
  }
  json paths = json::object();
  for (const auto& [gv, resources] : by_gv) {
    paths[gv] = {
        {"serverRelativeURL", "/openapi/v3/" + gv + "?hash=" + groupVersionHash(resources)}};
  }
  return {{"paths", paths}};
}

std::optional<json> v3GroupVersion(const std::vector<ResourceInfo>& all, std::string_view group,
                                   std::string_view version) {
  const auto resources = inGroupVersion(all, group, version);
  if (resources.empty()) return std::nullopt;
  auto [definitions, paths] = describe(all, resources, Version::kV3);
  return json{{"openapi", "3.0.0"},
              {"info", info()},
              {"paths", std::move(paths)},
              {"components", {{"schemas", std::move(definitions)}}}};
}

json v2Document(const std::vector<ResourceInfo>& all) {
  std::vector<const ResourceInfo*> resources;
  for (const ResourceInfo& r : all) resources.push_back(&r);
  auto [definitions, paths] = describe(all, resources, Version::kV2);
  return {{"swagger", "2.0"},
          {"info", info()},
          {"paths", std::move(paths)},
          {"definitions", std::move(definitions)}};
}

std::string v2Protobuf(const json& document) {
  Writer w;
  w.bytes(1, document.value("swagger", std::string()));
  Writer info_message;  // Info
  info_message.bytes(1, memberOf(document, "info").value("title", std::string()));
  info_message.bytes(2, memberOf(document, "info").value("version", std::string()));
  w.bytes(2, info_message.str());
  Writer paths;  // Paths: path = 2
  for (const auto& [path, item] : memberOf(document, "paths").items()) {
    Writer path_item;  // PathItem: patch = 8
    if (item.contains("patch")) path_item.bytes(8, operationMessage(item["patch"]));
    Writer named;  // NamedPathItem
    named.bytes(1, path);
    named.bytes(2, path_item.str());
    paths.bytes(2, named.str());
  }
  w.bytes(8, paths.str());
  Writer definitions;  // Definitions: additional_properties = 1
  for (const auto& [name, schema] : memberOf(document, "definitions").items()) {
    definitions.bytes(1, namedSchema(name, schema));
  }
  w.bytes(9, definitions.str());
  return w.str();
}

}  // namespace ekco::kubesim::openapi
