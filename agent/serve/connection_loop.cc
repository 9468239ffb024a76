#include "agent/serve/connection_loop.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "base/clock.h"
#include "base/os/thread.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;

class ConnectionLoop::Impl {
 public:
  explicit Impl(ConnectionLoopOptions options) : options_(std::move(options)) {}
  ~Impl() { stop(); }

  base::Status start();
  void stop();
  ConnectionLoopStats stats() const {
    return ConnectionLoopStats{.evicted = evicted_.load(), .timed_out = timed_out_.load()};
  }

 private:
  enum class State : std::uint8_t {
    kNew,     // accepted, waiting for its first byte (polled)
    kIdle,    // served, waiting for its next request (polled)
    kQueued,  // a byte arrived, waiting for a worker
    kBusy,    // a worker has it
  };
  struct Conn {
    int fd = -1;  // guarded by mu_; -1 once it is closed or a worker is about to close it
    std::size_t listener = 0;
    std::string source{};  // the peer's address bytes ("" for a unix socket)
    State state = State::kNew;
    base::MonoTime deadline{};
    bool expired = false;
    bool served = false;                 // served once: kept alive between requests
    std::uint64_t order = 0;             // accept order, then last activity, for eviction
    std::unique_ptr<Session> session{};  // owns the descriptor
  };
  using ConnPtr = std::shared_ptr<Conn>;

  // Session::Context for the connection a worker serves.
  class Serving final : public Session::Context {
   public:
    Serving(Impl& impl, Conn& conn) : impl_(impl), conn_(conn) {}
    void setDeadline(std::chrono::milliseconds from_now) override {
      std::lock_guard lock(impl_.mu_);
      conn_.deadline = impl_.clock_.monoNow() + from_now;
    }
    bool stopping() const override { return impl_.stopping_; }

   private:
    Impl& impl_;
    Conn& conn_;
  };

  void loop();
  void acceptNew(std::size_t listener, base::MonoTime now);
  void dispatch(base::MonoTime now);
  void limitKeptAlive();
  void remove(const ConnPtr& c);       // under mu_
  void closeByLoop(const ConnPtr& c);  // under mu_; a connection no worker has
  void workerLoop();
  void wake() {
    const char byte = 'w';
    [[maybe_unused]] const ssize_t written = ::write(wake_write_.get(), &byte, 1);
  }

  ConnectionLoopOptions options_;
  base::SystemClock clock_;
  base::UniqueFd wake_read_;
  base::UniqueFd wake_write_;
  std::thread loop_thread_;
  std::vector<std::thread> workers_;  // started by the loop thread, under mu_
  std::size_t max_workers_ = 0;       // the listeners' workers together
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  bool stopped_ = false;
  bool started_ = false;
  std::atomic<std::uint64_t> evicted_{0};
  std::atomic<std::uint64_t> timed_out_{0};

  // The connections, their states, the work queue and the workers' hand-backs.
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::list<ConnPtr> conns_;                                    // every open connection
  std::deque<ConnPtr> queued_;                                  // kQueued, in arrival order
  std::deque<ConnPtr> work_;                                    // dispatched, not yet taken
  std::vector<std::pair<ConnPtr, Session::Outcome>> returned_;  // handed back by workers
  std::vector<std::size_t> open_;                               // per listener: open connections
  std::vector<std::size_t> busy_;              // per listener: dispatched or being served
  std::vector<base::MonoTime> resting_until_;  // per listener: accept failed for lack of fds
  std::map<std::string, std::size_t> busy_by_source_;
  std::size_t free_workers_ = 0;  // workers started and serving no connection
  std::uint64_t order_ = 0;
};

