#include "base/memory_budget.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace ekco::base {
namespace {

TEST(MemoryBudget, TakesAllOrNothingAndRemembersThePeakAndTheRefusals) {
  MemoryBudget budget(100);
  EXPECT_TRUE(budget.take(60));
  EXPECT_FALSE(budget.take(41));  // 101 > 100: nothing taken
  EXPECT_EQ(budget.used(), 60u);
  EXPECT_TRUE(budget.take(40));
  EXPECT_EQ(budget.used(), 100u);
  budget.give(70);
  EXPECT_EQ(budget.used(), 30u);
  EXPECT_EQ(budget.peak(), 100u);
  EXPECT_EQ(budget.refusals(), 1u);
  EXPECT_FALSE(budget.take(SIZE_MAX));  // no wrap-around
  EXPECT_EQ(budget.used(), 30u);
}

TEST(MemoryBudget, TheProcessBudgetIs96MiB) {
  EXPECT_EQ(processBufferBudget().limit(), std::size_t{96} << 20);
  EXPECT_EQ(&processBufferBudget(), &processBufferBudget());
}

TEST(MemoryBudget, ConcurrentTakersNeverPassTheLimit) {
  MemoryBudget budget(1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&budget] {
      for (int i = 0; i < 20000; ++i) {
        if (budget.take(7)) budget.give(7);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(budget.peak(), 1000u);
  EXPECT_EQ(budget.used(), 0u);
}

TEST(BudgetShare, GrowsAndShrinksItsPartAndGivesItBackWhenDestroyed) {
  MemoryBudget budget(100);
  {
    BudgetShare a(&budget);
    BudgetShare b(&budget);
    EXPECT_TRUE(a.resize(70));
    EXPECT_FALSE(b.resize(40));  // refused: b unchanged
    EXPECT_EQ(b.held(), 0u);
    EXPECT_TRUE(a.resize(50));  // shrinking always succeeds
    EXPECT_TRUE(b.resize(40));
    EXPECT_EQ(budget.used(), 90u);
  }
  EXPECT_EQ(budget.used(), 0u);
  BudgetShare unbounded;
  EXPECT_TRUE(unbounded.resize(std::size_t{1} << 40));
}

TEST(AppendWithin, ChargesTheBuffersCapacityBeforeItGrows) {
  MemoryBudget budget(4096);
  BudgetShare share(&budget);
  std::string buffer;
  ASSERT_TRUE(appendWithin(buffer, std::string(1000, 'a'), share, 64));
  EXPECT_GE(buffer.capacity(), 1064u);
  EXPECT_EQ(share.held(), buffer.capacity());
  ASSERT_TRUE(appendWithin(buffer, std::string(1000, 'b'), share, 64));
  EXPECT_EQ(buffer.size(), 2000u);
  EXPECT_EQ(share.held(), buffer.capacity());
  EXPECT_LE(budget.used(), 4096u);
  // Doubling would pass the budget: the exact need is taken instead.
  ASSERT_TRUE(appendWithin(buffer, std::string(1500, 'c'), share, 64));
  EXPECT_EQ(buffer.size(), 3500u);
  EXPECT_LE(share.held(), 4096u);
  EXPECT_EQ(share.held(), buffer.capacity());
  // Not even that fits: refused, the buffer unchanged.
  const std::string before = buffer;
  EXPECT_FALSE(appendWithin(buffer, std::string(1000, 'd'), share, 64));
  EXPECT_EQ(buffer, before);
  EXPECT_EQ(budget.refusals(), 3u);  // the third append's doubling; the doubling, then the need
}

TEST(TrimWithin, GivesBackACapacityFarAboveWhatTheBufferHolds) {
  MemoryBudget budget(std::size_t{4} << 20);
  BudgetShare share(&budget);
  std::string buffer;
  ASSERT_TRUE(appendWithin(buffer, std::string(std::size_t{1} << 20, 'x'), share));
  buffer.erase(0, buffer.size() - 100);
  trimWithin(buffer, share, 4096);
  EXPECT_LT(buffer.capacity(), 4096u);
  EXPECT_EQ(share.held(), buffer.capacity());
  EXPECT_EQ(budget.used(), buffer.capacity());
  // Small buffers, and buffers still mostly full, are left alone.
  std::string small(1000, 'y');
  small.reserve(3000);
  const std::size_t capacity = small.capacity();
  trimWithin(small, share, 4096);
  EXPECT_EQ(small.capacity(), capacity);
}

}  // namespace
}  // namespace ekco::base
