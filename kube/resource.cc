#include "kube/resource.h"

namespace ekco::kube {

std::string percentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || u == '-' ||
        u == '.' || u == '_' || u == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    }
  }
  return out;
}

std::string Resource::path(std::string_view ns, std::string_view name,
                           std::string_view subresource) const {
  std::string out = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !ns.empty()) out += "/namespaces/" + percentEncode(ns);
  out += "/" + plural;
  if (!name.empty()) {
    out += "/" + percentEncode(name);
    if (!subresource.empty()) out += "/" + percentEncode(subresource);
  }
  return out;
}

}  // namespace ekco::kube
