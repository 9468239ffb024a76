// certs_renewer ROOT: renews apiserver, admin.conf and etcd-server under ROOT (a kubeadm-shaped
// PKI) through agent/features/certs/certs.h, round after round with the clock a second further each
// time, until killed. The kill test (certs_kill_test.cc) SIGKILLs it at random points and checks
// that after the repair every pair is whole. Prints "ready\n" before the first renewal.
#include <cstdio>
#include <string>

#include "agent/features/certs/certs.h"
#include "base/clock.h"
#include "hostfs/local_host_fs.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s ROOT\n", argv[0]);
    return 2;
  }
  ekco::base::SystemClock clock;
  auto fs = ekco::hostfs::LocalHostFs::open(argv[1], clock);
  if (!fs) {
    std::fprintf(stderr, "certs_renewer: %s\n", fs.error().message().c_str());
    return 1;
  }
  ekco::agent::InspectOptions options;
  options.now = clock.wallNow();
  const auto specs = ekco::agent::kubeadmCertificates(options.certificates_dir);
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) {
    for (const auto& spec : specs) {
      if (spec.name != "apiserver" && spec.name != "admin.conf" && spec.name != "etcd-server") {
        continue;
      }
      options.now += std::chrono::seconds(1);
      auto renewed = ekco::agent::renewOne(**fs, spec, options);
      if (!renewed) {
        std::fprintf(stderr, "certs_renewer: %s\n", renewed.error().message().c_str());
        return 1;
      }
    }
  }
}