base::Status ConnectionLoop::Impl::start() {
  if (!options_.open)
    return Error("a server loop needs a session factory", ErrorCode::kInvalidArgument);
  for (const Listener& l : options_.listeners) {
    if (::fcntl(l.fd.get(), F_SETFL, ::fcntl(l.fd.get(), F_GETFL) | O_NONBLOCK) != 0) {
      return base::errnoError("fcntl", errno);
    }
  }
  int pipe_fds[2] = {-1, -1};
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return base::errnoError("pipe", errno);
  wake_read_ = base::UniqueFd(pipe_fds[0]);
  wake_write_ = base::UniqueFd(pipe_fds[1]);
  open_.assign(options_.listeners.size(), 0);
  busy_.assign(options_.listeners.size(), 0);
  resting_until_.assign(options_.listeners.size(), base::MonoTime{});
  started_ = true;
  for (const Listener& l : options_.listeners) max_workers_ += std::max<std::size_t>(l.workers, 1);
  loop_thread_ = base::startThread(options_.name + "-accept", [this] { loop(); });
  return base::ok();
}

void ConnectionLoop::Impl::remove(const ConnPtr& c) {
  --open_[c->listener];
  conns_.remove(c);
}

void ConnectionLoop::Impl::closeByLoop(const ConnPtr& c) {
  c->fd = -1;
  c->session.reset();
  remove(c);
}

void ConnectionLoop::Impl::acceptNew(std::size_t index, base::MonoTime now) {
  // Under mu_. Accepts what the backlog holds; a full listener evicts its connection waiting
  // longest for a byte (kNew first, then kIdle) for each newcomer, or leaves the rest waiting.
  const Listener& listener = options_.listeners[index];
  for (int i = 0; i < 64; ++i) {
    ConnPtr victim;
    if (open_[index] >= listener.max_connections) {
      if (!listener.evict_when_full) return;
      for (State want : {State::kNew, State::kIdle}) {
        for (const ConnPtr& c : conns_) {
          if (c->listener == index && c->state == want && (!victim || c->order < victim->order)) {
            victim = c;
          }
        }
        if (victim) break;
      }
      if (!victim) return;  // every one is being served or queued: the rest wait in the backlog
    }
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    const int fd =
        ::accept4(listener.fd.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors or memory: the backlog stays readable, so the listener rests a
      // moment instead of waking the loop at once, again and again.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        resting_until_[index] = now + std::chrono::milliseconds(100);
      }
      return;
    }
    if (victim) {
      closeByLoop(victim);
      ++evicted_;
    }
    auto conn = std::make_shared<Conn>();
    conn->listener = index;
    if (peer.ss_family == AF_INET6 || peer.ss_family == AF_INET) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (peer.ss_family == AF_INET6) {
        const auto& a = reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr;
        conn->source.assign(reinterpret_cast<const char*>(&a), sizeof(a));
      } else {
        const auto& a = reinterpret_cast<const sockaddr_in&>(peer).sin_addr;
        conn->source.assign(reinterpret_cast<const char*>(&a), sizeof(a));
      }
    }
    conn->session = options_.open(Accepted{.fd = fd, .family = peer.ss_family, .listener = index});
    if (!conn->session) {
      ::close(fd);
      continue;
    }
    conn->fd = fd;
    conn->deadline = now + options_.first_byte_timeout;
    conn->order = order_++;
    conns_.push_back(std::move(conn));
    ++open_[index];
  }
}

void ConnectionLoop::Impl::limitKeptAlive() {
  // Under mu_. At most max_kept_alive connections served once wait between requests, the least
  // recently active closed beyond.
  std::vector<ConnPtr> kept;
  for (const ConnPtr& c : conns_) {
    if (c->served && (c->state == State::kIdle || c->state == State::kQueued)) kept.push_back(c);
  }
  if (kept.size() <= options_.max_kept_alive) return;
  std::sort(kept.begin(), kept.end(), [](const ConnPtr& a, const ConnPtr& b) {
    // Idle ones first (a queued one has a request coming), the oldest first.
    if ((a->state == State::kIdle) != (b->state == State::kIdle)) return a->state == State::kIdle;
    return a->order < b->order;
  });
  for (std::size_t i = 0; i < kept.size() - options_.max_kept_alive; ++i) {
    const ConnPtr& c = kept[i];
    if (c->state == State::kQueued) queued_.erase(std::find(queued_.begin(), queued_.end(), c));
    closeByLoop(c);
    ++evicted_;
  }
}

