// The bearer token of a Connection: fixed, or read from a file that is re-read at most every
// refresh interval, so a rotated service-account token (kubelet rewrites it well before it
// expires) is picked up without a restart.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

#include "base/clock.h"
#include "base/result.h"
#include "hostfs/host_fs.h"

namespace ekco::kube {

// A bearer token is a JWT of a few KiB; a larger token file is refused (each request would
// carry it in a header).
inline constexpr std::size_t kMaxTokenBytes = std::size_t{64} << 10;

// The token in `path` without trailing whitespace. Errors: those of HostFs::read, and
// kInvalidArgument for a file over kMaxTokenBytes ("read /x: larger than 64 KiB").
base::Result<std::string> readTokenFile(const hostfs::HostFs& fs, const std::string& path);

class TokenSource {
 public:
  // With an empty `file` the token is `initial` forever (fs may then be null). Otherwise the
  // file is read through `fs` on first use and again once `refresh` has passed on the clock's
  // monotonic time; if a re-read fails or the file is empty the previous token is kept (a
  // missing token would turn every call into 401, a slightly old one usually still works).
  // fs and clock must outlive the source.
  TokenSource(std::string initial, std::string file, const hostfs::HostFs* fs,
              const base::Clock& clock, std::chrono::seconds refresh);

  // Thread-safe.
  std::string current();

 private:
  const std::string file_;
  const hostfs::HostFs* const fs_;
  const base::Clock& clock_;
  const std::chrono::seconds refresh_;

  std::mutex mu_;
  std::string token_;  // guarded by mu_
  bool read_once_ = false;
  base::MonoTime read_at_{};
};

}  // namespace ekco::kube
