#include "units/systemd_manager.h"

#include <systemd/sd-bus.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "units/sd_bus_objects.h"

namespace ekco::units {
namespace {

using base::Error;
using base::ErrorCode;
using base::Result;
using base::Status;
using namespace std::chrono_literals;

constexpr const char* kDestination = "org.freedesktop.systemd1";
constexpr const char* kManagerPath = "/org/freedesktop/systemd1";
constexpr const char* kManagerIface = "org.freedesktop.systemd1.Manager";
constexpr const char* kUnitIface = "org.freedesktop.systemd1.Unit";
constexpr const char* kTimerIface = "org.freedesktop.systemd1.Timer";

// Method calls other than the job waits get this long for their reply (sd-bus' own default is
// 25 s; daemon-reload on a big host can take a while, so keep that order of magnitude).
constexpr std::uint64_t kCallTimeoutUsec = 60ULL * 1000 * 1000;

// RAII for the sd-bus C objects.
using detail::BusError;
using detail::BusPtr;

class Message {
 public:
  Message() = default;
  ~Message() { sd_bus_message_unref(msg_); }
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  sd_bus_message** out() { return &msg_; }
  sd_bus_message* get() const { return msg_; }

 private:
  sd_bus_message* msg_ = nullptr;
};

class Slot {
 public:
  Slot() = default;
  ~Slot() { sd_bus_slot_unref(slot_); }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  sd_bus_slot** out() { return &slot_; }

 private:
  sd_bus_slot* slot_ = nullptr;
};

ErrorCode codeForErrno(int err) {
  switch (err) {
    case ENOENT:
      return ErrorCode::kNotFound;
    case EEXIST:
      return ErrorCode::kAlreadyExists;
    case EACCES:
    case EPERM:
      return ErrorCode::kPermissionDenied;
    case ETIMEDOUT:
      return ErrorCode::kTimeout;
    case EINVAL:
      return ErrorCode::kInvalidArgument;
    case ECONNREFUSED:
    case ECONNRESET:
    case ENOTCONN:
    case EPIPE:
    case ESHUTDOWN:
    case EHOSTUNREACH:  // org.freedesktop.DBus.Error.ServiceUnknown: systemd not on the bus
      return ErrorCode::kUnavailable;
    case ECANCELED:
      return ErrorCode::kCancelled;
    default:
      return ErrorCode::kUnknown;
  }
}

// "<context>: <what systemd or sd-bus said>". `r` is the negative errno sd-bus returned; sd-bus
// maps well-known error names to it (org.freedesktop.systemd1.NoSuchUnit -> ENOENT, ...).
Error busError(const std::string& context, int r, const sd_bus_error* error) {
  const int err = r < 0 ? -r : EIO;
  std::string detail;
  if (error != nullptr && sd_bus_error_has_name(error, "org.freedesktop.systemd1.NoSuchUnit")) {
    detail = "unit not found";
  } else if (error != nullptr && error->message != nullptr && error->message[0] != '\0') {
    detail = error->message;
  } else if (error != nullptr && error->name != nullptr) {
    detail = error->name;
  } else {
    detail = std::strerror(err);
  }
  return Error(context + ": " + detail, codeForErrno(err));
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ' ';
    out += n;
  }
  return out;
}

// Appends the string array `names` ("as") to `m`.
int appendStrings(sd_bus_message* m, const std::vector<std::string>& names) {
  int r = sd_bus_message_open_container(m, 'a', "s");
  for (const auto& n : names) {
    if (r < 0) return r;
    r = sd_bus_message_append_basic(m, 's', n.c_str());
  }
  if (r < 0) return r;
  return sd_bus_message_close_container(m);
}

// Reads an "a(sss)" change list from the current position of `m`.
Result<std::vector<UnitFileChange>> readChanges(sd_bus_message* m, const std::string& context) {
  std::vector<UnitFileChange> changes;
  int r = sd_bus_message_enter_container(m, 'a', "(sss)");
  if (r < 0) return busError(context + ": read reply", r, nullptr);
  for (;;) {
    const char* type = nullptr;
    const char* file = nullptr;
    const char* destination = nullptr;
    r = sd_bus_message_read(m, "(sss)", &type, &file, &destination);
    if (r < 0) return busError(context + ": read reply", r, nullptr);
    if (r == 0) break;
    changes.push_back(UnitFileChange{.type = type, .file = file, .destination = destination});
  }
  r = sd_bus_message_exit_container(m);
  if (r < 0) return busError(context + ": read reply", r, nullptr);
  return changes;
}

// A JobRemoved(uoss) signal seen while waiting for a job.
struct JobRemoved {
  std::string job{};
  std::string unit{};
  std::string result{};
};

int onJobRemoved(sd_bus_message* m, void* userdata, sd_bus_error* /*ret_error*/) {
  std::uint32_t id = 0;
  const char* job = nullptr;
  const char* unit = nullptr;
  const char* result = nullptr;
  if (sd_bus_message_read(m, "uoss", &id, &job, &unit, &result) < 0) return 0;  // not ours
  static_cast<std::vector<JobRemoved>*>(userdata)->push_back(
      JobRemoved{.job = job, .unit = unit, .result = result});
  return 0;
}

class SdBusSystemdManager final : public SystemdManager {
 public:
  SdBusSystemdManager(BusPtr bus, const base::Clock& clock) : bus_(std::move(bus)), clock_(clock) {}

