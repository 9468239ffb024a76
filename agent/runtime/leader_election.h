// Leader election among the agents of a cluster through one coordination.k8s.io/v1 Lease
// (`kurl/ekco-leader`), with the semantics of client-go's elector
// (k8s.io/client-go/tools/leaderelection with resourcelock.LeaseLock), so the Lease reads the
// same to kubectl and to anything that knows client-go's records.
//
// How a step decides (tryAcquireOrRenew):
//   - Expiry is measured on the local monotonic clock, never by comparing the Lease's renewTime
//     with the local wall clock: like client-go, the elector remembers when it last observed the
//     record change (holder, renewTime or resourceVersion) and treats another holder's Lease as
//     expired once `observed + leaseDurationSeconds <= monoNow()`. An NTP step of the wall clock
//     therefore causes neither a takeover nor a loss. A fresh agent waits one full lease
//     duration before taking over a Lease it has never seen change, however old its renewTime.
//   - The lease duration used for another holder is the record's own leaseDurationSeconds (what
//     the holder promised), as client-go does; the configured lease_duration only when the record
//     has none. This keeps fencing sound when agents' configs differ (during an upgrade): the
//     holder stops acting after its renew_deadline, which is less than the duration it wrote.
//   - An empty holderIdentity (a released Lease) counts as expired at once.
//   - A record whose spec cannot be parsed (wrong types, a bad time) is held by
//     "(unreadable lease)": expired once it stays unchanged for our own lease_duration, then
//     overwritten on top of its resourceVersion (status().last_error explains the wait). A
//     leader that reads one ends its term at once. Without a readable resourceVersion it is an
//     error (a write would be unconditional).
//   - Every write carries the observed metadata.resourceVersion. kConflict means someone else
//     wrote first and kAlreadyExists on create means someone created it first: the step lost the
//     race, which is not an error (status().last_error says so); the next step reads again.
//   - The leader renews on top of the record it wrote last (one PUT, client-go's fast path); only
//     when that conflicts or the Lease is gone does it read the Lease again in the same step. A
//     step makes at most three API calls.
//   - Acquiring from someone else (or from nobody) sets acquireTime = now and
//     leaseTransitions + 1; renewing (and taking back a record that already names us, after a
//     restart) keeps them. renewTime = now (MicroTime), leaseDurationSeconds = lease_duration
//     rounded up to seconds.
//
// Leadership terms:
//   - A term starts when a write naming us succeeds (on_started_leading). It ends
//     (on_stopped_leading, once per term) when (a) no renewal has succeeded for renew_deadline,
//     checked before and after every step, so a process that was suspended also ends its term;
//     (b) a step reads a record that does not name us (someone took it or cleared it): at once,
//     not after renew_deadline; (c) release().
//   - Within renew_deadline of the last success a failed step (API error, conflict) leaves us
//     leader: isLeader() stays true and isLeaderFresh() is true as long as the last success is
//     younger than renew_deadline.
//   - Success is dated when its request was sent, not when the answer came, so a slow answer
//     never stretches freshness beyond what other agents grant (they date their observation
//     after the write).
//
// Thread-safety: every public method may be called from any thread. Steps, release(),
// observeWatched() and observeDeleted() are serialized (one step lock); isLeader(),
// isLeaderFresh() and status() never wait for an API call. Callbacks run synchronously on the
// thread doing the step (run()'s thread, or observeWatched()'s caller for on_new_leader) just
// after the state they report has changed (isLeader() may already be true before
// on_started_leading has run), in the order the changes happened, with the state lock released
// but the step lock held: they may call isLeader(), isLeaderFresh() and status(), not
// tryAcquireOrRenew(), release(), observeWatched() or observeDeleted(). They should return
// quickly (start or signal the controllers, do not run them).
//
// Libraries do not log: errors come back as values and in status().last_error.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "kube/client.h"
#include "kube/decode/objects.h"

