#include "tests/kubesim/features/api_types.h"

#include <vector>

namespace ekco::kubesim::api_types {
namespace {

constexpr std::string_view kSchemaText =
#include "tests/kubesim/features/protobuf_schema.inc"
    ;

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

void addFields(const std::string& type, std::map<std::string_view, const Field*>& by_name,
               int depth) {
  auto message = messages().find(type);
  if (message == messages().end() || depth > 8) return;
  for (const auto& [number, info] : message->second) {
    if (isInline(info)) {
      addFields(info.type, by_name, depth + 1);
    } else {
      by_name.emplace(info.name, &info);
    }
  }
}

}  // namespace

const std::map<std::string, Message, std::less<>>& messages() {
  static const std::map<std::string, Message, std::less<>> parsed = [] {
    std::map<std::string, Message, std::less<>> out;
    for (const std::string& line : split(kSchemaText, '\n')) {
      auto bar = line.find('|');
      if (bar == std::string::npos) continue;
      auto& fields = out[line.substr(0, bar)];
      if (bar + 1 == line.size()) continue;
      for (const std::string& f : split(std::string_view(line).substr(bar + 1), ';')) {
        auto parts = split(f, ':');
        if (parts.size() < 4) continue;
        fields[std::stoi(parts[0])] = Field{.name = parts[1],
                                            .label = parts[2][0],
                                            .type = parts[3],
                                            .value_type = parts.size() > 4 ? parts[4] : ""};
      }
    }
    return out;
  }();
  return parsed;
}

bool isScalar(std::string_view type) { return type.find('.') == std::string_view::npos; }

bool isInline(const Field& f) {
  return f.name == "volumeSource" || f.name == "persistentVolumeSource" ||
         f.name == "ephemeralContainerCommon" || f.name == "localObjectReference" ||
         (f.name == "handler" && f.type.ends_with(".ProbeHandler"));
}

bool isOpaque(std::string_view type) {
  auto meta = [&](std::string_view name) {
    return type.size() == kMeta.size() + name.size() && type.starts_with(kMeta) &&
           type.ends_with(name);
  };
  return meta("Time") || meta("MicroTime") || meta("FieldsV1") ||
         type == "k8s.io.apimachinery.pkg.runtime.RawExtension" ||
         type == "k8s.io.apimachinery.pkg.api.resource.Quantity" ||
         type == "k8s.io.apimachinery.pkg.util.intstr.IntOrString" || type.ends_with(".ExtraValue");
}

std::string messageOf(const std::string& api_version, const std::string& kind) {
  const auto slash = api_version.find('/');
  std::string group = slash == std::string::npos ? "core" : api_version.substr(0, slash);
  const std::string version =
      slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  group = group.substr(0, group.find('.'));
  if (kind == "DeleteOptions") return std::string(kMeta) + kind;
  return "k8s.io.api." + group + "." + version + "." + kind;
}

const std::map<std::string_view, const Field*>* jsonFields(std::string_view type) {
  static const auto built = [] {
    std::map<std::string, std::map<std::string_view, const Field*>, std::less<>> out;
    for (const auto& [name, fields] : messages()) addFields(name, out[name], 0);
    return out;
  }();
  auto it = built.find(type);
  return it == built.end() ? nullptr : &it->second;
}

}  // namespace ekco::kubesim::api_types
