// kube-controller-manager's and the kubelets' part of a node's life, simulated for tests of
// node recovery (issue 20). Off unless ServerOptions::controllers.enabled; then, on every
// kubelet pass (Server::runKubelet, every kubelet_interval), in this order:
//   1. Kubelets. A node whose kubelet was started (startKubelet(node, boot_id)) renews its Lease
//      kube-node-lease/<node> every node_lease_renew_interval, and posts Ready True (reason
//      KubeletReady) and status.nodeInfo.bootID when they differ. A stopped kubelet
//      (stopKubelet: a shutdown, or a partition — the API cannot tell them apart) does nothing.
//      It also starts the StatefulSet pods bound to its node (5) and confirms the unmount of
//      volumes no pod of its node uses (4).
//   2. The node lifecycle controller, every node_monitor_period, for each node that has a Lease
//      in kube-node-lease: not renewed for node_monitor_grace_period → every condition Unknown
//      (reason NodeStatusUnknown, "Kubelet stopped posting node status.") and the taints
//      node.kubernetes.io/unreachable:NoExecute (timeAdded) and :NoSchedule; Ready True again →
//      both taints removed.
//   3. The taint manager (NoExecute): a pod on a node with a NoExecute taint it does not
//      tolerate is deleted (gracefully, as an eviction) at once; one it tolerates for
//      tolerationSeconds is deleted at the taint's timeAdded + tolerationSeconds ×
//      toleration_scale.
//   4. The pod garbage collector, every pod_gc_period: terminating pods on a node that carries
//      node.kubernetes.io/out-of-service and whose Ready is not True are deleted without grace
//      (KEP-2268). The attach-detach controller, every pass: a VolumeAttachment of a node none
//      of whose pods uses its PersistentVolume any more is deleted when the node carries the
//      out-of-service taint (force detach), when its kubelet runs (it unmounted), or after
//      max_wait_for_unmount (the controller's 6 minutes).
//   5. The StatefulSet controller and the scheduler, in one step: for each StatefulSet, a missing
//      ordinal's pod (a terminating namesake blocks it, as in Kubernetes) is created from the
//      template with its volumeClaimTemplates' PVCs and bound to the first node (by name) that
//      is Ready, schedulable and has no NoSchedule/NoExecute taint. Its kubelet (1) attaches
//      each PVC's volume (a VolumeAttachment; while another node still holds one for that
//      volume the pod stays Pending: a multi-attach error) and marks it Running and Ready.
// Where this differs from Kubernetes: see tests/kubesim/README.md "Node lifecycle".
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"

namespace ekco::kubesim {

class Store;

struct ClusterControllersOptions {
  bool enabled = false;
  // The kubelet: nodeLeaseDurationSeconds 40, renewed every 10 s.
  std::chrono::milliseconds node_lease_renew_interval{10000};
  // kube-controller-manager --node-monitor-grace-period (40 s; 50 s from Kubernetes 1.32) and
  // --node-monitor-period (5 s).
  std::chrono::milliseconds node_monitor_grace_period{40000};
  std::chrono::milliseconds node_monitor_period{5000};
  // The pod GC's gcCheckPeriod (20 s).
  std::chrono::milliseconds pod_gc_period{20000};
  // The attach-detach controller's maxWaitForUnmountDuration (6 min).
  std::chrono::milliseconds max_wait_for_unmount{360000};
  // tolerationSeconds are multiplied by this (300 s of DefaultTolerationSeconds × 0.05 = 15 s).
  double toleration_scale = 1.0;

  // Every period above × factor (and toleration_scale = factor), enabled.
  static ClusterControllersOptions scaled(double factor);
};

// A StatefulSet NS/NAME of one replica whose pod (NAME-0, terminationGracePeriodSeconds
// `grace_seconds`) mounts a ReadWriteOnce volume: the PersistentVolume pv-NAME and its bound
// claim data-NAME-0, as the tests and bench/recovery.sh use it.
std::vector<nlohmann::json> statefulSetWithVolume(const std::string& ns, const std::string& name,
                                                  int grace_seconds);

class NodeLifecycle {
 public:
  NodeLifecycle(Store& store, const base::Clock& clock, ClusterControllersOptions options);

  // The node's kubelet runs (again) with this boot id: it heartbeats from the next pass on.
  void startKubelet(const std::string& node, const std::string& boot_id);
  // The node's kubelet stops reaching the API (power-off or partition).
  void stopKubelet(const std::string& node);
  bool kubeletRunning(const std::string& node) const;

  void pass();
  const ClusterControllersOptions& options() const { return options_; }

 private:
  struct Kubelet {
    bool running = false;
    std::string boot_id{};
    std::optional<base::MonoTime> last_renew{};
  };
  void kubelets();
  void nodeLifecycleController();
  void taintManager();
  void podGc();
  void attachDetach();
  void statefulSets();
  void startPods();

  Store& store_;
  const base::Clock& clock_;
  ClusterControllersOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Kubelet> kubelets_;
  std::optional<base::MonoTime> last_monitor_{};
  std::optional<base::MonoTime> last_gc_{};
  // VolumeAttachment name → when the attach-detach controller first saw it unused.
  std::map<std::string, base::WallTime> unused_since_{};
};

}  // namespace ekco::kubesim