namespace ekco::agent {

// A holderIdentity unique to this process, as client-go makes one (hostname_uuid):
// "<node>_<16 hex digits from the system's random source>". Node names never contain '_'.
std::string leaseIdentity(const std::string& node_name);
// The node part of a holderIdentity ("node-a" of "node-a_3f09c1d2e4b5a697"); an identity without
// '_' (EKCO, ekco before unique identities) as it is.
std::string leaseHolderNode(const std::string& identity);

struct LeaderElectionConfig {
  std::string ns = "kurl";
  std::string name = "ekco-leader";
  // holderIdentity, compared whole: unique per process (leaseIdentity), so two agents that share
  // a node name (two sockets, two hosts with one hostname) never both lead.
  std::string identity{};
  // How long others wait, after they last saw the Lease change, before taking it over.
  std::chrono::milliseconds lease_duration{15000};
  // How long the leader keeps acting without a successful renewal.
  std::chrono::milliseconds renew_deadline{10000};
  // Time between steps (acquirers add up to 120 % jitter, as client-go does).
  std::chrono::milliseconds retry_period{2000};
  // false: an observer that never leads (config leader_election_candidate: an agent whose
  // credentials hold no cluster-wide writes, the worker DaemonSet's). Its steps only read the
  // Lease (get, never create or update): status() and lastAnswer() stay truthful and
  // on_new_leader reports the holder, but it never leads and release() writes nothing. It reads
  // only when its watch has been silent for a lease duration (plus up to 1.2 retry periods of
  // jitter), and a released or deleted Lease does not make it step at once: it takes nothing
  // over, so hundreds of workers do not read the moment a leader hands over.
  bool candidate = true;
};

// lease_duration > renew_deadline > retry_period > 0 and identity, ns and name non-empty;
// otherwise kInvalidArgument naming the field ("leader election: lease_duration (5s) must be
// greater than renew_deadline (10s)").
[[nodiscard]] base::Status validateLeaderElectionConfig(const LeaderElectionConfig& config);

// (At namespace scope so it can be a default argument inside LeaderElector; GCC cannot use a
// nested class's default member initializers there.)
struct LeaderElectionCallbacks {
  std::function<void()> on_started_leading{};
  std::function<void()> on_stopped_leading{};
  // The observed holder changed (including to us). "" means nobody holds it (released).
  std::function<void(const std::string& holder)> on_new_leader{};
  // A step of run() failed (not a lost race): the API refused or did not answer, or the Lease
  // is unusable. For the caller's (rate-limited) log: the elector itself does not log.
  std::function<void(const base::Error& error)> on_step_error{};
};

class LeaderElector {
 public:
  using Callbacks = LeaderElectionCallbacks;

  // For the agent's /status "lease" object: the last observed record and our view of it.
  struct Status {
    std::string holder{};  // observed holderIdentity ("" when unheld or never read)
    bool is_leader = false;
    bool is_fresh = false;  // isLeaderFresh()
    std::optional<base::WallTime> renew_time = std::nullopt;
    std::optional<base::WallTime> acquire_time = std::nullopt;
    std::int64_t transitions = 0;
    std::string resource_version{};
    // The failure of the most recent step or release ("" when it had none), including a lost
    // race ("update leases/...: ... (Conflict, 409)").
    std::string last_error{};
  };

  // kInvalidArgument for a bad config (validateLeaderElectionConfig). The client and clock must
  // outlive the elector.
  [[nodiscard]] static base::Result<std::unique_ptr<LeaderElector>> create(
      kube::KubeClient& client, const base::Clock& clock, LeaderElectionConfig config,
      Callbacks callbacks = {});

  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // One step: client-go's tryAcquireOrRenew plus the renew-deadline check. Returns isLeader()
  // after the step. A lost race (kConflict, kAlreadyExists) and a Lease held by someone else are
  // not errors. Any other failure (API error, a Lease that does not parse or has no
  // resourceVersion) is returned as the error; leadership then follows the rules above (still
  // leader within renew_deadline of the last success, not after).
  [[nodiscard]] base::Result<bool> tryAcquireOrRenew();

  // Steps until stop(): every retry_period while leading, every retry_period plus up to 120 %
  // jitter otherwise (client-go's JitterFactor 1.2), or later while watched records show a live
  // holder (observeWatched). Waits on real time with a condition
  // variable, so stop() ends it as soon as the step in flight (bounded by the client's request
  // timeout) returns. Errors are not returned; see status(). Returns at once after stop().
  void run();

  // A record of the Lease delivered by a watch (the agent's informer of `ekco-leader`): an
  // answer of the API server, and, while we do not lead, an observation like a read's (a changed
  // record restarts the expiry wait; a released one makes run() step now). A record that does not
  // parse is left to the next step. It never writes and never ends a term (a leader learns from
  // its own renewals), so a stale or reordered event can only delay a takeover, never hasten it:
  // a takeover still needs a read of the same record, unchanged for the lease duration.
  //
  // With watched records arriving, a candidate's run() needs no reads: it steps once the
  // observed record could have expired (observed + its lease duration + the jitter below), not
  // every retry period, so an idle agent polls nothing. When nothing has been watched for a
  // lease duration (the watch is down, or the holder died and stopped renewing), run() steps
  // every jittered retry period again, as client-go does.
  void observeWatched(const kube::Json& object);
  // The watch saw the Lease deleted: while we do not lead, the last record is forgotten (run()
  // polls until one is seen again) and run() steps now. (A released record seen by
  // observeWatched makes run() step now too: a clean hand-over takes one API round trip rather
  // than up to 2.2 retry periods. Only timing changes: the step decides as always.)
  void observeDeleted();

