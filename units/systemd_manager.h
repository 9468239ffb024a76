// The node's systemd, as ekco needs it: daemon-reload, enable/disable unit files, start/stop a
// unit and wait for its job, and read unit and timer state. The interface lets controllers be
// tested with a fake; SdBusSystemdManager talks to org.freedesktop.systemd1 over sd-bus.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::units {

// One change systemd reports for EnableUnitFiles/DisableUnitFiles: ("symlink" | "unlink",
// file, destination).
struct UnitFileChange {
  std::string type{};
  std::string file{};
  std::string destination{};

  friend bool operator==(const UnitFileChange&, const UnitFileChange&) = default;
};

struct UnitState {
  std::string load_state{};       // "loaded", "not-found", ...
  std::string active_state{};     // "active", "inactive", "failed", "activating", ...
  std::string sub_state{};        // "exited", "dead", "waiting", ...
  std::string unit_file_state{};  // "enabled", "disabled", "static", "" when unknown
};

struct TimerState {
  // Wall-clock times in microseconds since the epoch; nullopt when systemd says 0 (never / none).
  std::optional<std::uint64_t> next_elapse_realtime_usec = std::nullopt;
  std::optional<std::uint64_t> last_trigger_usec = std::nullopt;
};

class SystemdManager {
 public:
  virtual ~SystemdManager() = default;

  // Manager.Reload (systemctl daemon-reload).
  [[nodiscard]] virtual base::Status reload() = 0;
  // Manager.EnableUnitFiles(names, runtime=false, force=true). Names are unit names
  // ("ekco-reboot.service"), not paths.
  [[nodiscard]] virtual base::Result<std::vector<UnitFileChange>> enableUnitFiles(
      const std::vector<std::string>& names) = 0;
  // Manager.DisableUnitFiles(names, runtime=false).
  [[nodiscard]] virtual base::Result<std::vector<UnitFileChange>> disableUnitFiles(
      const std::vector<std::string>& names) = 0;
  // Manager.StartUnit/StopUnit(name, "replace") and wait up to `timeout` (the call included) for
  // the job's JobRemoved signal. A result other than "done" is an error naming the unit and the
  // result ("start x.service: job failed"; "timeout" is kTimeout, "canceled" kCancelled, others
  // kUnknown); no JobRemoved in time is kTimeout. An unknown unit is kNotFound
  // ("start x.service: unit not found").
  [[nodiscard]] virtual base::Status startUnit(const std::string& name,
                                               std::chrono::milliseconds timeout) = 0;
  [[nodiscard]] virtual base::Status stopUnit(const std::string& name,
                                              std::chrono::milliseconds timeout) = 0;
  // Manager.RestartUnit(name, "replace") (systemctl restart), waited for the same way.
  [[nodiscard]] virtual base::Status restartUnit(const std::string& name,
                                                 std::chrono::milliseconds timeout) = 0;
  // Unit properties (LoadUnit, then org.freedesktop.systemd1.Unit properties). Like systemctl, an
  // unknown unit is not an error: systemd reports load_state "not-found".
  [[nodiscard]] virtual base::Result<UnitState> unitState(const std::string& name) = 0;
  // org.freedesktop.systemd1.Timer properties of a timer unit.
  [[nodiscard]] virtual base::Result<TimerState> timerState(const std::string& name) = 0;
};

// The system bus of a host root: "unix:path=<root>/run/dbus/system_bus_socket" ("/" gives the
// usual /run/dbus/system_bus_socket). The path is D-Bus address-escaped: bytes outside
// [-0-9A-Za-z_/.\\*] become %xx ("/a b" -> "unix:path=/a%20b/run/...").
std::string systemBusAddress(const std::string& host_root);

// Connects to systemd over sd-bus at `bus_address` (a D-Bus address such as systemBusAddress()),
// as a bus client (Hello done before returning). Errors name the address: "connect to systemd at
// unix:path=/run/dbus/system_bus_socket: No such file or directory"; a missing socket or a refused
// connection is kUnavailable. Only the bus is checked here: whether systemd answers shows at the
// first call. The manager serialises its calls (one sd-bus connection, guarded by a mutex), so
// it may be shared between threads. It does not reconnect: after the bus went away, calls fail
// (kUnavailable) and the caller connects again. `clock` (monotonic) measures a job's timeout; it
// must outlive the manager.
[[nodiscard]] base::Result<std::unique_ptr<SystemdManager>> connectSystemd(
    const std::string& bus_address, const base::Clock& clock);

}  // namespace ekco::units
