// RAII for the sd-bus C objects both bus clients (systemd_manager.cc, logind.cc) hold. Internal
// to units/.
#pragma once

#include <systemd/sd-bus.h>

#include <memory>

namespace ekco::units::detail {

struct BusUnref {
  void operator()(sd_bus* bus) const { sd_bus_flush_close_unref(bus); }
};
using BusPtr = std::unique_ptr<sd_bus, BusUnref>;

class BusError {
 public:
  BusError() = default;
  ~BusError() { sd_bus_error_free(&error_); }
  BusError(const BusError&) = delete;
  BusError& operator=(const BusError&) = delete;
  sd_bus_error* get() { return &error_; }
  const sd_bus_error* get() const { return &error_; }

 private:
  // SD_BUS_ERROR_NULL, spelled as C++: the macro is a C99 compound literal, which clang's
  // -Wpedantic refuses in C++ (GCC accepts it as an extension).
  sd_bus_error error_{.name = nullptr, .message = nullptr, ._need_free = 0};
};

}  // namespace ekco::units::detail
