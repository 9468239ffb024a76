// The one server loop of the agent's HTTP servers: the health socket (serve/health_server.cc,
// plain HTTP on a unix socket and an optional TCP /metrics listener) and the admission webhook
// (features/webhook/webhook_server.cc, HTTPS). The loop knows connections, not protocols: what
// is spoken on a connection is its Session's.
//
//   - One poll over the listeners, a wake-up pipe and every connection waiting for a byte; a
//     waiting connection holds no thread. When a byte arrives the connection is queued for a
//     worker, which calls its Session's serve() and hands it back to the loop to wait for its
//     next request (kIdle) or closes it (kClose).
//   - Deadlines: a connection has first_byte_timeout from its accept to be served the first time
//     (its handshake, for TLS), request_timeout from each further byte to its answer, and
//     whatever deadline its session set before handing it back (Context::setDeadline) to wait
//     for its next request. A waiting connection past its deadline is closed; one being served
//     is shut down, so the worker's blocking read or write returns.
//   - Listeners have pools of their own: at most max_connections open and at most `workers`
//     served at once per listener, so clients holding one listener's slots never delay
//     another's. At max_connections a listener either waits (its newcomers stay in the kernel's
//     backlog until one of its connections ends) or, with evict_when_full, closes its connection
//     waiting longest for a byte for each newcomer.
//   - At most max_kept_alive connections served once are kept between requests (the least
//     recently active are closed beyond: a TLS session costs ~50 KiB). One source address (the
//     peer's IP; every unix socket peer is one source) has at most per_source_workers
//     connections served at once; its others wait their turn.
// HTTP pipelining is the session's business: it serves what it has buffered before handing back.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/os/unique_fd.h"
#include "base/result.h"

namespace ekco::agent {

// What a worker serves a connection with. Created by ConnectionLoopOptions::open when the
// connection is accepted; owns the descriptor from then on (its destructor closes it).
class Session {
 public:
  enum class Outcome : std::uint8_t { kClose, kIdle };

  // What serve() may ask of the loop.
  class Context {
   public:
    // The connection's next deadline, from now. Only ever later than the one the loop may be
    // sleeping towards (it finds this one unexpired and sleeps again).
    virtual void setDeadline(std::chrono::milliseconds from_now) = 0;
    // The server is stopping: finish the current answer, serve no further request.
    virtual bool stopping() const = 0;

   protected:
    ~Context() = default;
  };

  virtual ~Session() = default;
  // Runs on a worker when a byte has arrived (or the peer closed): serves what it can read and
  // returns kIdle to wait for the next request in the loop (after setting the deadline for it),
  // or kClose. Must not throw.
  virtual Outcome serve(Context& context) = 0;
};

// An accepted connection, for ConnectionLoopOptions::open.
struct Accepted {
  int fd = -1;               // the connection; the session takes it
  int family = 0;            // AF_UNIX, AF_INET or AF_INET6
  std::size_t listener = 0;  // its index in ConnectionLoopOptions::listeners
};

struct Listener {
  base::UniqueFd fd{};  // bound and listening (the loop makes it non-blocking)
  std::size_t max_connections = 32;
  bool evict_when_full = false;
  std::size_t workers = 1;
};

struct ConnectionLoopOptions {
  std::string name = "server";  // thread names: <name>-accept, <name>-worker
  std::vector<Listener> listeners{};
  // Under the loop's lock: cheap, and must not throw. nullptr closes the connection.
  std::function<std::unique_ptr<Session>(const Accepted&)> open{};
  std::chrono::milliseconds first_byte_timeout{std::chrono::seconds(5)};
  std::chrono::milliseconds request_timeout{std::chrono::seconds(5)};
  std::size_t max_kept_alive = std::numeric_limits<std::size_t>::max();
  std::size_t per_source_workers = std::numeric_limits<std::size_t>::max();
};

struct ConnectionLoopStats {
  std::uint64_t evicted = 0;    // closed, waiting for a byte, for a newcomer or max_kept_alive
  std::uint64_t timed_out = 0;  // closed or shut down at a deadline
};

class ConnectionLoop {
 public:
  // Starts the loop's thread. Workers (at most the listeners' workers together) start as they
  // are first needed and stay until stop().
  [[nodiscard]] static base::Result<std::unique_ptr<ConnectionLoop>> start(
      ConnectionLoopOptions options);

  ~ConnectionLoop();  // stop()
  ConnectionLoop(const ConnectionLoop&) = delete;
  ConnectionLoop& operator=(const ConnectionLoop&) = delete;

  ConnectionLoopStats stats() const;

  // Closes the listeners and every connection (a connection being served is shut down first,
  // and its answer cut short) and joins the threads. Idempotent.
  void stop();

  class Impl;

 private:
  explicit ConnectionLoop(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ekco::agent
