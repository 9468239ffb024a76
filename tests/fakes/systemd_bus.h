// A private system bus with a mock systemd on it, for tests of the sd-bus client and of the
// agent that uses it, and for the demo (no GoogleTest here: failures are returned): a dbus-daemon
// listening at <root>/run/dbus/system_bus_socket (so the address is units::systemBusAddress(root))
// and python3-dbusmock with the template tests/units/systemd_mock.py (which documents the mock)
// owning org.freedesktop.systemd1.
//
//   fakes::SystemdBus bus;
//   ASSERT_EQ(bus.start({.root = root, .unit_dir = root + "/etc/systemd/system"}), "");
//   const std::size_t from = bus.logSize();
//   ... code under test talks to units::connectSystemd(units::systemBusAddress(root)) ...
//   EXPECT_THAT(bus.calls("Reload", from), ElementsAre("Reload"));
//
// The mock logs every call as `<time> Method "arg" ...` before running it, so a call that
// returned is in the log. stop() (and the destructor) end the mock and the bus.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/os/process.h"
#include "units/systemd_manager.h"

extern char** environ;

namespace ekco::fakes {

class SystemdBus {
 public:
  struct Options {
    // The host root: the socket is <root>/run/dbus/system_bus_socket (the directory is created).
    std::string root{};
    // The bus config, the mock's log (mock.log) and output (mock.out); "" = root.
    std::string work_dir{};
    // The mock's "unit_dir" parameter (unit files loaded at Reload); "" = none.
    std::string unit_dir{};
    // The dbusmock template ("" = tests/units/systemd_mock.py; "logind" = the stock logind one)
    // and the name to wait for.
    std::string mock_template{};
    std::string bus_name = "org.freedesktop.systemd1";
    // How long the mock gets to take its name.
    std::chrono::milliseconds start_timeout{std::chrono::seconds(30)};
  };

  SystemdBus() = default;
  SystemdBus(const SystemdBus&) = delete;
  SystemdBus& operator=(const SystemdBus&) = delete;
  ~SystemdBus() { stop(); }

  // Starts dbus-daemon and the mock; returns what went wrong, or "".
  std::string start(Options options) {
    options_ = std::move(options);
    if (options_.work_dir.empty()) options_.work_dir = options_.root;
    std::filesystem::create_directories(options_.root + "/run/dbus");
    std::filesystem::create_directories(options_.work_dir);
    address_ = units::systemBusAddress(options_.root);
    log_path_ = options_.work_dir + "/mock.log";
    const std::string conf = options_.work_dir + "/bus.conf";
    std::ofstream(conf, std::ios::binary | std::ios::trunc)
        << R"(<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>)"
        << xmlEscape(address_) << R"(</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/> <allow own="*"/>
    <allow send_type="method_call"/> <allow send_type="signal"/>
    <allow send_type="method_return"/> <allow send_type="error"/>
    <allow receive_type="method_call"/> <allow receive_type="signal"/>
    <allow receive_type="method_return"/> <allow receive_type="error"/>
  </policy>
</busconfig>
)";

    // dbus-daemon --fork prints the address and the daemon's pid, then its first process exits.
    using namespace std::chrono_literals;
    base::SystemClock clock;
    base::BoostProcessRunner runner(clock);
    auto daemon =
        runner.run(base::ProcessRequest{.argv = {"dbus-daemon", "--config-file=" + conf,
                                                 "--print-address=1", "--print-pid=1", "--fork"},
                                        .timeout = 30s});
    if (!daemon) return daemon.error().message();
    if (!daemon->success()) return base::failureError({.argv = {"dbus-daemon"}}, *daemon).message();
    std::istringstream out(daemon->stdout_data);
    out >> printed_address_ >> daemon_pid_;
    if (daemon_pid_ <= 0) return "dbus-daemon printed no pid: " + daemon->stdout_data;

