// The cluster-wide "one control-plane disruption at a time" Lease: `ekco-disruption` in the
// leader-election namespace. Whoever restarts a control-plane component (a certificate renewal
// today; reboots and upgrades can take it the same way) holds it from before the first restart
// until the result is verified, so two primaries never restart their apiservers at once.
//
// The holder writes holderIdentity ("<node>/<what>"), acquireTime, renewTime and
// leaseDurationSeconds; a Lease whose renewTime + leaseDurationSeconds has passed is free (a
// dead holder blocks for at most the TTL). Every write is an update guarded by resourceVersion,
// so two takers racing for a free Lease cannot both win.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"
#include "kube/client.h"

namespace ekco::agent {

inline constexpr std::string_view kDisruptionLeaseName = "ekco-disruption";

struct DisruptionLeaseOptions {
  std::string ns = "kurl";
  std::string holder{};  // "cp-1/certificates"
  std::chrono::seconds ttl{std::chrono::minutes(15)};
};

class DisruptionLease {
 public:
  DisruptionLease(kube::KubeClient& client, const base::Clock& clock,
                  DisruptionLeaseOptions options);
  // Takes the Lease when it is free, expired or already ours (renewing it). kConflict naming the
  // holder and until when when someone else holds it; other errors from the API.
  [[nodiscard]] base::Status acquire();
  // Gives it up (renewTime cleared, holder emptied) if it is still ours; ok when it is not.
  [[nodiscard]] base::Status release();
  // acquire(), retried every `poll` until `timeout`; the last error when it never became free.
  // `wait` sleeps between tries and returns false when the caller is stopping (the agent shuts
  // down): then kCancelled; empty: a plain sleep.
  [[nodiscard]] base::Status acquireWithin(
      std::chrono::milliseconds timeout, std::chrono::milliseconds poll,
      const std::function<bool(std::chrono::milliseconds)>& wait = {});

 private:
  kube::KubeClient& client_;
  const base::Clock& clock_;
  DisruptionLeaseOptions options_;
};

}  // namespace ekco::agent
