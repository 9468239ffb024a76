// The control-plane-certificates node reconciler: the plan over an inspection (pure), and the
// controller over a real kubeadm-shaped PKI (made by openssl) with a renewal runner the test
// controls, so the background renewal, its collection, the retry after a failure and the stop
// while waiting for the Lease are each observed. The renewal run itself (Lease, restarts,
// verification) is tests/agent/features/certs/certs_renewal_test.cc's.
#include "agent/features/certs/control_plane_certs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>

#include "hostfs/local_host_fs.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/features/certs/kubeadm_pki.h"
#include "tests/fakes/fake_kube.h"

namespace ekco::agent {
namespace {

using kube::testing::FakeKube;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using namespace std::chrono_literals;

const base::WallTime kNow = base::WallTime(std::chrono::seconds(1'800'000'000));

CertState leaf(std::string name, std::chrono::hours left, std::string ca = "ca") {
  CertState s;
  s.name = std::move(name);
  s.file = "/etc/kubernetes/pki/" + s.name + ".crt";
  s.ca = std::move(ca);
  s.cert = pki::Certificate{.not_before = kNow - 24h, .not_after = kNow + left};
  s.left = left;
  s.due = left < 720h;
  return s;
}

CertState authority(std::string name, std::chrono::hours left) {
  CertState s = leaf(std::move(name), left, "");
  s.file = "/etc/kubernetes/pki/" + s.name + ".crt";
  s.due = false;
  return s;
}

CertState missing(std::string name) {
  CertState s;
  s.name = std::move(name);
  s.missing = true;
  return s;
}

std::vector<std::string> reasons(const CertsPlan& plan) {
  std::vector<std::string> out;
  for (const CertWarning& w : plan.warnings) out.push_back(w.reason + " " + w.key);
  return out;
}

TEST(CertsPlan, AWorkerHasNoKubeadmCertificatesAndNothingToDo) {
  Inspection in;
  in.certificates = {missing("apiserver"), missing("admin.conf")};
  in.authorities = {authority("ca", 24h * 3000)};  // kubeadm join writes ca.crt on workers
  const CertsPlan plan = planCertificates(in, {}, 720h, true);
  EXPECT_FALSE(plan.control_plane);
  EXPECT_THAT(plan.due, IsEmpty());
  EXPECT_THAT(plan.warnings, IsEmpty());
}

TEST(CertsPlan, WarnsOnceAtTheSmallestThresholdCrossedAndRenewsInsideTheTtl) {
  Inspection in;
  in.certificates = {leaf("apiserver", 24h * 20), leaf("etcd-server", 24h * 5, "etcd-ca"),
                     leaf("admin.conf", 24h * 200)};
  in.authorities = {authority("ca", 24h * 3000), authority("etcd-ca", 24h * 3000)};
  const CertsPlan plan = planCertificates(in, {}, 720h, true);
  EXPECT_TRUE(plan.control_plane);
  EXPECT_THAT(plan.due, ElementsAre("apiserver", "etcd-server"));
  const std::string expiry_20 = std::to_string(1'800'000'000 + 20 * 86400);
  const std::string expiry_5 = std::to_string(1'800'000'000 + 5 * 86400);
  EXPECT_THAT(reasons(plan), ElementsAre("CertificateExpiringSoon apiserver/30d/" + expiry_20,
                                         "CertificateExpiringSoon etcd-server/7d/" + expiry_5));
  EXPECT_THAT(plan.warnings[0].message,
              HasSubstr("20 days left: ekco renews it inside rotate_certs_ttl (30d)"));
  // Recorded already: not again.
  const CertsPlan again = planCertificates(
      in, {"apiserver/30d/" + expiry_20, "etcd-server/7d/" + expiry_5}, 720h, true);
  EXPECT_THAT(again.warnings, IsEmpty());
  // The next crossing: apiserver reaches 7 days left in 13 days (admin.conf's TTL in 170).
  ASSERT_TRUE(plan.next_crossing);
  EXPECT_EQ(*plan.next_crossing, std::chrono::duration_cast<std::chrono::milliseconds>(24h * 13));
}

TEST(CertsPlan, ACaNearExpiryIsReportedLoudlyNeverRenewed) {
  Inspection in;
  in.certificates = {leaf("apiserver", 24h * 300)};
  in.authorities = {authority("ca", 24h * 6)};
  const CertsPlan plan = planCertificates(in, {}, 720h, true);
  EXPECT_THAT(plan.due, IsEmpty());
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_EQ(plan.warnings[0].reason, "CertificateAuthorityExpiringSoon");
  EXPECT_THAT(plan.warnings[0].message, HasSubstr("ekco does not renew CAs"));
}

TEST(CertsPlan, ALeafIsNotRenewedWhenItsCaWouldGiveItNoMoreTime) {
  Inspection in;
  // The CA outlives the leaf by 12 hours: a renewal would be capped there and be due again at
  // every check (inspectCertificates says so in not_renewable, and it is not due). With 200 days
  // of CA left it is worth it.
  CertState capped = leaf("apiserver", 24h * 6);
  capped.due = false;
  capped.not_renewable =
      "its CA ca expires 2027-01-01T00:00:00Z, and a renewed certificate "
      "cannot outlive it: renew the CA with kubeadm (and redistribute it), "
      "then ekco renews this one";
  in.certificates = {capped, leaf("front-proxy-client", 24h * 9, "front-proxy-ca")};
  in.authorities = {authority("ca", 24h * 6 + 12h), authority("front-proxy-ca", 24h * 200)};
  const CertsPlan plan = planCertificates(in, {}, 720h, true);
  EXPECT_THAT(plan.due, ElementsAre("front-proxy-client"));
  ASSERT_EQ(plan.blocked.size(), 1u);
  EXPECT_EQ(plan.blocked[0], "apiserver: " + capped.not_renewable);
  // Issue 34, item 12: its Event says the same, not "ekco renews it inside rotate_certs_ttl".
  const auto warning =
      std::find_if(plan.warnings.begin(), plan.warnings.end(),
                   [](const CertWarning& w) { return w.key.starts_with("apiserver/"); });
  ASSERT_NE(warning, plan.warnings.end());
  EXPECT_EQ(warning->reason, "CertificateExpiringSoon");
  EXPECT_THAT(warning->message, HasSubstr("ekco cannot renew it: its CA ca expires"));
  EXPECT_THAT(warning->message, HasSubstr("renew the CA with kubeadm"));
  EXPECT_THAT(warning->message, ::testing::Not(HasSubstr("ekco renews it")));
}

TEST(CertsPlan, ExternalCaAndRotationOffAreSaidInTheEvent) {
  Inspection in;
  CertState external = leaf("apiserver", 24h * 10);
  external.external_ca = true;
  external.due = false;
  in.certificates = {external, leaf("admin.conf", 24h * 10)};
  in.authorities = {authority("ca", 24h * 3000)};
  const CertsPlan plan = planCertificates(in, {}, 720h, false);
  ASSERT_EQ(plan.warnings.size(), 2u);
  EXPECT_THAT(plan.warnings[0].message, HasSubstr("ekco cannot renew it"));
  EXPECT_THAT(plan.warnings[1].message, HasSubstr("rotate_certs is off"));
  EXPECT_THAT(plan.due, ElementsAre("admin.conf"));  // what would be renewed
}

// A renewal runner the test drives: each call is recorded and blocks until released.
struct ScriptedRunner {
  std::mutex mu;
  std::vector<CertRenewalOptions> calls;
  std::promise<base::Result<CertRenewalReport>> outcome;
  std::shared_future<base::Result<CertRenewalReport>> future = outcome.get_future().share();
  std::atomic<bool> wait_for_lease{false};
  std::atomic<int> waits_refused{0};

  CertRenewalRunner runner() {
    return [this](const CertRenewalOptions& o,
                  const std::function<bool(std::chrono::milliseconds)>& wait)
               -> base::Result<CertRenewalReport> {
      {
        std::lock_guard lock(mu);
        calls.push_back(o);
      }
      if (wait_for_lease) {
        while (wait(1h)) {
        }
        ++waits_refused;
        return base::Error("stopped while waiting for the disruption lease",
                           base::ErrorCode::kCancelled);
      }
      return future.get();
    };
  }
  void reset() {
    outcome = {};
    future = outcome.get_future().share();
  }
  std::size_t count() {
    std::lock_guard lock(mu);
    return calls.size();
  }
};

class ControlPlaneCertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_.make(10);
    auto opened = hostfs::LocalHostFs::open(tmp_.path(), real_clock_);
    ASSERT_TRUE(opened) << opened.error().message();
    fs_ = std::move(*opened);
    clock_.setWall(std::chrono::system_clock::now());
    expiry_ = *metrics_.gauge("ekco_certificate_expiry_timestamp_seconds", "h", {"name", "node"});
    failing_ = *metrics_.gauge("ekco_certificate_renewal_failing", "h", {"node"});
  }
  std::unique_ptr<ControlPlaneCerts> make(bool renew = true, bool dry_run = false,
                                          std::chrono::seconds ttl = 720h) {
    ControlPlaneCertsOptions o;
    o.node_name = "cp-1";
    o.renew = renew;
    o.dry_run = dry_run;
    o.inspect.ttl = ttl;
    o.retry_initial = 10min;
    return std::make_unique<ControlPlaneCerts>(
        ControlPlaneCertsDeps{.fs = *fs_,
                              .kube = kube_,
                              .clock = clock_,
                              .run_renewal = runner_.runner(),
                              .expiry = expiry_,
                              .failing = failing_},
        o);
  }
  // Reconciles until the background renewal has been collected.
  base::Result<ReconcileResult> collect(ControlPlaneCerts& c) {
    for (int i = 0; i < 500; ++i) {
      auto r = c.reconcile();
      if (!r || r->summary.rfind("renewing", 0) != 0) return r;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << "the renewal was never collected";
    return base::Error("timeout");
  }
  std::vector<std::string> eventReasons() {
    std::vector<std::string> out;
    for (const auto& e : kube_.events()) out.push_back(e.reason);
    return out;
  }

  testing::TempDir tmp_{"ekco-cp-certs"};
  testing::KubeadmPki pki_{tmp_.path()};
  base::SystemClock real_clock_;
  base::ManualClock clock_;
  std::unique_ptr<hostfs::LocalHostFs> fs_;
  FakeKube kube_;
  MetricsRegistry metrics_;
  const Gauge* expiry_ = nullptr;
  const Gauge* failing_ = nullptr;
  ScriptedRunner runner_;
};

// Issue 34, item 7: a renewal interrupted by a crash (its journal left in the backup directory)
// was repaired only by `ekco certs renew`: a mismatched pair is not due, so the agent never ran
// a renewal, and kube-apiserver failed at its next restart. The agent now runs one (which
// repairs first) at its next check, with nothing due; a dry run only says so.
TEST_F(ControlPlaneCertsTest, AnInterruptedRenewalIsRepairedAtTheNextCheckWithNothingDue) {
  const std::string backup = tmp_.path() + "/etc/kubernetes/pki/.ekco-backup/20260101T000000Z";
  std::filesystem::create_directories(backup);
  std::ofstream(backup + "/pending.apiserver") << "apiserver\n";
  constexpr std::chrono::seconds kShortTtl = 24h * 5;  // the leaves have 10 days: nothing is due
  {
    auto dry = make(true, /*dry_run=*/true, kShortTtl)->reconcile();
    ASSERT_TRUE(dry) << dry.error().message();
    EXPECT_THAT(dry->plan, HasSubstr("repair an interrupted renewal: apiserver"));
    EXPECT_EQ(runner_.count(), 0u);
  }
  auto c = make(true, false, kShortTtl);
  auto first = c->reconcile();
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_THAT(first->summary, HasSubstr("repairing an interrupted renewal: apiserver"));
  // The renewal's own thread: bounded, so that a controller that never starts it fails here.
  runner_.outcome.set_value(CertRenewalReport{.lines = {"restored apiserver from its backup"}});
  for (int i = 0; i < 5000 && runner_.count() == 0; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(runner_.count(), 1u);
  EXPECT_TRUE(runner_.calls[0].names.empty());  // nothing due: the run only repairs
}

TEST_F(ControlPlaneCertsTest, RenewsInTheBackgroundAndCollectsTheResultOnALaterReconcile) {
  auto c = make();
  auto first = c->reconcile();
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_THAT(first->summary, HasSubstr("renewing admin.conf, apiserver, "));
  EXPECT_EQ(first->requeue_after, 5s);  // polls the running renewal
  EXPECT_EQ(c->status()["renewal"]["state"], "running");
  // Still running: polled, not started twice.
  auto second = c->reconcile();
  ASSERT_TRUE(second);
  EXPECT_THAT(second->summary, HasSubstr("renewing"));
  while (runner_.count() == 0) std::this_thread::sleep_for(1ms);  // the renewal's own thread
  ASSERT_EQ(runner_.count(), 1u);
  EXPECT_THAT(runner_.calls[0].names, ::testing::Contains("etcd-server"));
  EXPECT_EQ(runner_.calls[0].node_name, "cp-1");
  EXPECT_FALSE(runner_.calls[0].dry_run);

  CertRenewalReport report;
  report.renewed.push_back({.name = "apiserver"});
  report.restarted = {"kube-apiserver"};
  report.lines = {"renewed apiserver", "restarting static pod kube-apiserver"};
  runner_.outcome.set_value(report);
  auto done = collect(*c);
  ASSERT_TRUE(done) << done.error().message();
  EXPECT_EQ(done->summary, "renewed apiserver; restarted kube-apiserver");
  EXPECT_EQ(done->requeue_after, 0ms);  // looks again at once
  EXPECT_EQ(c->status()["renewal"]["state"], "succeeded");
  EXPECT_EQ(failing_->value({"cp-1"}), 0);
}

TEST_F(ControlPlaneCertsTest, ExportsEveryExpiryAndRecordsEachWarningOnce) {
  auto c = make(/*renew=*/false);
  ASSERT_TRUE(c->reconcile());
  ASSERT_TRUE(c->reconcile());
  const nlohmann::json status = c->status();
  ASSERT_TRUE(status["control_plane"].get<bool>());
  for (const nlohmann::json& s : status["certificates"]) {
    if (s["missing"].get<bool>()) continue;
    auto text = fs_->read(s["file"].get<std::string>());
    ASSERT_TRUE(text);
    std::string pem = *text;
    if (s["file"].get<std::string>().ends_with(".conf")) {
      auto pair = readEmbeddedPair(pem, "conf");
      ASSERT_TRUE(pair);
      pem = pair->cert_pem;
    }
    auto cert = pki::parseCertificate(pem, "x");
    ASSERT_TRUE(cert);
    const auto want = std::chrono::floor<std::chrono::seconds>(cert->not_after.time_since_epoch());
    EXPECT_EQ(expiry_->value({s["name"].get<std::string>(), "cp-1"}),
              static_cast<double>(want.count()))
        << s["name"];
    EXPECT_EQ(s["days_left"], 9) << s["name"];  // valid 10 days from when the PKI was made
  }
  EXPECT_GT(expiry_->value({"ca", "cp-1"}), 0);
  // 10 days left: the 30-day warning, once per certificate, however often it looks.
  std::size_t present = 0;
  for (const nlohmann::json& s : status["certificates"])
    present += s["missing"].get<bool>() ? 0 : 1;
  EXPECT_GE(present, 10u);
  const auto reasons = eventReasons();
  EXPECT_EQ(static_cast<std::size_t>(
                std::count(reasons.begin(), reasons.end(), "CertificateExpiringSoon")),
            present)
      << ::testing::PrintToString(reasons);
  EXPECT_EQ(runner_.count(), 0u);  // rotate_certs off: nothing renewed
}

TEST_F(ControlPlaneCertsTest, AFailedRenewalIsRetriedAfterABackoffNotAtOnce) {
  auto c = make();
  ASSERT_TRUE(c->reconcile());
  runner_.outcome.set_value(base::Error("not verified within 3m: kube-apiserver not Ready"));
  auto failed = collect(*c);
  ASSERT_FALSE(failed);
  EXPECT_THAT(failed.error().message(), HasSubstr("not verified within 3m"));
  EXPECT_EQ(failing_->value({"cp-1"}), 1);
  EXPECT_EQ(c->status()["renewal"]["state"], "failed");
  runner_.reset();
  // The manager retries a failed reconcile within seconds: the renewal is not started again.
  clock_.advance(9min);
  auto waiting = c->reconcile();
  ASSERT_TRUE(waiting);
  EXPECT_THAT(waiting->summary, HasSubstr("the last renewal failed; the next attempt in 1m"));
  EXPECT_EQ(waiting->requeue_after, 1min);
  EXPECT_EQ(runner_.count(), 1u);
  clock_.advance(1min);
  auto retried = c->reconcile();
  ASSERT_TRUE(retried);
  EXPECT_THAT(retried->summary, HasSubstr("renewing"));
  while (runner_.count() < 2) std::this_thread::sleep_for(1ms);  // the renewal's own thread
  runner_.outcome.set_value(base::Error("again"));
  ASSERT_FALSE(collect(*c));
  // The second failure doubles the wait.
  clock_.advance(19min);
  auto still = c->reconcile();
  ASSERT_TRUE(still);
  EXPECT_THAT(still->summary, HasSubstr("next attempt in 1m"));
}

TEST_F(ControlPlaneCertsTest, StoppingEndsARenewalStillWaitingForTheLease) {
  runner_.wait_for_lease = true;
  auto c = make();
  ASSERT_TRUE(c->reconcile());
  while (runner_.count() == 0) std::this_thread::sleep_for(1ms);
  c.reset();  // joins: would hang for the hour if the wait were not cut short
  EXPECT_EQ(runner_.waits_refused, 1);
}

TEST_F(ControlPlaneCertsTest, DryRunAsksTheRunnerForAPlanOnly) {
  auto c = make(true, /*dry_run=*/true);
  ASSERT_TRUE(c->reconcile());
  CertRenewalReport report;
  report.lines = {"would renew apiserver"};
  runner_.outcome.set_value(report);
  auto done = collect(*c);
  ASSERT_TRUE(done);
  EXPECT_THAT(done->summary, HasSubstr("dry run: would renew admin.conf, apiserver"));
  ASSERT_EQ(runner_.count(), 1u);  // collected: the runner ran
  EXPECT_TRUE(runner_.calls[0].dry_run);
  EXPECT_EQ(c->status()["renewal"]["state"], "dry-run");
}

TEST_F(ControlPlaneCertsTest, AWorkerNodeIsLeftAlone) {
  std::filesystem::remove_all(tmp_.path() + "/etc/kubernetes/pki");
  for (const char* conf : {"admin.conf", "controller-manager.conf", "scheduler.conf"}) {
    std::filesystem::remove(tmp_.path() + "/etc/kubernetes/" + conf);
  }
  auto c = make();
  auto r = c->reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->summary, "not a control-plane node (no kubeadm certificates)");
  EXPECT_EQ(r->requeue_after, 24h);
  EXPECT_EQ(runner_.count(), 0u);
  EXPECT_THAT(kube_.events(), IsEmpty());
}

}  // namespace
}  // namespace ekco::agent