    // The mock, as our child, its output to mock.out.
    const std::string mock_out = options_.work_dir + "/mock.out";
    std::vector<std::string> args = {
        "/usr/bin/python3",
        "-m",
        "dbusmock",
        "--system",
        "-t",
        options_.mock_template.empty() ? defaultTemplate() : options_.mock_template,
        "-l",
        log_path_};
    if (!options_.unit_dir.empty()) {
      args.push_back("-p");
      args.push_back(R"({"unit_dir": ")" + jsonEscape(options_.unit_dir) + R"("})");
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string bus_env = "DBUS_SYSTEM_BUS_ADDRESS=" + address_;
    std::vector<char*> envp;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).starts_with("DBUS_SYSTEM_BUS_ADDRESS=")) continue;
      envp.push_back(*e);
    }
    envp.push_back(bus_env.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, mock_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    // An empty signal mask: a program that blocks SIGTERM in its threads (the demo) would pass the
    // block on, and stop() would wait 5 s for SIGKILL.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    const int rc = ::posix_spawn(&mock_pid_, argv[0], &actions, &attr, argv.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      mock_pid_ = -1;
      return std::string("start dbusmock: ") + std::strerror(rc);
    }

    // Wait until the mock owns org.freedesktop.systemd1.
    std::string why;
    bus_ = openBus(address_, why);
    if (!bus_) return why;
    const auto started = std::chrono::steady_clock::now();
    for (;;) {
      sd_bus_error error = SD_BUS_ERROR_NULL;
      sd_bus_message* reply = nullptr;
      int r = sd_bus_call_method(bus_.get(), "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                 "org.freedesktop.DBus", "NameHasOwner", &error, &reply, "s",
                                 options_.bus_name.c_str());
      int has_owner = 0;
      if (r >= 0) r = sd_bus_message_read(reply, "b", &has_owner);
      sd_bus_message_unref(reply);
      sd_bus_error_free(&error);
      if (r < 0) return std::string("NameHasOwner: ") + std::strerror(-r);
      if (has_owner != 0) return "";
      if (::waitpid(mock_pid_, nullptr, WNOHANG) == mock_pid_) {
        mock_pid_ = -1;
        return "dbusmock exited: " + readFile(mock_out);
      }
      if (std::chrono::steady_clock::now() - started > options_.start_timeout) {
        return "dbusmock did not take the name in time: " + readFile(mock_out);
      }
      std::this_thread::sleep_for(20ms);
    }
  }

  // Ends the mock (SIGTERM, SIGKILL after 5 s) and the bus; safe to call twice.
  void stop() {
    using namespace std::chrono_literals;
    bus_.reset();
    if (mock_pid_ > 0) {
      ::kill(mock_pid_, SIGTERM);
      const auto deadline = std::chrono::steady_clock::now() + 5s;
      bool reaped = false;
      while (!reaped && std::chrono::steady_clock::now() < deadline) {
        reaped = ::waitpid(mock_pid_, nullptr, WNOHANG) == mock_pid_;
        if (!reaped) std::this_thread::sleep_for(20ms);
      }
      if (!reaped) {
        ::kill(mock_pid_, SIGKILL);
        ::waitpid(mock_pid_, nullptr, 0);
      }
      mock_pid_ = -1;
    }
    if (daemon_pid_ > 0) {
      ::kill(daemon_pid_, SIGTERM);  // not our child (--fork): nothing to reap
      daemon_pid_ = -1;
    }
  }

  const std::string& address() const { return address_; }
  // The two processes (-1 once stopped), for a program that must end them from a signal handler
  // thread, where stop() (which waits) is no use.
  pid_t mockPid() const { return mock_pid_; }
  pid_t daemonPid() const { return daemon_pid_; }
  // What dbus-daemon printed (the address with its ",guid=...").
  const std::string& printedAddress() const { return printed_address_; }
  const std::string& logPath() const { return log_path_; }
  std::string log() const { return readFile(log_path_); }
  std::size_t logSize() const { return log().size(); }

  // The mock's log from byte `from` on: calls of `method`, as `method "arg" ...`.
  std::vector<std::string> calls(const std::string& method, std::size_t from = 0) const {
    std::vector<std::string> out;
    const std::string all = log();
    std::istringstream in(from < all.size() ? all.substr(from) : std::string());
    std::string line;
    while (std::getline(in, line)) {
      const auto space = line.find(' ');
      if (space == std::string::npos) continue;
      const std::string call = line.substr(space + 1);
      if (call == method || call.starts_with(method + " ")) out.push_back(call);
    }
    return out;
  }

  // Mock method: AddMockUnit(name). What went wrong, or "".
  [[nodiscard]] std::string addMockUnit(const std::string& name) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    std::string why;
    const int r = sd_bus_call_method(bus_.get(), kSystemd, kManagerPath, kMockIface, "AddMockUnit",
                                     &error, nullptr, "s", name.c_str());
    if (!callOk(r, error, why)) why = "AddMockUnit " + name + ": " + why;
    sd_bus_error_free(&error);
    return why;
  }

  // Sets the Timer properties of a mock *.timer unit (Mock.UpdateProperties on its object). What
  // went wrong, or "".
  [[nodiscard]] std::string setTimer(const std::string& name, std::uint64_t next,
                                     std::uint64_t last) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    std::string why;
    int r =
        sd_bus_call_method(bus_.get(), kSystemd, kManagerPath, "org.freedesktop.systemd1.Manager",
                           "GetUnit", &error, &reply, "s", name.c_str());
    const char* path = nullptr;
    if (r >= 0) r = sd_bus_message_read(reply, "o", &path);
    if (callOk(r, error, why)) {
      sd_bus_error_free(&error);
      r = sd_bus_call_method(bus_.get(), kSystemd, path, kMockIface, "UpdateProperties", &error,
                             nullptr, "sa{sv}", "org.freedesktop.systemd1.Timer", 2,
                             "NextElapseUSecRealtime", "t", next, "LastTriggerUSec", "t", last);
      if (!callOk(r, error, why)) why = "UpdateProperties " + name + ": " + why;
    } else {
      why = "GetUnit " + name + ": " + why;
    }
    sd_bus_message_unref(reply);
    sd_bus_error_free(&error);
    return why;
  }

 private:
  static constexpr const char* kSystemd = "org.freedesktop.systemd1";
  static constexpr const char* kManagerPath = "/org/freedesktop/systemd1";
  static constexpr const char* kMockIface = "org.freedesktop.DBus.Mock";

  struct BusUnref {
    void operator()(sd_bus* bus) const { sd_bus_flush_close_unref(bus); }
  };
  using BusPtr = std::unique_ptr<sd_bus, BusUnref>;

  // tests/units/systemd_mock.py of the tree the tests were built from (a program built without
  // EKCO_SOURCE_DIR, such as the demo, names the template in Options::mock_template).
  static std::string defaultTemplate() {
#ifdef EKCO_SOURCE_DIR
    return std::string(EKCO_SOURCE_DIR) + "/tests/units/systemd_mock.py";
#else
    return "tests/units/systemd_mock.py";
#endif
  }
  static std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Minimal XML escaping for the <listen> element (the address itself is already %-escaped).
  static std::string xmlEscape(const std::string& s) {
    std::string out;
    for (const char c : s) {
      if (c == '&') {
        out += "&amp;";
      } else if (c == '<') {
        out += "&lt;";
      } else {
        out += c;
      }
    }
    return out;
  }

  static std::string jsonEscape(const std::string& s) {
    std::string out;
    for (const char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  }

  // The test's own connection, to drive the mock (org.freedesktop.DBus.Mock) and check the bus.
  static BusPtr openBus(const std::string& address, std::string& why) {
    sd_bus* raw = nullptr;
    int r = sd_bus_new(&raw);
    BusPtr bus(raw);
    if (r >= 0) r = sd_bus_set_address(raw, address.c_str());
    if (r >= 0) r = sd_bus_set_bus_client(raw, 1);
    if (r >= 0) r = sd_bus_start(raw);
    if (r < 0) {
      why = std::string("open test bus connection: ") + std::strerror(-r);
      return nullptr;
    }
    return bus;
  }

  // Whether a method call succeeded; `why` gets the D-Bus error otherwise.
  static bool callOk(int r, sd_bus_error& error, std::string& why) {
    if (r >= 0) return true;
    why = error.message != nullptr ? error.message : std::strerror(-r);
    return false;
  }

  Options options_{};
  std::string address_{};
  std::string printed_address_{};
  std::string log_path_{};
  pid_t daemon_pid_ = -1;
  pid_t mock_pid_ = -1;
  BusPtr bus_{};
};

}  // namespace ekco::fakes
