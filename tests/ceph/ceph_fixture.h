// A real single-host Ceph 16 cluster on loopback for tests (the `ceph-fixture` script beside this
// file does the work; README.md there says how to run it by hand): one mon, one mgr and memstore
// OSDs with any ids in any CRUSH host buckets, in a temp dir. The destructor kills every daemon.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "tests/kubesim/server/server.h"

namespace ekco::testing {

class CephFixture {
 public:
  // True when ceph-mon, ceph-mgr, ceph-osd and ceph are installed (scripts/setup installs them).
  static bool available();
  // Starts the mon and the mgr in `dir` (must be empty or absent) on `ip`.
  [[nodiscard]] static base::Result<std::unique_ptr<CephFixture>> start(
      const std::string& dir, const std::string& ip = "127.0.0.1");
  ~CephFixture();  // stop()
  // Kills every daemon and removes the dir; once (later calls do nothing).
  void stop();
  CephFixture(const CephFixture&) = delete;
  CephFixture& operator=(const CephFixture&) = delete;

  // An OSD with this id in CRUSH host bucket `host`, started.
  [[nodiscard]] base::Status addOsd(int id, const std::string& host);
  // Kills the OSD's daemon and marks it down; it stays "in" (a host that went away).
  [[nodiscard]] base::Status stopOsd(int id);
  // Starts a stopped OSD again.
  [[nodiscard]] base::Status startOsd(int id);
  // Waits until exactly `up` OSDs are up (`ceph osd stat -f json`).
  [[nodiscard]] base::Status waitForUpOsds(int up, std::chrono::seconds timeout);
  // Runs `ceph ARGS...` against the cluster; an exit other than 0 is an Error with its stderr.
  [[nodiscard]] base::Result<std::string> ceph(const std::vector<std::string>& args) const;
  // CEPH_CONF for a client of this cluster.
  const std::string& conf() const { return conf_; }
  // The kubesim exec entry that makes `ceph ...` in the rook-ceph-tools pods run the real CLI
  // against this cluster.
  kubesim::ExecReply toolsPodExec() const;

 private:
  explicit CephFixture(std::string dir);
  [[nodiscard]] base::Result<std::string> script(const std::vector<std::string>& args) const;

  std::string dir_;
  std::string conf_;
  std::atomic<bool> stopped_{false};
};

}  // namespace ekco::testing