  // Idempotent and final: run() returns and does not start again. Does not release the Lease:
  // call release() after run() has returned.
  void stop();

  // Stops run() as stop() does, ends our term (on_stopped_leading if we were leading;
  // isLeader() is false before the Lease changes) and, if the last observed record names us,
  // writes it back with holderIdentity "", leaseDurationSeconds 1 and renewTime now, so another
  // agent takes over on its next step instead of after the lease duration. A no-op otherwise.
  // A failed write is returned (the Lease then expires the normal way). tryAcquireOrRenew()
  // still works afterwards (tests, a later re-election).
  [[nodiscard]] base::Status release();

  // We hold the Lease: our term has not ended (see above). Not a fencing check.
  bool isLeader() const;
  // The fencing check leader controllers make before every irreversible API call: we hold the
  // Lease AND our last successful acquire/renew was sent less than renew_deadline ago on the
  // monotonic clock. Turns false by itself when renewals stop, even while a step is stuck.
  bool isLeaderFresh() const;
  Status status() const;
  const LeaderElectionConfig& config() const { return config_; }
  // When the elector last heard from the API server (on the monotonic clock): a step's success,
  // lost race or refusal the server itself gave (not a connection that failed or timed out, nor
  // a 429/5xx), or a watched record. nullopt before the first. The agent's /readyz uses it to
  // notice an API that accepts connections and answers nothing: the leader steps every retry
  // period, and a candidate hears the renewals or reads the Lease itself at most a lease
  // duration (plus the jitter) after the last answer.
  std::optional<base::MonoTime> lastAnswer() const;

 private:
  LeaderElector(kube::KubeClient& client, const base::Clock& clock, LeaderElectionConfig config,
                Callbacks callbacks);

  // Callbacks collected under mu_ and run after it is released.
  using Pending = std::vector<std::function<void()>>;

  // The holder an unreadable record is taken to name: nobody's identity (those are
  // "<node>_<16 hex>"), reported as such in /status.
  static constexpr const char* kUnreadableHolder = "(unreadable lease)";

  base::Result<bool> attempt(Pending& pending);
  std::optional<kube::Lease> unreadableLease(const kube::Json& object, const base::Error& why);
  base::Result<bool> write(const kube::Json& object, bool create, Pending& pending);
  base::Result<bool> adopt(const kube::Json& object, base::MonoTime sent, Pending& pending);
  void observeLocked(const kube::Json& object, const kube::Lease& lease, Pending& pending);
  void endTermLocked(Pending& pending);
  void checkDeadlineLocked(Pending& pending);
  bool freshLocked() const;
  // When run() steps next, after a step that ended at `stepped`; `spread` is this wait's jitter
  // in [0, kJitterFactor).
  base::MonoTime nextStepLocked(base::MonoTime stepped, double spread) const;
  std::chrono::nanoseconds durationOf(const kube::Lease& lease) const;
  kube::Json specFor(const std::string& holder, std::int64_t duration_seconds,
                     std::optional<base::WallTime> acquire, base::WallTime renew,
                     std::int64_t transitions) const;
  static void fire(Pending& pending);

  kube::KubeClient& client_;
  const base::Clock& clock_;
  const LeaderElectionConfig config_;
  const Callbacks callbacks_;

  std::mutex step_mu_;       // held for a whole step or release()
  std::string lost_race_{};  // this step's lost race, if any (under step_mu_)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  bool nudged_ = false;
  std::uint64_t watched_ = 0;                     // records given to observeWatched()
  std::optional<base::MonoTime> last_watched_{};  // when the last one came
  bool leader_ = false;
  base::MonoTime last_success_{};                // when our last successful write was sent
  std::optional<base::MonoTime> last_answer_{};  // lastAnswer()
  // The last observed record: parsed, as stored (the base of the next update), and when it last
  // changed on the monotonic clock.
  std::optional<kube::Lease> observed_{};
  kube::Json observed_object_{};
  std::string observed_key_{};
  base::MonoTime observed_at_{};
  std::optional<std::string> reported_holder_{};
  std::string last_error_{};
  std::mt19937_64 random_;
};

}  // namespace ekco::agent
