#include "tests/ceph/ceph_fixture.h"

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "base/clock.h"
#include "base/os/process.h"

namespace ekco::testing {

namespace {

const base::SystemClock& clock() {
  static const base::SystemClock c;
  return c;
}

base::Result<std::string> runChecked(const std::vector<std::string>& argv,
                                     const base::Environment& env) {
  base::BoostProcessRunner runner(clock());
  base::ProcessRequest request{.argv = argv, .inherit_env = true, .env = env};
  request.timeout = std::chrono::seconds(90);
  auto ran = runner.run(request);
  if (!ran) return std::move(ran).error();
  if (!ran->success()) return base::failureError(request, *ran);
  return std::move(ran->stdout_data);
}

}  // namespace

bool CephFixture::available() {
  for (const char* p : {"/usr/bin/ceph-mon", "/usr/bin/ceph-mgr", "/usr/bin/ceph-osd",
                        "/usr/bin/ceph", "/usr/bin/ceph-authtool", "/usr/bin/monmaptool"}) {
    if (::access(p, X_OK) != 0) return false;
  }
  return true;
}

CephFixture::CephFixture(std::string dir) : dir_(std::move(dir)), conf_(dir_ + "/ceph.conf") {}

CephFixture::~CephFixture() { stop(); }

void CephFixture::stop() {
  if (stopped_.exchange(true)) return;
  (void)script({"stop", dir_});
}

base::Result<std::string> CephFixture::script(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {EKCO_CEPH_FIXTURE};
  argv.insert(argv.end(), args.begin(), args.end());
  return runChecked(argv, {});
}

base::Result<std::unique_ptr<CephFixture>> CephFixture::start(const std::string& dir,
                                                              const std::string& ip) {
  if (!available()) {
    return base::Error(
        "Ceph is not installed (apt-get install ceph-mon ceph-mgr ceph-osd "
        "ceph-common; scripts/setup does)",
        base::ErrorCode::kNotFound);
  }
  std::unique_ptr<CephFixture> fixture(new CephFixture(dir));
  auto started = fixture->script({"start", dir, ip, std::to_string(::getpid())});
  if (!started) return std::move(started).error().wrap("start the Ceph fixture");
  return fixture;
}

base::Status CephFixture::addOsd(int id, const std::string& host) {
  auto r = script({"add-osd", dir_, std::to_string(id), host});
  if (!r) return std::move(r).error();
  return base::ok();
}

base::Status CephFixture::stopOsd(int id) {
  auto r = script({"stop-osd", dir_, std::to_string(id)});
  if (!r) return std::move(r).error();
  return base::ok();
}

base::Status CephFixture::startOsd(int id) {
  auto r = script({"start-osd", dir_, std::to_string(id)});
  if (!r) return std::move(r).error();
  return base::ok();
}

base::Result<std::string> CephFixture::ceph(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"ceph", "--connect-timeout", "30"};
  argv.insert(argv.end(), args.begin(), args.end());
  return runChecked(argv, {{"CEPH_CONF", conf_}});
}

base::Status CephFixture::waitForUpOsds(int up, std::chrono::seconds timeout) {
  const auto deadline = clock().monoNow() + timeout;
  std::string last;
  while (true) {
    auto out = ceph({"osd", "stat", "-f", "json"});
    if (out) {
      last = *out;
      auto parsed = nlohmann::json::parse(*out, nullptr, false);
      if (parsed.is_object() && parsed.value("num_up_osds", -1) == up) return base::ok();
    } else {
      last = out.error().message();
    }
    if (clock().monoNow() > deadline) {
      return base::Error("timed out waiting for " + std::to_string(up) + " up OSDs: " + last,
                         base::ErrorCode::kTimeout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

kubesim::ExecReply CephFixture::toolsPodExec() const {
  kubesim::ExecReply entry;
  entry.command_prefix = {"ceph"};
  entry.run = true;
  entry.run_env = {{"CEPH_CONF", conf_}};
  entry.pod_prefix = "rook-ceph-tools";
  return entry;
}

}  // namespace ekco::testing
