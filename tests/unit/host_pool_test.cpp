// host_pool on model_host_memory and a model_device whose events complete only when told: reuse
// across iterations, the budget, waiting for copies in flight, misuse and host failures.
#include "phasealloc/host_pool.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/devices/model_host_memory.hpp"

namespace phasealloc {
namespace {

using ::testing::HasSubstr;

constexpr stream_id copy_stream = 7;

struct rig {
  explicit rig(std::size_t budget, std::size_t host_capacity = SIZE_MAX)
      : host(host_capacity),
        gpu(model_device_config{.events_complete_immediately = false}),
        pool(host, &gpu, host_pool_options{.budget_bytes = budget}) {}
  host_buffer acquire(std::size_t bytes) { return pool.acquire(bytes).value(); }

  model_host_memory host;
  model_device gpu;
  host_pool pool;
};

TEST(HostPoolTest, OffloadChunksReuseTheSameBuffersEveryIteration) {
  // ProTrain-style: 6 chunks of 48 MiB are offloaded and reloaded every iteration through 3
  // buffers (the prefetch depth); each copy runs on the copy stream.
  rig r(3 * 48 * mib);
  std::set<void*> seen;
  for (int iteration = 0; iteration < 10; ++iteration) {
    for (int chunk = 0; chunk < 6; ++chunk) {
      const host_buffer b = r.acquire(48 * mib);
      std::memset(b.ptr, chunk, 4096);  // the bytes are the caller's
      seen.insert(b.ptr);
      ASSERT_EQ(r.pool.release(b.ptr, copy_stream, /*record=*/true), errc::ok);
      if (chunk % 3 == 2) r.gpu.complete_events(copy_stream);  // the stream runs
    }
  }
  const host_pool_stats s = r.pool.stats();
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(s.num_host_alloc, 3);  // all in the first iteration
  EXPECT_EQ(s.num_host_free, 0);
  EXPECT_EQ(s.num_reuses, 60 - 3);
  EXPECT_EQ(s.allocated_bytes.peak, static_cast<std::int64_t>(3 * 48 * mib));
  EXPECT_EQ(r.host.allocated_bytes(), 3 * 48 * mib);
}

TEST(HostPoolTest, ABufferIsNotReusedWhileItsCopyRuns) {
  rig r(64 * mib);
  const host_buffer a = r.acquire(16 * mib);
  ASSERT_EQ(r.pool.release(a.ptr, copy_stream, true), errc::ok);
  // The copy has not run: a second request gets a new buffer, not a.
  const host_buffer b = r.acquire(16 * mib);
  EXPECT_NE(b.ptr, a.ptr);
  r.gpu.complete_events(copy_stream);
  const host_buffer c = r.acquire(16 * mib);
  EXPECT_EQ(c.ptr, a.ptr);
  EXPECT_EQ(r.pool.stats().num_waits, 0);
}

TEST(HostPoolTest, AtTheBudgetAnAcquireWaitsForTheOldestCopy) {
  rig r(32 * mib);
  const host_buffer a = r.acquire(16 * mib);
  const host_buffer b = r.acquire(16 * mib);
  ASSERT_EQ(r.pool.release(a.ptr, copy_stream, true), errc::ok);
  ASSERT_EQ(r.pool.release(b.ptr, copy_stream, true), errc::ok);
  const host_buffer c = r.acquire(16 * mib);  // both pending, budget full: wait for a's copy
  EXPECT_EQ(c.ptr, a.ptr);
  const host_pool_stats s = r.pool.stats();
  EXPECT_EQ(s.num_waits, 1);
  EXPECT_LE(s.allocated_bytes.peak, static_cast<std::int64_t>(32 * mib));
}

TEST(HostPoolTest, AtTheBudgetItWaitsForACopyIntoAFittingBufferRatherThanEvict) {
  rig r(48 * mib);
  const host_buffer wide = r.acquire(32 * mib);
  const host_buffer narrow = r.acquire(16 * mib);
  ASSERT_EQ(r.pool.release(wide.ptr, copy_stream, true), errc::ok);    // oldest, does not fit
  ASSERT_EQ(r.pool.release(narrow.ptr, copy_stream, true), errc::ok);  // fits a 16 MiB request
  const host_buffer again = r.acquire(16 * mib);
  EXPECT_EQ(again.ptr, narrow.ptr);
  const host_pool_stats s = r.pool.stats();
  EXPECT_EQ(s.num_waits, 1);
  EXPECT_EQ(s.num_host_alloc, 2);  // no eviction, no new buffer
  EXPECT_EQ(s.num_host_free, 0);
}

TEST(HostPoolTest, OverBudgetWhenEveryBufferIsActiveNamesTheBudget) {
  rig r(32 * mib);
  const host_buffer a = r.acquire(16 * mib);
  const host_buffer b = r.acquire(16 * mib);
  const auto refused = r.pool.acquire(4 * mib);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, host_pool_errc::over_budget);
  EXPECT_THAT(refused.error().message, HasSubstr("33554432-byte budget"));
  EXPECT_EQ(r.pool.stats().num_over_budget, 1);
  // Nothing was lost: both buffers are still active and usable.
  EXPECT_EQ(r.pool.release(a.ptr), errc::ok);
  EXPECT_EQ(r.pool.release(b.ptr), errc::ok);
  EXPECT_TRUE(r.pool.acquire(4 * mib));  // frees an idle 16 MiB buffer to make room
  EXPECT_EQ(r.pool.stats().num_host_free, 1);
}

TEST(HostPoolTest, ASmallRequestDoesNotTakeAMuchLargerBuffer) {
  rig r(256 * mib);
  const host_buffer big = r.acquire(64 * mib);
  ASSERT_EQ(r.pool.release(big.ptr), errc::ok);
  const host_buffer small = r.acquire(8 * mib);
  EXPECT_NE(small.ptr, big.ptr);
  EXPECT_EQ(small.bytes, 8 * mib);
  ASSERT_EQ(r.pool.release(small.ptr), errc::ok);
  const host_buffer near = r.acquire(63 * mib);  // within 1/8: reuses the 64 MiB buffer
  EXPECT_EQ(near.ptr, big.ptr);
}

TEST(HostPoolTest, SizesRoundToPagesAndHugePages) {
  rig r(gib);
  EXPECT_EQ(r.acquire(1).bytes, 4 * kib);
  EXPECT_EQ(r.acquire(5000).bytes, 8 * kib);
  EXPECT_EQ(r.acquire(3 * mib + 1).bytes, 4 * mib);
}

TEST(HostPoolTest, MisuseIsReportedAndChangesNothing) {
  rig r(64 * mib);
  const host_buffer a = r.acquire(mib);
  int local = 0;
  EXPECT_EQ(r.pool.release(&local), errc::unknown_pointer);
  EXPECT_EQ(r.pool.release(a.ptr), errc::ok);
  EXPECT_EQ(r.pool.release(a.ptr), errc::double_free);
  EXPECT_EQ(r.pool.stats().active_requests.current, 0);
  const auto zero = r.pool.acquire(0);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, host_pool_errc::invalid_request);
  const auto huge = r.pool.acquire(65 * mib);
  ASSERT_FALSE(huge);
  EXPECT_THAT(huge.error().message, HasSubstr("68157440 bytes"));
}

