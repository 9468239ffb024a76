// Interned strings for the informer caches. The values that repeat across thousands of cached
// objects (namespaces, node names, phases, owner kinds, condition types, taint keys, app labels)
// are stored once in a process-wide pool; a record holds an 8-byte Atom instead of a 32-byte
// std::string plus its heap copy. Atoms compare by pointer.
//
// The pool never shrinks: it holds each distinct value ever interned, which for these fields is
// a bounded set (a few KiB even on a 5,000-node cluster). Do not intern unbounded values such as
// pod names or uids. Thread-safe.
#pragma once

#include <compare>
#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace ekco::kube {

class Atom {
 public:
  // The empty string.
  Atom();
  // Interns `text` (a lookup under a lock; the first time, one allocation).
  explicit Atom(std::string_view text);

  const std::string& str() const { return *value_; }
  std::string_view view() const { return *value_; }
  operator std::string_view() const { return *value_; }  // NOLINT: implicit by design
  bool empty() const { return value_->empty(); }

  friend bool operator==(Atom a, Atom b) { return a.value_ == b.value_; }
  friend bool operator==(Atom a, std::string_view b) { return *a.value_ == b; }
  friend std::ostream& operator<<(std::ostream& out, Atom a) { return out << *a.value_; }

  // How many distinct values the pool holds (for /metrics and the benchmark).
  static std::size_t poolSize();

 private:
  const std::string* value_;
};

}  // namespace ekco::kube

template <>
struct std::hash<ekco::kube::Atom> {
  std::size_t operator()(ekco::kube::Atom a) const noexcept {
    return std::hash<const void*>()(a.view().data());
  }
};
