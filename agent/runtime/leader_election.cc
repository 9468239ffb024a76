#include "agent/runtime/leader_election.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using kube::Json;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

namespace {

// client-go's JitterFactor for acquirers: wait retry_period * (1 + 1.2 * rand).
constexpr double kJitterFactor = 1.2;
// A record's leaseDurationSeconds is trusted up to this much, so a garbage value cannot make a
// Lease never expire (or overflow the clock arithmetic).
constexpr std::int64_t kMaxRecordDurationSeconds = 3600;

std::string describe(milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

Error invalid(const std::string& message) {
  return Error("leader election: " + message, ErrorCode::kInvalidArgument);
}

bool isCode(const Error& e, ErrorCode code) { return e.code() == code; }

}  // namespace

base::Status validateLeaderElectionConfig(const LeaderElectionConfig& c) {
  if (c.identity.empty()) return invalid("identity must not be empty (the node name)");
  if (c.ns.empty()) return invalid("ns must not be empty");
  if (c.name.empty()) return invalid("name must not be empty");
  if (c.retry_period <= milliseconds(0)) {
    return invalid("retry_period (" + describe(c.retry_period) + ") must be positive");
  }
  if (c.renew_deadline <= c.retry_period) {
    return invalid("renew_deadline (" + describe(c.renew_deadline) +
                   ") must be greater than retry_period (" + describe(c.retry_period) + ")");
  }
  if (c.lease_duration <= c.renew_deadline) {
    return invalid("lease_duration (" + describe(c.lease_duration) +
                   ") must be greater than renew_deadline (" + describe(c.renew_deadline) + ")");
  }
  return base::ok();
}

base::Result<std::unique_ptr<LeaderElector>> LeaderElector::create(kube::KubeClient& client,
                                                                   const base::Clock& clock,
                                                                   LeaderElectionConfig config,
                                                                   Callbacks callbacks) {
  EKCO_TRY(validateLeaderElectionConfig(config));
  return std::unique_ptr<LeaderElector>(
      new LeaderElector(client, clock, std::move(config), std::move(callbacks)));
}

LeaderElector::LeaderElector(kube::KubeClient& client, const base::Clock& clock,
                             LeaderElectionConfig config, Callbacks callbacks)
    : client_(client),
      clock_(clock),
      config_(std::move(config)),
      callbacks_(std::move(callbacks)),
      random_(std::random_device()()) {}

namespace {

// The API server itself answered (the step failed on what it said, not on reaching it). A
// refused or timed-out connection, 429 and 5xx are not answers a cache can be trusted on.
bool apiAnswered(ErrorCode code) {
  switch (code) {
    case ErrorCode::kNotFound:
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kConflict:
    case ErrorCode::kPermissionDenied:
    case ErrorCode::kUnauthenticated:
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kParse:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::optional<base::MonoTime> LeaderElector::lastAnswer() const {
  std::lock_guard lock(mu_);
  return last_answer_;
}

base::Result<bool> LeaderElector::tryAcquireOrRenew() {
  std::lock_guard step(step_mu_);
  Pending pending;
  {
    // (1) A term whose last success is renew_deadline old is over, whether its renewals failed
    // or never ran (the process was suspended).
    std::lock_guard lock(mu_);
    checkDeadlineLocked(pending);
  }
  lost_race_.clear();
  auto attempted = attempt(pending);
  bool leader = false;
  {
    std::lock_guard lock(mu_);
    // (2) A step that did not renew may have outlived the deadline itself.
    if (!attempted || !*attempted) checkDeadlineLocked(pending);
    // A fast-path conflict that the read resolved is no failure.
    last_error_ = !attempted ? attempted.error().message() : *attempted ? "" : lost_race_;
    if (attempted || apiAnswered(attempted.error().code())) last_answer_ = clock_.monoNow();
    leader = leader_;
  }
  fire(pending);
  if (!attempted) return std::move(attempted).error();
  return leader;
}

// Reads, decides and writes; true when a write naming us succeeded, false when we lost a race or
// someone else holds a valid Lease.
base::Result<bool> LeaderElector::attempt(Pending& pending) {
  const base::WallTime now = clock_.wallNow();
  const std::int64_t duration_seconds = (config_.lease_duration.count() + 999) / 1000;

  // (1) Fast path: the leader renews on top of the record it wrote last.
  std::optional<Json> renewal;
  {
    std::lock_guard lock(mu_);
    if (leader_ && observed_ && observed_->holder_identity == config_.identity &&
        !observed_->resource_version.empty()) {
      renewal = observed_object_;
      (*renewal)["spec"] = specFor(config_.identity, duration_seconds, observed_->acquire_time, now,
                                   observed_->lease_transitions);
    }
  }
  if (renewal) {
    // A conflict (false) means someone else wrote, or our own retried PUT already did; kNotFound
    // that the Lease was deleted. Either way: read it.
    auto renewed = write(*renewal, false, pending);
    if (renewed ? *renewed : !isCode(renewed.error(), ErrorCode::kNotFound)) return renewed;
  }

  // (2) Read the record; create it when there is none.
  auto got = client_.get(kube::resources::kLeases, config_.ns, config_.name);
  if (!got) {
    if (!isCode(got.error(), ErrorCode::kNotFound)) return std::move(got).error();
    if (!config_.candidate) {
      // An observer creates nothing: nobody leads until a candidate creates the Lease.
      std::lock_guard lock(mu_);
      observed_.reset();
      if (reported_holder_ && !reported_holder_->empty()) {
        reported_holder_ = "";
        if (callbacks_.on_new_leader) {
          pending.push_back([cb = callbacks_.on_new_leader] { cb(""); });
        }
      }
      return false;
    }
    Json object = {{"apiVersion", kube::resources::kLeases.apiVersion()},
                   {"kind", kube::resources::kLeases.kind},
                   {"metadata", {{"name", config_.name}, {"namespace", config_.ns}}},
                   {"spec", specFor(config_.identity, duration_seconds, now, now, 0)}};
    return write(object, true, pending);
  }
  auto lease = kube::parseLease(*got);
  if (!lease) {
    auto unreadable = unreadableLease(*got, lease.error());
    if (!unreadable) return std::move(lease).error().wrap("leader election");
    lease = std::move(*unreadable);
  }
  if (lease->resource_version.empty()) {
    return Error("leader election: lease " + config_.ns + "/" + config_.name +
                     " has no metadata.resourceVersion",
                 ErrorCode::kParse);
  }

  // (3) Decide. A record that does not name us ends our term; one that someone else holds and
  // that has not expired on our monotonic clock is left alone.
  const bool ours = lease->holder_identity == config_.identity;
  {
    std::lock_guard lock(mu_);
    if (!ours) endTermLocked(pending);
    observeLocked(*got, *lease, pending);
    const bool expired =
        lease->holder_identity.empty() || observed_at_ + durationOf(*lease) <= clock_.monoNow();
    if (!ours && !expired) return false;
    if (!config_.candidate) return false;  // an observer never writes
  }

  // (4) Write our claim on top of the version we read.
  Json object = *got;
  object["spec"] =
      ours ? specFor(config_.identity, duration_seconds, lease->acquire_time, now,
                     lease->lease_transitions)
           : specFor(config_.identity, duration_seconds, now, now, lease->lease_transitions + 1);
  return write(object, false, pending);
}

// A record whose spec cannot be read (a wrong type, a bad time) names no holder we can honour,
// but someone may be writing it: it is held by nobody we know until it stays unchanged for our
// own lease duration, then taken over on top of its resourceVersion like an expired one. Left
// alone for good, it would leave the cluster without a leader while every agent is ready.
// Without a readable metadata.resourceVersion (no conditional write possible) it stays an error.
std::optional<kube::Lease> LeaderElector::unreadableLease(const Json& object,
                                                          const base::Error& why) {
  if (!object.is_object()) return std::nullopt;
  const auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return std::nullopt;
  const auto rv = meta->find("resourceVersion");
  if (rv == meta->end() || !rv->is_string() || rv->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  kube::Lease lease;
  lease.ns = config_.ns;
  lease.name = config_.name;
  lease.resource_version = rv->get<std::string>();
  lease.holder_identity = kUnreadableHolder;
  if (!config_.candidate) {
    lost_race_ = fmt::format("leader election: lease {}/{} is unreadable ({})", config_.ns,
                             config_.name, why.message());
    return lease;
  }
  lost_race_ = fmt::format(
      "leader election: lease {}/{} is unreadable ({}); taking it over if it stays unchanged "
      "for {}",
      config_.ns, config_.name, why.message(), describe(config_.lease_duration));
  return lease;
}

// Creates or updates; a lost race is false with last_error set, not an error.
base::Result<bool> LeaderElector::write(const Json& object, bool create, Pending& pending) {
  const base::MonoTime sent = clock_.monoNow();
  auto written = create ? client_.create(kube::resources::kLeases, config_.ns, object)
                        : client_.update(kube::resources::kLeases, config_.ns, object);
  if (!written) {
    const ErrorCode lost = create ? ErrorCode::kAlreadyExists : ErrorCode::kConflict;
    if (!isCode(written.error(), lost)) return std::move(written).error();
    lost_race_ = written.error().message();
    return false;
  }
  return adopt(*written, sent, pending);
}

// Takes the stored object our write returned as the observed record.
base::Result<bool> LeaderElector::adopt(const Json& object, base::MonoTime sent, Pending& pending) {
  auto lease = kube::parseLease(object);
  if (!lease) return std::move(lease).error().wrap("leader election: the written lease");
  std::lock_guard lock(mu_);
  if (lease->holder_identity != config_.identity) {
    endTermLocked(pending);
    observeLocked(object, *lease, pending);
    return false;
  }
  observeLocked(object, *lease, pending);
  if (!leader_) {
    leader_ = true;
    if (callbacks_.on_started_leading) pending.push_back(callbacks_.on_started_leading);
  }
  last_success_ = sent;
  return true;
}

void LeaderElector::observeLocked(const Json& object, const kube::Lease& lease, Pending& pending) {
  std::string key = lease.holder_identity + "\n" + lease.resource_version + "\n" +
                    (lease.renew_time ? kube::formatRfc3339Micro(*lease.renew_time) : "");
  if (!observed_ || key != observed_key_) {
    observed_key_ = std::move(key);
    observed_at_ = clock_.monoNow();
  }
  observed_ = lease;
  observed_object_ = object;
  if (!reported_holder_ || *reported_holder_ != lease.holder_identity) {
    reported_holder_ = lease.holder_identity;
    if (callbacks_.on_new_leader) {
      pending.push_back(
          [cb = callbacks_.on_new_leader, holder = lease.holder_identity] { cb(holder); });
    }
  }
}

void LeaderElector::endTermLocked(Pending& pending) {
  if (!leader_) return;
  leader_ = false;
  if (callbacks_.on_stopped_leading) pending.push_back(callbacks_.on_stopped_leading);
}

void LeaderElector::checkDeadlineLocked(Pending& pending) {
  if (leader_ && clock_.monoNow() - last_success_ >= config_.renew_deadline) {
    endTermLocked(pending);
  }
}

bool LeaderElector::freshLocked() const {
  return leader_ && clock_.monoNow() - last_success_ < config_.renew_deadline;
}

std::chrono::nanoseconds LeaderElector::durationOf(const kube::Lease& lease) const {
  if (lease.lease_duration_seconds && *lease.lease_duration_seconds > 0) {
    return std::chrono::seconds(std::min(*lease.lease_duration_seconds, kMaxRecordDurationSeconds));
  }
  return config_.lease_duration;
}

Json LeaderElector::specFor(const std::string& holder, std::int64_t duration_seconds,
                            std::optional<base::WallTime> acquire, base::WallTime renew,
                            std::int64_t transitions) const {
  Json spec = {{"holderIdentity", holder},
               {"leaseDurationSeconds", duration_seconds},
               {"renewTime", kube::formatRfc3339Micro(renew)},
               {"leaseTransitions", transitions}};
  if (acquire) spec["acquireTime"] = kube::formatRfc3339Micro(*acquire);
  return spec;
}

void LeaderElector::fire(Pending& pending) {
  for (auto& callback : pending) callback();
  pending.clear();
}

void LeaderElector::run() {
  std::uniform_real_distribution<double> jitter(0.0, kJitterFactor);
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
    }
    // Failures are in status() and go to on_step_error; the next step tries again.
    if (auto stepped = tryAcquireOrRenew(); !stepped && callbacks_.on_step_error) {
      callbacks_.on_step_error(stepped.error());
    }
    std::unique_lock lock(mu_);
    // Acquirers spread out so they do not all read and write in step.
    const double spread = jitter(random_);
    const base::MonoTime stepped = clock_.monoNow();
    while (true) {
      const std::uint64_t seen = watched_;
      const auto wait =
          std::max(nanoseconds(0), nextStepLocked(stepped, spread) - clock_.monoNow());
      if (!cv_.wait_for(lock, wait, [&] { return stopped_ || nudged_ || watched_ != seen; })) {
        break;  // the wait is over: step
      }
      if (stopped_) return;
      if (nudged_) {
        nudged_ = false;
        break;
      }
      // A watched record moved the expiry: wait again for the new one.
    }
  }
}

base::MonoTime LeaderElector::nextStepLocked(base::MonoTime stepped, double spread) const {
  if (leader_) return stepped + config_.retry_period;
  const auto jittered = std::chrono::duration_cast<nanoseconds>(
      std::chrono::duration<double, std::milli>(config_.retry_period) * spread);
  // An observer only needs to hear from the API: a read once neither a step nor its watch has
  // answered for a lease duration.
  if (!config_.candidate) {
    return std::max(stepped, last_watched_.value_or(stepped)) + config_.lease_duration + jittered;
  }
  const base::MonoTime poll = stepped + config_.retry_period + jittered;
  // Without a live watch, or with a record that may be ours (a restart) or nobody's: poll.
  if (!observed_ || !last_watched_ || clock_.monoNow() - *last_watched_ >= config_.lease_duration ||
      observed_->holder_identity.empty() || observed_->holder_identity == config_.identity) {
    return poll;
  }
  // Step once the record we saw last could have expired, or once the API has been silent for a
  // lease duration (whatever duration the record names), never sooner than polling would; both
  // jittered, so the candidates do not all read and write the moment a dead leader's Lease
  // expires.
  base::MonoTime expiry = observed_at_ + durationOf(*observed_);
  if (last_answer_) expiry = std::min(expiry, *last_answer_ + config_.lease_duration);
  return std::max(poll, expiry + jittered);
}

void LeaderElector::observeDeleted() {
  std::lock_guard step(step_mu_);
  std::lock_guard lock(mu_);
  last_answer_ = clock_.monoNow();
  // Nothing left to wait for: the next step reads (NotFound) and creates it; until a record is
  // seen again, run() polls.
  if (!leader_) observed_.reset();
  if (config_.candidate) nudged_ = true;
  cv_.notify_all();
}

void LeaderElector::observeWatched(const Json& object) {
  std::lock_guard step(step_mu_);  // callbacks stay in the order of the records
  Pending pending;
  {
    std::lock_guard lock(mu_);
    const base::MonoTime now = clock_.monoNow();
    last_answer_ = now;
    last_watched_ = now;
    ++watched_;
    if (!leader_) {
      auto lease = kube::parseLease(object);
      if (lease && !lease->resource_version.empty()) {
        observeLocked(object, *lease, pending);
        if (lease->holder_identity.empty() && config_.candidate) nudged_ = true;
      }
    }
    cv_.notify_all();
  }
  fire(pending);
}

void LeaderElector::stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  cv_.notify_all();
}

base::Status LeaderElector::release() {
  std::lock_guard step(step_mu_);
  Pending pending;
  std::optional<Json> object;
  {
    // (1) End our term first, so isLeaderFresh() is false before anyone can take over, and stop
    // run() so it does not take the released Lease straight back.
    std::lock_guard lock(mu_);
    stopped_ = true;
    cv_.notify_all();
    endTermLocked(pending);
    if (observed_ && observed_->holder_identity == config_.identity &&
        !observed_->resource_version.empty()) {
      object = observed_object_;
      (*object)["spec"] =
          specFor("", 1, observed_->acquire_time, clock_.wallNow(), observed_->lease_transitions);
    }
  }
  fire(pending);
  if (!object) return base::ok();
  // (2) Clear the holder on top of the version we saw last; a conflict means the record is no
  // longer the one we wrote, and then it is not ours to clear.
  auto written = client_.update(kube::resources::kLeases, config_.ns, *object);
  base::Status result = base::ok();
  if (!written) {
    result = std::move(written).error().wrap("leader election: release");
  } else if (auto lease = kube::parseLease(*written); !lease) {
    result = std::move(lease).error().wrap("leader election: release: the written lease");
  } else {
    std::lock_guard lock(mu_);
    observeLocked(*written, *lease, pending);
  }
  {
    std::lock_guard lock(mu_);
    last_error_ = result ? "" : result.error().message();
  }
  fire(pending);
  return result;
}

bool LeaderElector::isLeader() const {
  std::lock_guard lock(mu_);
  return leader_;
}

bool LeaderElector::isLeaderFresh() const {
  std::lock_guard lock(mu_);
  return freshLocked();
}

LeaderElector::Status LeaderElector::status() const {
  std::lock_guard lock(mu_);
  Status s;
  s.is_leader = leader_;
  s.is_fresh = freshLocked();
  s.last_error = last_error_;
  if (observed_) {
    s.holder = observed_->holder_identity;
    s.renew_time = observed_->renew_time;
    s.acquire_time = observed_->acquire_time;
    s.transitions = observed_->lease_transitions;
    s.resource_version = observed_->resource_version;
  }
  return s;
}

std::string leaseIdentity(const std::string& node_name) {
  std::random_device random;
  const std::uint64_t suffix = (std::uint64_t{random()} << 32) | random();
  return fmt::format("{}_{:016x}", node_name, suffix);
}

std::string leaseHolderNode(const std::string& identity) {
  return identity.substr(0, identity.find('_'));
}

}  // namespace ekco::agent