void ConnectionLoop::Impl::dispatch(base::MonoTime now) {
  // Under mu_. Queued connections to free workers, in arrival order, skipping those whose
  // listener has its workers busy or whose source already has per_source_workers served.
  const std::size_t per_source = std::max<std::size_t>(options_.per_source_workers, 1);
  for (auto it = queued_.begin(); it != queued_.end();) {
    ConnPtr c = *it;
    const std::size_t workers = std::max<std::size_t>(options_.listeners[c->listener].workers, 1);
    auto source = busy_by_source_.find(c->source);
    if (busy_[c->listener] >= workers ||
        (source != busy_by_source_.end() && source->second >= per_source)) {
      ++it;
      continue;
    }
    ++busy_by_source_[c->source];
    ++busy_[c->listener];
    it = queued_.erase(it);
    c->state = State::kBusy;
    c->deadline = now + (c->served ? options_.request_timeout : options_.first_byte_timeout);
    // Workers start as they are first needed (an idle agent's probes, one at a time, need one)
    // and stay.
    if (work_.size() >= free_workers_ && workers_.size() < max_workers_) {
      try {
        workers_.push_back(base::startThread(options_.name + "-worker", [this] { workerLoop(); }));
        ++free_workers_;
      } catch (const std::exception&) {
        // No thread to be had (EAGAIN): the connection waits for a worker that exists, or for
        // its deadline.
      }
    }
    work_.push_back(std::move(c));
    work_cv_.notify_one();
  }
}

