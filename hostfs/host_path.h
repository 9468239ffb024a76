// Host paths as strings: splitting, checking and joining them. Pure functions; the walk that
// resolves them on disk is in local_host_fs.cc.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ekco::hostfs {

// Components of a path, without empty and "." ones ("a//./b/" -> a, b).
std::vector<std::string> splitComponents(std::string_view path);
// The components of an absolute host path. Errors: kInvalidArgument (relative, or a NUL byte),
// kEscape (a ".." component).
base::Result<std::vector<std::string>> splitHostPath(std::string_view path);
// "dir/name", with no doubled slash at the root.
std::string childPath(std::string_view dir, std::string_view name);
// "/a/b[/last]" from components; "/" for none.
std::string joinHostPath(const std::vector<std::string>& names, std::string_view last = {});

}  // namespace ekco::hostfs
