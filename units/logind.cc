#include "units/logind.h"

#include <fcntl.h>
#include <systemd/sd-bus.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <utility>

#include "units/sd_bus_objects.h"

namespace ekco::units {
namespace {

using base::Error;
using base::ErrorCode;
using base::Result;

constexpr const char* kDestination = "org.freedesktop.login1";
constexpr const char* kManagerPath = "/org/freedesktop/login1";
constexpr const char* kManagerIface = "org.freedesktop.login1.Manager";
// No sender= in the rule: sd-bus compares a match's sender with the message's unique name, and
// logind's signals come from its unique name, not org.freedesktop.login1.
constexpr const char* kMatch =
    "type='signal',interface='org.freedesktop.login1.Manager',member='PrepareForShutdown',"
    "path='/org/freedesktop/login1'";

using detail::BusError;
using detail::BusPtr;

struct SlotUnref {
  void operator()(sd_bus_slot* slot) const { sd_bus_slot_unref(slot); }
};
using SlotPtr = std::unique_ptr<sd_bus_slot, SlotUnref>;

ErrorCode codeForErrno(int err) {
  switch (err) {
    case ENOENT:
    case ECONNREFUSED:
    case ECONNRESET:
    case ENOTCONN:
    case EPIPE:
    case EHOSTUNREACH:  // org.freedesktop.DBus.Error.ServiceUnknown: logind not on the bus
      return ErrorCode::kUnavailable;
    case EACCES:
    case EPERM:
      return ErrorCode::kPermissionDenied;
    case ETIMEDOUT:
      return ErrorCode::kTimeout;
    default:
      return ErrorCode::kUnknown;
  }
}

Error busError(const std::string& context, int r, sd_bus_error* error) {
  const int err = r < 0 ? -r : EIO;
  std::string detail = std::strerror(err);
  if (error != nullptr && error->message != nullptr && error->message[0] != '\0') {
    detail = error->message;
  } else if (error != nullptr && error->name != nullptr) {
    detail = error->name;
  }
  return Error(context + ": " + detail, codeForErrno(err));
}

class SdBusLogind final : public Logind {
 public:
  SdBusLogind(BusPtr bus, const base::Clock& clock) : bus_(std::move(bus)), clock_(clock) {}
  ~SdBusLogind() override { slot_.reset(); }
  SdBusLogind(const SdBusLogind&) = delete;
  SdBusLogind& operator=(const SdBusLogind&) = delete;

  // Called once by connectLogind, before the object is handed out (the callback keeps `this`).
  int subscribe() {
    sd_bus_slot* slot = nullptr;
    const int r = sd_bus_add_match(bus_.get(), &slot, kMatch, &SdBusLogind::onSignal, this);
    if (r >= 0) slot_.reset(slot);
    return r;
  }

  Result<base::UniqueFd> inhibitShutdownDelay(const std::string& who,
                                              const std::string& why) override {
    const std::string context = "logind Inhibit(shutdown, delay)";
    BusError error;
    sd_bus_message* reply = nullptr;
    int r = sd_bus_call_method(bus_.get(), kDestination, kManagerPath, kManagerIface, "Inhibit",
                               error.get(), &reply, "ssss", "shutdown", who.c_str(), why.c_str(),
                               "delay");
    if (r < 0) return busError(context, r, error.get());
    int fd = -1;
    r = sd_bus_message_read(reply, "h", &fd);
    // The descriptor belongs to the message: keep a duplicate of our own.
    const int own = r >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
    const int saved = errno;
    sd_bus_message_unref(reply);
    if (r < 0) return busError(context + ": read reply", r, nullptr);
    if (own < 0) return Error(context + ": dup: " + std::strerror(saved));
    return base::UniqueFd(own);
  }

  Result<std::chrono::microseconds> inhibitDelayMax() override {
    BusError error;
    std::uint64_t usec = 0;
    const int r = sd_bus_get_property_trivial(bus_.get(), kDestination, kManagerPath, kManagerIface,
                                              "InhibitDelayMaxUSec", error.get(), 't', &usec);
    if (r < 0) return busError("logind InhibitDelayMaxUSec", r, error.get());
    return std::chrono::microseconds(usec);
  }

  Result<std::optional<bool>> waitPrepareForShutdown(std::chrono::milliseconds timeout) override {
    const base::MonoTime deadline = clock_.monoNow() + timeout;
    for (;;) {
      if (!pending_.empty()) {
        const bool value = pending_.front();
        pending_.pop_front();
        return std::optional<bool>(value);
      }
      const int processed = sd_bus_process(bus_.get(), nullptr);
      if (processed < 0) return busError("logind: read the bus", processed, nullptr);
      if (processed > 0) continue;  // maybe more queued
      const auto left =
          std::chrono::duration_cast<std::chrono::microseconds>(deadline - clock_.monoNow());
      if (left.count() <= 0) return std::optional<bool>();
      const int waited = sd_bus_wait(bus_.get(), static_cast<std::uint64_t>(left.count()));
      if (waited < 0 && waited != -EINTR) return busError("logind: wait", waited, nullptr);
    }
  }

 private:
  static int onSignal(sd_bus_message* m, void* userdata, sd_bus_error* /*error*/) {
    int value = 0;
    if (sd_bus_message_read(m, "b", &value) >= 0) {
      static_cast<SdBusLogind*>(userdata)->pending_.push_back(value != 0);
    }
    return 0;
  }

  BusPtr bus_;
  const base::Clock& clock_;  // the waits' deadlines
  SlotPtr slot_;
  std::deque<bool> pending_;
};

}  // namespace

Result<std::unique_ptr<Logind>> connectLogind(const std::string& bus_address,
                                              const base::Clock& clock) {
  const std::string context = "connect to logind at " + bus_address;
  auto fail = [&](int r) { return busError(context, r, nullptr); };
  sd_bus* raw = nullptr;
  int r = sd_bus_new(&raw);
  if (r < 0) return fail(r);
  BusPtr bus(raw);
  r = sd_bus_set_address(bus.get(), bus_address.c_str());
  if (r < 0) return fail(r);
  r = sd_bus_set_bus_client(bus.get(), 1);
  if (r < 0) return fail(r);
  r = sd_bus_negotiate_fds(bus.get(), 1);  // Inhibit answers with a file descriptor
  if (r < 0) return fail(r);
  r = sd_bus_start(bus.get());
  if (r < 0) return fail(r);
  const char* unique = nullptr;
  r = sd_bus_get_unique_name(bus.get(), &unique);
  if (r < 0) return fail(r);
  auto logind = std::make_unique<SdBusLogind>(std::move(bus), clock);
  r = logind->subscribe();
  if (r < 0) return busError(context + ": subscribe to PrepareForShutdown", r, nullptr);
  return std::unique_ptr<Logind>(std::move(logind));
}

}  // namespace ekco::units
