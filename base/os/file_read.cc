#include "base/os/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/os/unique_fd.h"
#include "base/strings.h"

namespace ekco::base {

Result<std::string> readSmallFile(const std::string& path, std::size_t max_bytes) {
  // Blocking on purpose: a pipe (`ekco config from-kurl /dev/stdin`) is read to its end.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errnoError("open " + path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errnoError("stat " + path, errno);
  if (S_ISDIR(st.st_mode)) return Error(path + ": is a directory", ErrorCode::kInvalidArgument);
  const auto too_large = [&] {
    return Error(path + ": larger than " + describeBytes(max_bytes) + "; not reading it",
                 ErrorCode::kInvalidArgument);
  };
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return too_large();
  }
  std::string out;
  char buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errnoError("read " + path, errno);
    }
    if (n == 0) return out;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) return too_large();
    out.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace ekco::base