  Status reload() override {
    std::lock_guard lock(mu_);
    BusError error;
    Message reply;
    const int r = sd_bus_call_method(bus_.get(), kDestination, kManagerPath, kManagerIface,
                                     "Reload", error.get(), reply.out(), "");
    if (r < 0) return busError("daemon-reload", r, error.get());
    return base::ok();
  }

  Result<std::vector<UnitFileChange>> enableUnitFiles(
      const std::vector<std::string>& names) override {
    std::lock_guard lock(mu_);
    const std::string context = "enable " + joinNames(names);
    Message call;
    int r = sd_bus_message_new_method_call(bus_.get(), call.out(), kDestination, kManagerPath,
                                           kManagerIface, "EnableUnitFiles");
    if (r >= 0) r = appendStrings(call.get(), names);
    if (r >= 0) r = sd_bus_message_append(call.get(), "bb", 0, 1);  // runtime=false, force=true
    if (r < 0) return busError(context + ": build call", r, nullptr);
    BusError error;
    Message reply;
    r = sd_bus_call(bus_.get(), call.get(), kCallTimeoutUsec, error.get(), reply.out());
    if (r < 0) return busError(context, r, error.get());
    int carries_install_info = 0;
    r = sd_bus_message_read(reply.get(), "b", &carries_install_info);
    if (r < 0) return busError(context + ": read reply", r, nullptr);
    return readChanges(reply.get(), context);
  }

  Result<std::vector<UnitFileChange>> disableUnitFiles(
      const std::vector<std::string>& names) override {
    std::lock_guard lock(mu_);
    const std::string context = "disable " + joinNames(names);
    Message call;
    int r = sd_bus_message_new_method_call(bus_.get(), call.out(), kDestination, kManagerPath,
                                           kManagerIface, "DisableUnitFiles");
    if (r >= 0) r = appendStrings(call.get(), names);
    if (r >= 0) r = sd_bus_message_append(call.get(), "b", 0);  // runtime=false
    if (r < 0) return busError(context + ": build call", r, nullptr);
    BusError error;
    Message reply;
    r = sd_bus_call(bus_.get(), call.get(), kCallTimeoutUsec, error.get(), reply.out());
    if (r < 0) return busError(context, r, error.get());
    return readChanges(reply.get(), context);
  }

  Status startUnit(const std::string& name, std::chrono::milliseconds timeout) override {
    return runJob("StartUnit", "start " + name, name, timeout);
  }

  Status stopUnit(const std::string& name, std::chrono::milliseconds timeout) override {
    return runJob("StopUnit", "stop " + name, name, timeout);
  }

  Status restartUnit(const std::string& name, std::chrono::milliseconds timeout) override {
    return runJob("RestartUnit", "restart " + name, name, timeout);
  }

  Result<UnitState> unitState(const std::string& name) override {
    std::lock_guard lock(mu_);
    const std::string context = "unit state of " + name;
    auto path = loadUnit(name, context);
    if (!path) return std::move(path).error();
    UnitState state;
    EKCO_TRY(stringProperty(*path, kUnitIface, "LoadState", state.load_state, context));
    EKCO_TRY(stringProperty(*path, kUnitIface, "ActiveState", state.active_state, context));
    EKCO_TRY(stringProperty(*path, kUnitIface, "SubState", state.sub_state, context));
    EKCO_TRY(stringProperty(*path, kUnitIface, "UnitFileState", state.unit_file_state, context));
    return state;
  }

