// Watches: what a controller reads from the API without asking for it, declared in its spec
// (ControllerSpec::watches, agent/controller/spec.h) and owned by the feature or the policy that
// reads it (features/envoy: the Envoy pods; policy/node_watches.h: the nodes; ...). The runtime
// (agent/runtime/watches.h) builds each declared watch once, shares it by key between the specs
// that declare it, runs it for its scope and wakes the declaring controllers on every change; it
// knows no watch by name. A controller's build takes the watch it declared from
// ControllerDeps::watches and reads it through a function (observe()), which returns copies.
//
// InformerWatch, below, is one informer over one selection: most watches are one. A watch that
// is more (the internal load balancer's apiserver sources with their fallbacks; the pods of
// each unhealthy node, following the node watch) implements Watch itself.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "agent/controller/controller.h"
#include "base/clock.h"
#include "base/os/thread.h"
#include "base/result.h"
#include "kube/client.h"
#include "kube/resource.h"
#include "kube/watch/informer.h"

namespace ekco::agent {

// The longest an agent's watch waits between attempts while the API fails (client-go's reflector
// waits up to 30 s). An agent runs about five watches, so even a long outage costs the API about
// two requests a second per agent, and every watch is back within 3 s of the API (issue 24: an
// agent recovers within 5 s of a fault's end; with 30 s, an 8 s outage could leave a watch
// waiting 12 s more).
inline constexpr std::chrono::milliseconds kCacheMaxBackoff{3000};

// Each running informer's label ("cluster-nodes", "pods on node-b") and statistics.
using WatchStatsFn =
    std::function<void(const std::string& label, const kube::InformerStats& stats)>;

// A running watch: one informer or a few. Thread-safety: every method may be called from any
// thread.
class Watch {
 public:
  virtual ~Watch() = default;
  // Node scope: from the agent's start to its stop. Leader scope: start() when this agent starts
  // leading, stop() when it stops, so that each term begins from an empty store (nothing listed
  // in an earlier term is trusted) and a follower runs none. Both idempotent; stop() waits for
  // the watch's informer threads.
  virtual void start() = 0;
  virtual void stop() = 0;
  // Called from the agent's loop about twice a second, for a watch that follows another (the
  // pods of the unhealthy nodes follow the node watch). Quick.
  virtual void supervise() {}
  // Each running informer's statistics, for /status, /metrics and /readyz.
  virtual void forEachStats(const WatchStatsFn& f) const = 0;
};

class Watches;

// What a watch is built from. References outlive the watch.
struct WatchContext {
  kube::KubeClient& client;
  const base::Clock& clock;
  const Config& config;
  const std::string& node_name;
  Watches& watches;  // the watches it follows, required through it
  // Wakes every controller that declared the watch: called on every change and after each list.
  std::function<void()> changed{};
  // A failed list or watch, with the informer's label for the agent's rate-limited log.
  std::function<void(std::string_view what, const base::Error& error)> failed{};
};

struct WatchSpec {
  // Unique among the agent's watches ("cluster-nodes"); the specs that declare the same key share
  // one watch. A string literal: the registry keeps the view for the agent's life.
  std::string_view key;
  Scope scope = Scope::kNode;
  // Its failures stand for the API's reachability: the runtime logs "api unreachable" once for
  // them (and "api reachable" when the agent is ready again), and one that has listed but lost
  // its connection makes the agent unready.
  bool reachability = false;
  std::function<std::shared_ptr<Watch>(const WatchContext&)> build{};
};

// The agent's watches, as a controller's build (and a watch that follows another) sees them.
class Watches {
 public:
  virtual ~Watches() = default;
  // The watch of `spec`, built on the first require of its key and shared after; `on_change`
  // (may be empty) is called on every change. Only before the watches start (the runtime
  // requires every enabled spec's watches before it builds the controllers). An error when the
  // key was declared with another kind of watch.
  template <typename W>
  base::Result<std::shared_ptr<W>> require(const WatchSpec& spec,
                                           std::function<void()> on_change = {}) {
    std::shared_ptr<W> typed =
        std::dynamic_pointer_cast<W>(requireWatch(spec, std::move(on_change)));
    if (!typed) {
      return base::Error("watch " + std::string(spec.key) +
                             ": not built (declared as two kinds of watch, one it follows not "
                             "built, or required after the watches started)",
                         base::ErrorCode::kInvalidArgument);
    }
    return typed;
  }

 protected:
  virtual std::shared_ptr<Watch> requireWatch(const WatchSpec& spec,
                                              std::function<void()> on_change) = 0;
};

// What a reader of one informer sees: copies of the records, and whether it has listed yet
// (nothing is decided on a watch that has not).
template <typename Record>
struct Observed {
  bool synced = false;
  std::vector<Record> items{};
};

// One informer's selection.
template <typename Record>
struct InformerSource {
  kube::Resource resource;
  std::string ns{};  // "" for every namespace, or a cluster-scoped resource
  std::string label_selector{};
  std::string field_selector{};
  // How an object becomes its record: a decoder of the object's text (kube::decodeNode), or a
  // projection of the parsed object.
  typename kube::Informer<Record>::Decoder decode = nullptr;
  typename kube::Informer<Record>::Projection project{};
  std::string label;  // in /status, /metrics: "cluster-nodes"
  std::string what;   // in the log: "cluster node cache"
  // A 404 on the resource means this cluster does not serve it (no CRD; Kubernetes before 1.21
  // for EndpointSlices): the watch counts as listed and empty, not as an outage.
  bool absent_is_empty = false;
};

template <typename Record>
class InformerWatch final : public Watch {
 public:
  InformerWatch(const WatchContext& context, InformerSource<Record> source)
      : client_(context.client),
        clock_(context.clock),
        changed_(context.changed),
        failed_(context.failed),
        source_(std::move(source)) {}
  ~InformerWatch() override { stop(); }
  InformerWatch(const InformerWatch&) = delete;
  InformerWatch& operator=(const InformerWatch&) = delete;

