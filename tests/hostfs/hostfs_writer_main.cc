// hostfs_writer ROOT HOST_PATH: rewrites HOST_PATH under ROOT forever through LocalHostFs,
// alternating two large distinct contents, until killed. The kill test (local_host_fs_test.cc)
// SIGKILLs it at random points and checks readers never see anything but one whole content.
// Prints "ready\n" on stdout once the filesystem is open, just before the first write.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"

namespace {

// Keep in sync with killTestContent() in local_host_fs_test.cc.
std::string content(char fill, std::size_t size) { return std::string(size, fill) + fill + "-END"; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ROOT HOST_PATH\n", argv[0]);
    return 2;
  }
  ekco::base::SystemClock clock;
  auto fs = ekco::hostfs::LocalHostFs::open(argv[1], clock);
  if (!fs) {
    std::fprintf(stderr, "hostfs_writer: %s\n", fs.error().message().c_str());
    return 1;
  }
  const std::string contents[2] = {content('A', 256 * 1024), content('B', 384 * 1024)};
  if (::write(STDOUT_FILENO, "ready\n", 6) != 6) return 1;
  for (unsigned long i = 0;; ++i) {
    auto written = (*fs)->write(argv[2], contents[i % 2]);
    if (!written) {
      std::fprintf(stderr, "hostfs_writer: %s\n", written.error().message().c_str());
      return 1;
    }
  }
}