  Result<TimerState> timerState(const std::string& name) override {
    std::lock_guard lock(mu_);
    const std::string context = "timer state of " + name;
    auto path = loadUnit(name, context);
    if (!path) return std::move(path).error();
    std::uint64_t next = 0;
    std::uint64_t last = 0;
    EKCO_TRY(usecProperty(*path, "NextElapseUSecRealtime", next, context));
    EKCO_TRY(usecProperty(*path, "LastTriggerUSec", last, context));
    TimerState state;
    if (next != 0) state.next_elapse_realtime_usec = next;
    if (last != 0) state.last_trigger_usec = last;
    return state;
  }

 private:
  // Manager.LoadUnit: the unit's object path (loading it if systemd has not yet).
  Result<std::string> loadUnit(const std::string& name, const std::string& context) {
    BusError error;
    Message reply;
    int r = sd_bus_call_method(bus_.get(), kDestination, kManagerPath, kManagerIface, "LoadUnit",
                               error.get(), reply.out(), "s", name.c_str());
    if (r < 0) return busError(context, r, error.get());
    const char* path = nullptr;
    r = sd_bus_message_read(reply.get(), "o", &path);
    if (r < 0) return busError(context + ": read LoadUnit reply", r, nullptr);
    return std::string(path);
  }

  Status stringProperty(const std::string& path, const char* iface, const char* member,
                        std::string& out, const std::string& context) {
    BusError error;
    char* value = nullptr;
    const int r = sd_bus_get_property_string(bus_.get(), kDestination, path.c_str(), iface, member,
                                             error.get(), &value);
    if (r < 0) return busError(context + ": " + member, r, error.get());
    out = value;
    std::free(value);
    return base::ok();
  }

  Status usecProperty(const std::string& path, const char* member, std::uint64_t& out,
                      const std::string& context) {
    BusError error;
    const int r = sd_bus_get_property_trivial(bus_.get(), kDestination, path.c_str(), kTimerIface,
                                              member, error.get(), 't', &out);
    if (r < 0) return busError(context + ": " + member, r, error.get());
    return base::ok();
  }

  // Manager.Subscribe once per connection: real systemd sends most signals only to subscribers
  // (a job's own JobRemoved reaches the client that queued it either way). A systemd or mock
  // without the method is not an error.
  void subscribeOnce() {
    if (subscribed_) return;
    BusError error;
    const int r = sd_bus_call_method(bus_.get(), kDestination, kManagerPath, kManagerIface,
                                     "Subscribe", error.get(), nullptr, "");
    if (r >= 0 || sd_bus_error_has_name(error.get(), SD_BUS_ERROR_UNKNOWN_METHOD)) {
      subscribed_ = true;
    }
  }