void ConnectionLoop::Impl::loop() {
  // One poll over the listeners with room, the wake-up pipe and every connection waiting for a
  // byte; sleeps until one of them is readable or the earliest deadline passes.
  const std::size_t listeners = options_.listeners.size();
  std::vector<pollfd> fds;
  std::vector<ConnPtr> polled;
  while (!stopping_) {
    fds.clear();
    polled.clear();
    int timeout_ms = -1;
    {
      std::lock_guard lock(mu_);
      const base::MonoTime now = clock_.monoNow();
      std::vector<bool> room(listeners, false);
      std::vector<bool> resting(listeners, false);
      for (std::size_t i = 0; i < listeners; ++i) {
        room[i] = open_[i] < options_.listeners[i].max_connections;
        if (resting_until_[i] > now) {
          resting[i] = true;
          const auto left =
              std::chrono::ceil<std::chrono::milliseconds>(resting_until_[i] - now).count();
          const int ms = static_cast<int>(std::clamp<long long>(left, 0, 60'000));
          timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
        }
      }
      for (const ConnPtr& c : conns_) {
        if (c->state == State::kNew || c->state == State::kIdle) {
          if (options_.listeners[c->listener].evict_when_full) room[c->listener] = true;
          polled.push_back(c);
        }
        if (c->expired || c->fd < 0) continue;
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(c->deadline - now).count();
        const int ms = static_cast<int>(std::clamp<long long>(left, 0, 60'000));
        timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
      }
      fds.push_back({wake_read_.get(), POLLIN, 0});
      for (std::size_t i = 0; i < listeners; ++i) {
        fds.push_back({room[i] && !resting[i] ? options_.listeners[i].fd.get() : -1, POLLIN, 0});
      }
      for (const ConnPtr& c : polled) fds.push_back({c->fd, POLLIN, 0});
    }
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (stopping_) break;
    if (n < 0 && errno != EINTR) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (n > 0 && (fds[0].revents & POLLIN) != 0) {
      char drain[64];
      while (::read(wake_read_.get(), drain, sizeof(drain)) > 0) {
      }
    }
    std::lock_guard lock(mu_);
    const base::MonoTime now = clock_.monoNow();
    // (1) What the workers handed back.
    for (auto& [c, outcome] : returned_) {
      --busy_[c->listener];
      if (auto source = busy_by_source_.find(c->source);
          source != busy_by_source_.end() && --source->second == 0) {
        busy_by_source_.erase(source);
      }
      if (outcome == Session::Outcome::kClose) {
        remove(c);  // the worker closed it
      } else {
        c->state = State::kIdle;
        c->served = true;
        c->expired = false;
        c->order = order_++;  // the least recently active go first (acceptNew, limitKeptAlive)
      }
    }
    returned_.clear();
    limitKeptAlive();
    // (2) Connections with a byte to read are queued for a worker (a closed one too: the worker
    // finds out).
    const std::size_t first_conn = 1 + listeners;
    for (std::size_t i = 0; n > 0 && i < polled.size(); ++i) {
      const ConnPtr& c = polled[i];
      if ((fds[first_conn + i].revents & (POLLIN | POLLHUP | POLLERR)) == 0 || c->fd < 0) continue;
      if (c->state != State::kNew && c->state != State::kIdle) continue;
      c->state = State::kQueued;
      c->deadline = now + (c->served ? options_.request_timeout : options_.first_byte_timeout);
      queued_.push_back(c);
    }
    // (3) Deadlines: a connection waiting is closed; one being served is shut down (its worker's
    // blocking read or write returns).
    for (auto it = conns_.begin(); it != conns_.end();) {
      ConnPtr c = *it++;
      if (c->expired || c->deadline > now || c->fd < 0) continue;
      ++timed_out_;
      if (c->state == State::kBusy) {
        c->expired = true;
        ::shutdown(c->fd, SHUT_RDWR);
        continue;
      }
      if (c->state == State::kQueued) queued_.erase(std::find(queued_.begin(), queued_.end(), c));
      closeByLoop(c);
    }
    // (4) Newcomers, then work for the free workers.
    for (std::size_t i = 0; n > 0 && i < listeners; ++i) {
      if ((fds[1 + i].revents & POLLIN) != 0) acceptNew(i, now);
    }
    dispatch(now);
  }
}

void ConnectionLoop::Impl::workerLoop() {
  for (;;) {
    ConnPtr c;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !work_.empty(); });
      if (stopping_) return;
      c = std::move(work_.front());
      work_.pop_front();
      --free_workers_;
    }
    Serving context(*this, *c);
    const Session::Outcome outcome = c->session->serve(context);
    if (outcome == Session::Outcome::kClose) {
      {
        // Before the descriptor is closed, so the loop never shuts down a reused number.
        std::lock_guard lock(mu_);
        c->fd = -1;
      }
      c->session.reset();
    }
    {
      std::lock_guard lock(mu_);
      returned_.emplace_back(std::move(c), outcome);
      ++free_workers_;
    }
    wake();
  }
}

void ConnectionLoop::Impl::stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_ || !started_) return;
  stopped_ = true;
  stopping_ = true;
  wake();
  if (loop_thread_.joinable()) loop_thread_.join();
  for (Listener& l : options_.listeners) l.fd.reset();
  {
    std::lock_guard lock(mu_);
    for (auto& c : conns_) {
      if (c->state == State::kBusy && c->fd >= 0) ::shutdown(c->fd, SHUT_RDWR);
    }
  }
  work_cv_.notify_all();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  {
    // Every worker has stopped: each connection is closed here, once.
    std::lock_guard lock(mu_);
    for (auto& c : conns_) {
      c->fd = -1;
      c->session.reset();
    }
    conns_.clear();
    queued_.clear();
    work_.clear();
    returned_.clear();
  }
  wake_read_.reset();
  wake_write_.reset();
}

ConnectionLoop::ConnectionLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConnectionLoop::~ConnectionLoop() { stop(); }

Result<std::unique_ptr<ConnectionLoop>> ConnectionLoop::start(ConnectionLoopOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  EKCO_TRY(impl->start());
  return std::unique_ptr<ConnectionLoop>(new ConnectionLoop(std::move(impl)));
}

ConnectionLoopStats ConnectionLoop::stats() const { return impl_->stats(); }
void ConnectionLoop::stop() { impl_->stop(); }

}  // namespace ekco::agent
