#include "base/memory_budget.h"

#include <algorithm>

#include "base/strings.h"

namespace ekco::base {

bool MemoryBudget::take(std::size_t bytes) {
  std::size_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || used > limit_ - bytes) {
      refusals_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  const std::size_t now = used + bytes;
  std::size_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return true;
}

void MemoryBudget::give(std::size_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

MemoryBudget& processBufferBudget() {
  static MemoryBudget budget(kMaxBufferedBytes);
  return budget;
}

std::string describeBufferBudget(const MemoryBudget& budget) {
  return "the agent's buffer budget (" + describeBytes(budget.limit()) + ", " +
         describeBytes(budget.used()) + " in use)";
}

bool BudgetShare::resize(std::size_t bytes) {
  if (budget_ == nullptr) {
    held_ = bytes;
    return true;
  }
  if (bytes > held_) {
    if (!budget_->take(bytes - held_)) return false;
  } else if (bytes < held_) {
    budget_->give(held_ - bytes);
  }
  held_ = bytes;
  return true;
}

bool appendWithin(std::string& buffer, std::string_view data, BudgetShare& share,
                  std::size_t spare) {
  const std::size_t needed = buffer.size() + data.size() + spare;
  if (needed > buffer.capacity()) {
    // Twice the capacity keeps appends amortised; when the budget cannot give that, exactly the
    // need. (libstdc++'s reserve on a string doubles regardless, so a new string is reserved.)
    std::size_t want = std::max(needed, buffer.capacity() * 2);
    if (!share.resize(std::max(want, share.held()))) {
      want = needed;
      if (!share.resize(std::max(want, share.held()))) return false;
    }
    std::string grown;
    grown.reserve(want);
    grown.append(buffer);
    buffer.swap(grown);
  }
  buffer.append(data);
  // The share follows what was allocated (a tiny string may be given a little more than asked).
  // When the budget cannot give those few bytes, the buffer is still bounded (by them) and its
  // next growth is charged in full.
  if (buffer.capacity() != share.held()) (void)share.resize(buffer.capacity());
  return true;
}

void trimWithin(std::string& buffer, BudgetShare& share, std::size_t keep) {
  if (buffer.capacity() <= keep || buffer.capacity() / 4 < buffer.size()) return;
  buffer.shrink_to_fit();
  // shrink_to_fit is a request; the share follows what is left.
  (void)share.resize(buffer.capacity());
}

}  // namespace ekco::base