  // Queues a job with `method`(name, "replace") and waits for its JobRemoved.
  Status runJob(const char* method, const std::string& context, const std::string& name,
                std::chrono::milliseconds timeout) {
    std::lock_guard lock(mu_);
    const auto deadline = clock_.monoNow() + std::max(timeout, 1ms);
    // Microseconds left until the deadline (0 when it has passed), for sd-bus' timeouts.
    auto remaining = [&]() -> std::uint64_t {
      const auto left =
          std::chrono::duration_cast<std::chrono::microseconds>(deadline - clock_.monoNow());
      return left.count() > 0 ? static_cast<std::uint64_t>(left.count()) : 0;
    };

    // Drop whatever an earlier wait left queued (signals that came after it gave up).
    while (sd_bus_process(bus_.get(), nullptr) > 0) {
    }

    // Listen before queueing the job: its JobRemoved can arrive right after (or, from a mock,
    // even before) the method reply. Signals seen before the job path is known are kept.
    std::vector<JobRemoved> removed;
    Slot slot;
    int r = sd_bus_match_signal(bus_.get(), slot.out(), kDestination, kManagerPath, kManagerIface,
                                "JobRemoved", onJobRemoved, &removed);
    if (r < 0) return busError(context + ": subscribe to JobRemoved", r, nullptr);
    subscribeOnce();

    BusError error;
    Message reply;
    Message call;
    r = sd_bus_message_new_method_call(bus_.get(), call.out(), kDestination, kManagerPath,
                                       kManagerIface, method);
    if (r >= 0) r = sd_bus_message_append(call.get(), "ss", name.c_str(), "replace");
    if (r < 0) return busError(context + ": build call", r, nullptr);
    const std::uint64_t call_timeout = remaining();
    if (call_timeout == 0) return Error(context + ": timed out", ErrorCode::kTimeout);
    r = sd_bus_call(bus_.get(), call.get(), call_timeout, error.get(), reply.out());
    if (r < 0) return busError(context, r, error.get());
    const char* job_path = nullptr;
    r = sd_bus_message_read(reply.get(), "o", &job_path);
    if (r < 0) return busError(context + ": read reply", r, nullptr);
    const std::string job = job_path;

    // Matched by job path alone: job ids are unique per systemd run, and the unit in the signal
    // is the unit's id, which differs from `name` when that is an alias.
    for (;;) {
      auto it = std::find_if(removed.begin(), removed.end(),
                             [&](const JobRemoved& j) { return j.job == job; });
      if (it != removed.end()) {
        if (it->result == "done") return base::ok();
        ErrorCode code = ErrorCode::kUnknown;
        if (it->result == "timeout") code = ErrorCode::kTimeout;
        if (it->result == "canceled") code = ErrorCode::kCancelled;
        return Error(context + ": job " + it->result, code);
      }
      // Dispatch everything queued (signals that came in during sd_bus_call are queued and only
      // reach the match callback here), then wait for more.
      r = sd_bus_process(bus_.get(), nullptr);
      if (r < 0) return busError(context + ": wait for job " + job, r, nullptr);
      if (r > 0) continue;
      const std::uint64_t left = remaining();
      if (left == 0) {
        return Error(context + ": job " + job + " did not finish within " +
                         std::to_string(timeout.count()) + "ms",
                     ErrorCode::kTimeout);
      }
      r = sd_bus_wait(bus_.get(), left);
      if (r < 0 && r != -EINTR) return busError(context + ": wait for job " + job, r, nullptr);
    }
  }

  std::mutex mu_;
  BusPtr bus_;
  const base::Clock& clock_;
  bool subscribed_ = false;
};

// D-Bus address escaping: bytes outside [-0-9A-Za-z_/.\*] become %xx.
std::string escapeAddressValue(const std::string& value) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(value.size());
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    const bool plain = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       c == '-' || c == '_' || c == '/' || c == '.' || c == '\\' || c == '*';
    if (plain) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

}  // namespace

std::string systemBusAddress(const std::string& host_root) {
  std::string root = host_root;
  while (!root.empty() && root.back() == '/') root.pop_back();
  return "unix:path=" + escapeAddressValue(root + "/run/dbus/system_bus_socket");
}

Result<std::unique_ptr<SystemdManager>> connectSystemd(const std::string& bus_address,
                                                       const base::Clock& clock) {
  const std::string context = "connect to systemd at " + bus_address;
  auto fail = [&](int r) {
    const int err = -r;
    ErrorCode code = codeForErrno(err);
    // No socket, or nobody listening: the bus is down, which may well pass.
    if (err == ENOENT || err == ECONNREFUSED) code = ErrorCode::kUnavailable;
    return Error(context + ": " + std::strerror(err), code);
  };
  sd_bus* raw = nullptr;
  int r = sd_bus_new(&raw);
  if (r < 0) return fail(r);
  BusPtr bus(raw);
  r = sd_bus_set_address(bus.get(), bus_address.c_str());
  if (r < 0) return fail(r);
  r = sd_bus_set_bus_client(bus.get(), 1);
  if (r < 0) return fail(r);
  r = sd_bus_start(bus.get());
  if (r < 0) return fail(r);
  // sd_bus_start only begins the handshake; finish it (Hello) so that a bus that accepts but does
  // not answer is an error here rather than at the first call.
  const char* unique = nullptr;
  r = sd_bus_get_unique_name(bus.get(), &unique);
  if (r < 0) return fail(r);
  return std::unique_ptr<SystemdManager>(
      std::make_unique<SdBusSystemdManager>(std::move(bus), clock));
}

}  // namespace ekco::units