  void start() override {
    std::lock_guard lock(mu_);
    if (run_) return;
    auto run = std::make_shared<Run>();
    const kube::InformerOptions options{.label_selector = source_.label_selector,
                                        .field_selector = source_.field_selector,
                                        .max_backoff = kCacheMaxBackoff};
    if (source_.decode != nullptr) {
      run->informer =
          std::make_unique<kube::Informer<Record>>(client_, clock_, source_.resource, source_.ns,
                                                   options, source_.decode, handlers(run->absent));
    } else {
      run->informer =
          std::make_unique<kube::Informer<Record>>(client_, clock_, source_.resource, source_.ns,
                                                   options, source_.project, handlers(run->absent));
    }
    run->thread =
        base::startThread("informer", [informer = run->informer.get()] { informer->run(); });
    run_ = std::move(run);
  }

  // The informer is stopped and its thread joined after the lock is released: a watch stuck in
  // a request to a hung API must not hold up the readers (/readyz, /status) while it winds down.
  void stop() override {
    std::shared_ptr<Run> run;
    {
      std::lock_guard lock(mu_);
      run = std::move(run_);
    }
    if (run) run->stop();
  }

  void forEachStats(const WatchStatsFn& f) const override {
    if (auto s = stats()) f(source_.label, *s);
  }

  // nullopt while not running.
  std::optional<kube::InformerStats> stats() const {
    auto run = current();
    if (!run) return std::nullopt;
    return run->informer->stats();
  }

  bool running() const { return current() != nullptr; }

  // Listed, or known absent from this cluster; false while not running.
  bool synced() const {
    auto run = current();
    return run && (run->absent.load() || run->informer->synced());
  }

  // The store is the truth, also for an absent resource: a CRD installed later is listed by the
  // informer's next attempt.
  Observed<Record> observe() const {
    Observed<Record> out;
    auto run = current();
    if (!run) return out;
    out.synced = run->absent.load() || run->informer->synced();
    out.items = run->informer->list();
    return out;
  }

  std::optional<Record> get(std::string_view ns, std::string_view name) const {
    auto run = current();
    if (!run) return std::nullopt;
    return run->informer->get(ns, name);
  }

  // f(const Record&) for each cached record under the store's read lock (no copies; f must not
  // block). Nothing while not running.
  template <typename F>
  void forEach(F&& f) const {
    if (auto run = current()) run->informer->forEach(std::forward<F>(f));
  }

 private:
  struct Run {
    std::unique_ptr<kube::Informer<Record>> informer;
    std::thread thread;
    std::atomic<bool> absent{false};
    ~Run() { stop(); }
    void stop() {
      if (informer) informer->stop();
      if (thread.joinable()) thread.join();
    }
  };

  std::shared_ptr<Run> current() const {
    std::lock_guard lock(mu_);
    return run_;
  }

  kube::InformerHandlers<Record> handlers(std::atomic<bool>& absent) {
    auto changed = [this] {
      if (changed_) changed_();
    };
    return {.on_add = [changed](const Record&) { changed(); },
            .on_update = [changed](const Record&, const Record&) { changed(); },
            .on_delete = [changed](const Record&) { changed(); },
            .on_error =
                [this, changed, &absent](const base::Error& e) {
                  if (source_.absent_is_empty && e.code() == base::ErrorCode::kNotFound) {
                    if (!absent.exchange(true)) changed();
                    return;
                  }
                  if (failed_) failed_(source_.what, e);
                },
            // A controller woken by on_add during the first list may have read the watch as not
            // synced yet and gone back to sleep: wake it once the list is done.
            .on_synced = changed};
  }

  kube::KubeClient& client_;
  const base::Clock& clock_;
  std::function<void()> changed_;
  std::function<void(std::string_view, const base::Error&)> failed_;
  const InformerSource<Record> source_;
  mutable std::mutex mu_;
  std::shared_ptr<Run> run_;  // null while not running
};

// The InformerWatch of `source`, for a WatchSpec's build.
template <typename Record>
std::function<std::shared_ptr<Watch>(const WatchContext&)> informerWatch(
    std::function<InformerSource<Record>(const WatchContext&)> source) {
  return [source = std::move(source)](const WatchContext& context) -> std::shared_ptr<Watch> {
    return std::make_shared<InformerWatch<Record>>(context, source(context));
  };
}

// A reader of an InformerWatch the spec declared, for a controller's build.
template <typename Record>
base::Result<std::function<Observed<Record>()>> observeWatch(Watches& watches,
                                                             const WatchSpec& spec) {
  auto watch = watches.require<InformerWatch<Record>>(spec);
  if (!watch) return std::move(watch).error();
  return std::function<Observed<Record>()>([w = std::move(*watch)] { return w->observe(); });
}

}  // namespace ekco::agent
