#include "hostfs/host_path.h"

#include <algorithm>

namespace ekco::hostfs {

using base::Error;
using base::ErrorCode;

std::vector<std::string> splitComponents(std::string_view path) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view c = path.substr(i, j - i);
    if (!c.empty() && c != ".") out.emplace_back(c);
    i = j + 1;
  }
  return out;
}

base::Result<std::vector<std::string>> splitHostPath(std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return Error("not an absolute host path", ErrorCode::kInvalidArgument);
  }
  if (path.find('\0') != std::string_view::npos) {
    return Error("path contains a NUL byte", ErrorCode::kInvalidArgument);
  }
  std::vector<std::string> components = splitComponents(path);
  if (std::find(components.begin(), components.end(), "..") != components.end()) {
    return Error("path has a \"..\" component, which could leave the host root",
                 ErrorCode::kEscape);
  }
  return components;
}

std::string childPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (out != "/") out.push_back('/');
  out.append(name);
  return out;
}

std::string joinHostPath(const std::vector<std::string>& names, std::string_view last) {
  std::string out;
  for (const std::string& n : names) out.append("/").append(n);
  if (!last.empty()) out.append("/").append(last);
  return out.empty() ? "/" : out;
}

}  // namespace ekco::hostfs
