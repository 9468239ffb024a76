// A process-wide bound on the bytes the agent buffers for data it does not control: response
// bodies being collected and watch lines waiting for their newline (issue 34, Medium 8). Each
// request has its own bound (kube/transport/curl_transport.h, kube/watch.h), but a server
// that streams endless lines to every watch at once fills each of them: a dozen informers times a
// 16 MiB line took the agent past its 256Mi container limit. The budget bounds the sum: a buffer
// that would pass it is refused (its request fails and is retried later), so what the agent holds
// stays below the budget however many streams are hostile.
//
// A buffer holds a BudgetShare sized to its capacity (what is actually allocated, not its size);
// appendWithin grows both together, so the budget is charged before the allocation happens.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ekco::base {

class MemoryBudget {
 public:
  explicit MemoryBudget(std::size_t limit) : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // All or nothing: false (and a refusal counted) when `bytes` more would pass the limit.
  [[nodiscard]] bool take(std::size_t bytes);
  void give(std::size_t bytes);

  std::size_t limit() const { return limit_; }
  std::size_t used() const { return used_.load(std::memory_order_relaxed); }
  // The most ever held at once.
  std::size_t peak() const { return peak_.load(std::memory_order_relaxed); }
  // Takes refused so far.
  std::uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  const std::size_t limit_;
  std::atomic<std::size_t> used_{0};
  std::atomic<std::size_t> peak_{0};
  std::atomic<std::uint64_t> refusals_{0};
};

// The agent's one budget for buffered API data (kMaxBufferedBytes): every CurlTransport and the
// watch decoders it feeds charge it unless given another (tests do).
inline constexpr std::size_t kMaxBufferedBytes = std::size_t{96} << 20;
MemoryBudget& processBufferBudget();

// How a refusal names the budget: "the agent's buffer budget (96 MiB, 95.8 MiB in use)".
std::string describeBufferBudget(const MemoryBudget& budget);

// One buffer's part of a budget, returned when the share is destroyed. No budget: unbounded.
class BudgetShare {
 public:
  explicit BudgetShare(MemoryBudget* budget = nullptr) : budget_(budget) {}
  ~BudgetShare() { (void)resize(0); }
  BudgetShare(const BudgetShare&) = delete;
  BudgetShare& operator=(const BudgetShare&) = delete;

  // Grows or shrinks the share to `bytes`. False, the share unchanged, when the budget cannot
  // give the growth. Shrinking always succeeds.
  [[nodiscard]] bool resize(std::size_t bytes);
  std::size_t held() const { return held_; }
  MemoryBudget* budget() const { return budget_; }

 private:
  MemoryBudget* budget_;
  std::size_t held_ = 0;
};

// Appends `data` to `buffer`, keeping at least `spare` bytes of capacity past its end, with the
// share covering the buffer's capacity. When the capacity must grow, the share grows first (to
// twice the old capacity when the budget allows, else to exactly what is needed); false, and
// `buffer` unchanged, when the budget cannot give even that.
[[nodiscard]] bool appendWithin(std::string& buffer, std::string_view data, BudgetShare& share,
                                std::size_t spare = 0);

// After a buffer has been emptied or cut (a watch line handed out): a capacity far above what the
// buffer now holds (over `keep` bytes and over four times its size) is given back, to the heap
// and to the share.
void trimWithin(std::string& buffer, BudgetShare& share, std::size_t keep);

}  // namespace ekco::base
