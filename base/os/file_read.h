// Reading a whole local file that must be small (a configuration file, a kURL Installer spec)
// without trusting its size: at most max_bytes are ever held. Host files the agent manages go
// through hostfs::HostFs instead, which bounds its reads the same way.
#pragma once

#include <cstddef>
#include <string>

#include "base/result.h"

namespace ekco::base {

// The file's content. Errors: the open or read failure (errno's code, "open /x: No such file or
// directory"), kInvalidArgument for a directory or a file over max_bytes ("/x: larger than
// 1 MiB; not reading it").
Result<std::string> readSmallFile(const std::string& path, std::size_t max_bytes);

}  // namespace ekco::base