TEST(HostPoolTest, AHostThatCannotLockMoreGivesIdleBuffersBackAndRetries) {
  rig r(gib, /*host_capacity=*/40 * mib);
  const host_buffer a = r.acquire(32 * mib);
  ASSERT_EQ(r.pool.release(a.ptr), errc::ok);
  // 16 MiB does not fit beside the idle 32 MiB buffer on this host: the pool frees it and retries.
  const host_buffer b = r.acquire(16 * mib);
  EXPECT_EQ(b.bytes, 16 * mib);
  EXPECT_EQ(r.pool.stats().num_host_free, 1);
  r.host.fail_next_allocate(errc::device_refused);
  const auto refused = r.pool.acquire(8 * mib);
  // The injected failure hits the first try; the retry succeeds.
  ASSERT_TRUE(refused);
  r.host.fail_next_allocate(errc::out_of_memory);
  const auto failed = r.pool.acquire(32 * mib);  // over the host's capacity even after the retry
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, host_pool_errc::host_refused);
  EXPECT_THAT(failed.error().message, HasSubstr("model_host"));
}

TEST(HostPoolTest, TrimFreesIdleBuffersOldestFirstAndKeepsPendingOnes) {
  rig r(gib);
  std::vector<host_buffer> held;
  for (int i = 0; i < 4; ++i) held.push_back(r.acquire(8 * mib));
  for (int i = 0; i < 3; ++i) ASSERT_EQ(r.pool.release(held[static_cast<std::size_t>(i)].ptr), errc::ok);
  ASSERT_EQ(r.pool.release(held[3].ptr, copy_stream, true), errc::ok);  // copy in flight
  EXPECT_EQ(r.pool.trim(0), 3 * 8 * mib);
  EXPECT_EQ(r.pool.stats().allocated_bytes.current, static_cast<std::int64_t>(8 * mib));
  r.gpu.complete_events(copy_stream);
  EXPECT_EQ(r.pool.trim(0), 8 * mib);
  EXPECT_EQ(r.host.allocated_bytes(), 0u);
}

TEST(HostPoolTest, ResetsPeaksAndAccumulatedCounts) {
  rig r(gib);
  const host_buffer a = r.acquire(8 * mib);
  const host_buffer b = r.acquire(8 * mib);
  ASSERT_EQ(r.pool.release(a.ptr), errc::ok);
  r.pool.reset_peak_stats();
  host_pool_stats s = r.pool.stats();
  EXPECT_EQ(s.active_bytes.peak, static_cast<std::int64_t>(8 * mib));  // was 16 MiB
  EXPECT_EQ(s.num_host_alloc, 2);
  r.pool.reset_accumulated_stats();
  s = r.pool.stats();
  EXPECT_EQ(s.num_host_alloc, 0);
  EXPECT_EQ(s.allocated_bytes.allocated, 0);
  EXPECT_EQ(s.allocated_bytes.current, static_cast<std::int64_t>(16 * mib));  // the books stay
  ASSERT_EQ(r.pool.release(b.ptr), errc::ok);
}

TEST(HostPoolTest, DestructionWaitsForCopiesAndFreesEverything) {
  model_host_memory host;
  model_device gpu(model_device_config{.events_complete_immediately = false});
  {
    host_pool pool(host, &gpu, host_pool_options{.budget_bytes = gib});
    const host_buffer a = pool.acquire(mib).value();
    ASSERT_EQ(pool.release(a.ptr, copy_stream, true), errc::ok);
    (void)pool.acquire(2 * mib).value();  // still active at destruction
  }
  EXPECT_EQ(host.allocated_bytes(), 0u);
  EXPECT_EQ(gpu.live_events(), 0u);
  EXPECT_EQ(gpu.incomplete_events(), 0u);
}

}  // namespace
}  // namespace phasealloc
