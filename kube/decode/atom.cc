#include "kube/decode/atom.h"

#include <mutex>
#include <unordered_set>

namespace ekco::kube {

namespace {

// Heterogeneous lookup: find(string_view) without building a std::string.
struct Hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>()(s);
  }
};

struct Pool {
  std::mutex mu;
  // Node-based: element addresses are stable across rehashing.
  std::unordered_set<std::string, Hash, std::equal_to<>> values;
};

Pool& pool() {
  // Never destroyed, so Atoms in static objects stay valid during exit.
  static Pool* p = new Pool();
  return *p;
}

const std::string* intern(std::string_view text) {
  Pool& p = pool();
  std::lock_guard lock(p.mu);
  auto it = p.values.find(text);
  if (it == p.values.end()) it = p.values.emplace(text).first;
  return &*it;
}

}  // namespace

Atom::Atom() {
  static const std::string* const empty = intern({});
  value_ = empty;
}

Atom::Atom(std::string_view text) : value_(intern(text)) {}

std::size_t Atom::poolSize() {
  Pool& p = pool();
  std::lock_guard lock(p.mu);
  return p.values.size();
}

}  // namespace ekco::kube
