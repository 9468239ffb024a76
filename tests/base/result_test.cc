#include "base/result.h"

#include <cerrno>
#include <memory>

#include <gtest/gtest.h>

#include "base/clock.h"

namespace ekco::base {
namespace {

Result<int> half(int x) {
  if (x % 2 != 0) return Error("odd number", ErrorCode::kInvalidArgument);
  return x / 2;
}

Status quarter(int x, int* out) {
  auto h = half(x);
  EKCO_TRY(h);
  auto q = half(*h);
  if (!q) return std::move(q).error().wrap("second halving");
  *out = *q;
  return ok();
}

TEST(Result, HoldsValueOrError) {
  auto good = half(8);
  ASSERT_TRUE(good);
  EXPECT_EQ(*good, 4);
  auto bad = half(3);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "odd number");
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.value_or(-1), -1);
}

TEST(Result, TryPropagatesAndWrapAddsContextOnce) {
  int out = 0;
  EXPECT_TRUE(quarter(8, &out));
  EXPECT_EQ(out, 2);
  auto s = quarter(6, &out);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message(), "second halving: odd number");
  EXPECT_EQ(s.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(quarter(5, &out).error().message(), "odd number");
}

TEST(Result, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r);
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(Result, ErrnoErrorMapsCodes) {
  EXPECT_EQ(errnoError("open /x", ENOENT).code(), ErrorCode::kNotFound);
  EXPECT_EQ(errnoError("open /x", EACCES).code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(errnoError("open /x", EIO).code(), ErrorCode::kIo);
  EXPECT_EQ(errnoError("open /x", ENOENT).message(), "open /x: No such file or directory");
}

TEST(ManualClock, MovesOnlyWhenTold) {
  ManualClock clock;
  auto w = clock.wallNow();
  auto m = clock.monoNow();
  EXPECT_EQ(clock.wallNow(), w);
  clock.advance(std::chrono::seconds(90));
  EXPECT_EQ(clock.wallNow() - w, std::chrono::seconds(90));
  EXPECT_EQ(clock.monoNow() - m, std::chrono::seconds(90));
  clock.setWall(w - std::chrono::hours(1));  // an NTP step back leaves monotonic time alone
  EXPECT_EQ(clock.monoNow() - m, std::chrono::seconds(90));
}

}  // namespace
}  // namespace ekco::base
