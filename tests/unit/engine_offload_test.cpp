// The engine's same-address offload on the model device (engine_offload.cpp): which pages leave,
// the books while they are away, and every way a block can end while offloaded.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/basic_policy.hpp"

namespace phasealloc {
namespace {

using ::testing::HasSubstr;

engine_options strict_options() {
  engine_options o;
  o.strict = true;
  o.check_invariants = true;  // every operation below is followed by the full invariant check
  return o;
}

std::int64_t current(const stat_array& a) { return a[stat_type::all].current; }

class EngineOffloadTest : public ::testing::Test {
 protected:
  model_device device_{model_device_config{
      .capacity_bytes = 64 * mib, .granularity_bytes = 2 * mib, .virtual_memory = true, .host_backing = true}};
  basic_policy policy_;
  engine engine_{device_, policy_, strict_options()};

  device_address must_allocate(std::size_t bytes, stream_id stream = 0) {
    auto r = engine_.allocate(bytes, stream);
    EXPECT_TRUE(r.has_value()) << (r ? "" : format_oom_report(r.error().report));
    return r.value_or(0);
  }
  offload_outcome must_offload(std::initializer_list<device_address> addrs) {
    const std::vector<device_address> list(addrs);
    auto r = engine_.offload(list);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    return r.value_or(offload_outcome{});
  }
  offload_outcome must_restore(std::initializer_list<device_address> addrs) {
    const std::vector<device_address> list(addrs);
    auto r = engine_.restore(list);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    return r.value_or(offload_outcome{});
  }
  /// Two adjacent 4 MiB blocks of one 8 MiB segment (the second takes the first's remainder).
  std::pair<device_address, device_address> two_in_one_segment() {
    engine_.deallocate(must_allocate(8 * mib));
    const device_address a = must_allocate(4 * mib);
    const device_address b = must_allocate(4 * mib);
    EXPECT_EQ(b, a + 4 * mib);
    return {a, b};
  }
  const snapshot_block& block_at(const snapshot& snap, device_address addr) {
    for (const snapshot_segment& s : snap.segments) {
      for (const snapshot_block& b : s.blocks) {
        if (b.addr == addr) return b;
      }
    }
    ADD_FAILURE() << "no block at " << addr;
    static const snapshot_block none{};
    return none;
  }
};

TEST_F(EngineOffloadTest, CopyOnlyNarrowsTheNamedBlocksAndCopiesTheRestWhole) {
  // a is lent whole to another allocator, which holds only its first MiB; b, in the same range
  // (offloaded by the same call), is a block of its own and must come back whole.
  const auto [a, b] = two_in_one_segment();
  const offload_outcome out = must_offload({a, b});
  EXPECT_EQ(out.ranges, 1u);
  const std::vector<byte_range> held{{a, 1 * mib}};
  const std::vector<device_address> lent{a};
  auto back = engine_.restore(lent, move_options{.copy_only = std::span<const byte_range>(held)});
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back.value().copied_bytes, 1 * mib + 4 * mib);  // a's held MiB, all of b
  // Offloaded by itself with nothing held, a moves its pages and copies nothing.
  auto none = engine_.offload(lent, move_options{.copy_only = std::span<const byte_range>()});
  ASSERT_TRUE(none.has_value()) << none.error().message;
  EXPECT_EQ(none.value().page_bytes, 4 * mib);
  EXPECT_EQ(none.value().copied_bytes, 0u);
  must_restore({a});
}

TEST_F(EngineOffloadTest, AWholePageBlockLeavesTheDeviceAndComesBackAtItsAddress) {
  const device_address a = must_allocate(8 * mib);
  const std::int64_t reserved = current(engine_.stats().reserved_bytes);

  const offload_outcome out = must_offload({a});
  EXPECT_EQ(out.blocks, 1u);
  EXPECT_EQ(out.ranges, 1u);
  EXPECT_EQ(out.page_bytes, 8 * mib);
  EXPECT_EQ(out.copied_bytes, 8 * mib);
  EXPECT_EQ(out.kept_bytes, 0u);
  device_stats s = engine_.stats();
  EXPECT_EQ(current(s.reserved_bytes), reserved - static_cast<std::int64_t>(8 * mib));  // the device's memory only
  EXPECT_EQ(current(s.offloaded_bytes), static_cast<std::int64_t>(8 * mib));
  EXPECT_EQ(current(s.allocated_bytes), static_cast<std::int64_t>(8 * mib));  // still live
  EXPECT_EQ(device_.host_backed_bytes(), 8 * mib);
  EXPECT_EQ(device_.mapped_bytes(), 0u);
  EXPECT_TRUE(block_at(engine_.take_snapshot(), a).offloaded);
  device_.reset_counters();
  const offload_outcome again = must_offload({a});  // already away: left as it is
  EXPECT_EQ(again.blocks, 0u);
  EXPECT_EQ(device_.counters().offload, 0u);
  EXPECT_EQ(current(engine_.stats().offloaded_bytes), static_cast<std::int64_t>(8 * mib));

  const offload_outcome back = must_restore({a});
  EXPECT_EQ(back.page_bytes, 8 * mib);
  EXPECT_EQ(back.copied_bytes, 8 * mib);
  s = engine_.stats();
  EXPECT_EQ(current(s.reserved_bytes), reserved);
  EXPECT_EQ(current(s.offloaded_bytes), 0);
  EXPECT_EQ(s.num_offloads, 1);
  EXPECT_EQ(s.num_restores, 1);
  EXPECT_EQ(device_.host_backed_bytes(), 0u);
  EXPECT_EQ(device_.moved().to_host, 8 * mib);
  EXPECT_EQ(device_.moved().to_device, 8 * mib);
  EXPECT_FALSE(block_at(engine_.take_snapshot(), a).offloaded);
  EXPECT_EQ(engine_.deallocate(a), errc::ok);
}

TEST_F(EngineOffloadTest, OnlyTheRequestedBytesAreCopiedNeverTheRounding) {
  const device_address a = must_allocate(8 * mib - 4096);  // rounds to 8 MiB
  const offload_outcome out = must_offload({a});
  EXPECT_EQ(out.page_bytes, 8 * mib);
  EXPECT_EQ(out.copied_bytes, 8 * mib - 4096);
  EXPECT_EQ(device_.moved().to_host, 8 * mib - 4096);
  must_restore({a});
  EXPECT_EQ(device_.moved().to_device, 8 * mib - 4096);
}

TEST_F(EngineOffloadTest, AdjacentBlocksLeaveAsOneRangeWithOneDeviceCall) {
  const auto [a, b] = two_in_one_segment();
  device_.reset_counters();
  const offload_outcome out = must_offload({b, a, a});  // any order, duplicates allowed
  EXPECT_EQ(out.blocks, 2u);
  EXPECT_EQ(out.ranges, 1u);
  EXPECT_EQ(out.page_bytes, 8 * mib);
  EXPECT_EQ(device_.counters().offload, 1u);
  device_.reset_counters();
  const offload_outcome back = must_restore({b});  // one block names its whole range
  EXPECT_EQ(back.ranges, 1u);
  EXPECT_EQ(back.blocks, 2u);
  EXPECT_EQ(device_.counters().restore, 1u);
  EXPECT_EQ(current(engine_.stats().offloaded_bytes), 0);
}

TEST_F(EngineOffloadTest, APageSharedWithABlockThatStaysStaysAndTheBooksSaySo) {
  engine_.deallocate(must_allocate(8 * mib));
  const device_address a = must_allocate(3 * mib);  // [0, 3): page [2, 4) is shared with b
  const device_address b = must_allocate(3 * mib);
  ASSERT_EQ(b, a + 3 * mib);
  const offload_outcome out = must_offload({a});
  EXPECT_EQ(out.page_bytes, 2 * mib);
  EXPECT_EQ(out.kept_bytes, 1 * mib);
  EXPECT_EQ(out.copied_bytes, 2 * mib);  // only the part of a on its own page
  EXPECT_EQ(engine_.stats().offload_kept_bytes, static_cast<std::int64_t>(1 * mib));
  // A block on no whole page of its own, sharing it with a live block, stays entirely, and nothing
  // is asked of the device.
  const device_address small = must_allocate(4096);
  const device_address neighbour = must_allocate(4096);
  ASSERT_EQ(neighbour, small + 4096);
  device_.reset_counters();
  const offload_outcome none = must_offload({small});
  EXPECT_EQ(none.page_bytes, 0u);
  EXPECT_EQ(none.kept_bytes, 4096u);
  EXPECT_EQ(device_.counters().offload, 0u);
}

TEST_F(EngineOffloadTest, AnEdgePageWhoseOtherBytesAreFreeLeavesWithTheBlockUncopied) {
  engine_.deallocate(must_allocate(8 * mib));
  const device_address a = must_allocate(3 * mib);  // [0, 3); [3, 8) is one free block
  const offload_outcome out = must_offload({a});
  EXPECT_EQ(out.page_bytes, 4 * mib);  // page [2, 4) goes too: its other MiB is free cached memory
  EXPECT_EQ(out.kept_bytes, 0u);
  EXPECT_EQ(out.copied_bytes, 3 * mib);  // never the free MiB
  EXPECT_EQ(device_.moved().to_host, 3 * mib);
  const snapshot snap = engine_.take_snapshot();
  EXPECT_EQ(block_at(snap, a + 3 * mib).state, block_state::offloaded_free);
  EXPECT_EQ(block_at(snap, a + 3 * mib).bytes, 1 * mib);
  EXPECT_EQ(block_at(snap, a + 4 * mib).state, block_state::free);  // the rest stays cached
  // The cached rest serves a request; the free MiB on the host is never handed out.
  const device_address c = must_allocate(4 * mib);
  EXPECT_EQ(c, a + 4 * mib);
  const device_address d = must_allocate(512 * kib);
  EXPECT_TRUE(d < a || d >= a + 8 * mib) << d;
  must_restore({a});
  EXPECT_EQ(device_.moved().to_device, 3 * mib);
  EXPECT_EQ(block_at(engine_.take_snapshot(), a + 3 * mib).state, block_state::free);  // cached again
  // Freed while away, the range (free MiB included) goes back to the host whole.
  must_offload({a});
  ASSERT_EQ(engine_.deallocate(a), errc::ok);
  EXPECT_EQ(device_.host_backed_bytes(), 0u);
  EXPECT_EQ(current(engine_.stats().offloaded_bytes), 0);
}

TEST_F(EngineOffloadTest, AnEdgePageWithAPendingFreeStays) {
  model_device d{model_device_config{.capacity_bytes = 64 * mib, .granularity_bytes = 2 * mib, .virtual_memory = true,
                                     .events_complete_immediately = false, .host_backing = true}};
  engine e{d, policy_, strict_options()};
  ASSERT_EQ(e.deallocate(e.allocate(8 * mib, 0).value()), errc::ok);
  const device_address a = e.allocate(3 * mib, 0).value();
  const device_address b = e.allocate(2 * mib, 0).value();  // [3, 5): page [2, 4) is shared with it
  ASSERT_EQ(b, a + 3 * mib);
  ASSERT_EQ(e.record_stream(b, 7), errc::ok);
  ASSERT_EQ(e.deallocate(b), errc::ok);  // pending: stream 7's work may still use it
  auto out = e.offload(std::vector<device_address>{a});
  ASSERT_TRUE(out.has_value()) << out.error().message;
  EXPECT_EQ(out.value().page_bytes, 2 * mib);
  EXPECT_EQ(out.value().kept_bytes, 1 * mib);
  d.complete_all_events();
}

TEST_F(EngineOffloadTest, ATagNamesEveryBlockThatCarriesItAndNoOther) {
  auto tagged = [&](std::size_t bytes, std::uint32_t tag) {
    auto r = engine_.allocate(bytes, 0, tag);
    EXPECT_TRUE(r.has_value());
    return r.value_or(0);
  };
  const device_address a = tagged(8 * mib, 3);
  const device_address plain = tagged(8 * mib, 0);
  const device_address b = tagged(8 * mib, 3);
  const device_address other = tagged(8 * mib, 4);
  auto out = engine_.offload_tagged(3);
  ASSERT_TRUE(out.has_value()) << out.error().message;
  EXPECT_EQ(out.value().blocks, 2u);
  EXPECT_EQ(out.value().page_bytes, 16 * mib);
  const snapshot snap = engine_.take_snapshot();
  EXPECT_TRUE(block_at(snap, a).offloaded);
  EXPECT_TRUE(block_at(snap, b).offloaded);
  EXPECT_FALSE(block_at(snap, plain).offloaded);
  EXPECT_FALSE(block_at(snap, other).offloaded);
  // A tag no block carries restores nothing (restore() of no address would restore every range).
  auto none = engine_.restore_tagged(9);
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none.value().ranges, 0u);
  EXPECT_EQ(current(engine_.stats().offloaded_bytes), static_cast<std::int64_t>(16 * mib));
  auto back = engine_.restore_tagged(3);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back.value().page_bytes, 16 * mib);
  EXPECT_EQ(current(engine_.stats().offloaded_bytes), 0);
  // A freed block no longer carries its tag; tag 0 is refused.
  ASSERT_EQ(engine_.deallocate(a), errc::ok);
  EXPECT_EQ(engine_.offload_tagged(3).value().blocks, 1u);
  EXPECT_FALSE(engine_.offload_tagged(0).has_value());
}

TEST_F(EngineOffloadTest, FreeingTheLastBlockOfARangeGivesItsHostMemoryBack) {
  const device_address a = must_allocate(8 * mib);
  must_offload({a});
  ASSERT_EQ(device_.host_backed_bytes(), 8 * mib);
  ASSERT_EQ(engine_.deallocate(a), errc::ok);
  EXPECT_EQ(device_.host_backed_bytes(), 0u);
  EXPECT_FALSE(device_.is_mapped(a, 8 * mib));  // unmapped whole, booked as unmapped pages
  const device_stats s = engine_.stats();
  EXPECT_EQ(current(s.offloaded_bytes), 0);
  EXPECT_EQ(current(s.allocated_bytes), 0);
  // The address space is reusable: a new block of the same size maps device pages there or elsewhere.
  const device_address c = must_allocate(8 * mib);
  EXPECT_TRUE(device_.is_mapped(c, 8 * mib));
}

TEST_F(EngineOffloadTest, ABlockFreedWhileItsRangeIsAwayIsNeitherReusedNorCopiedBack) {
  const auto [a, b] = two_in_one_segment();
  must_offload({a, b});
  ASSERT_EQ(engine_.deallocate(a), errc::ok);
  EXPECT_EQ(device_.host_backed_bytes(), 8 * mib);  // b still lives there
  EXPECT_EQ(block_at(engine_.take_snapshot(), a).state, block_state::offloaded_free);
  // A new request of a's size does not get a's host-backed bytes.
  const device_address c = must_allocate(4 * mib);
  EXPECT_NE(c, a);
  const std::size_t to_device = device_.moved().to_device;
  must_restore({b});
  EXPECT_EQ(device_.moved().to_device - to_device, 4 * mib);  // b's bytes only
  EXPECT_EQ(block_at(engine_.take_snapshot(), a).state, block_state::free);
}

TEST_F(EngineOffloadTest, FreeingAnOffloadedBlockTwiceIsADoubleFreeThatNamesIt) {
  engine_options lenient;
  lenient.check_invariants = true;
  engine e{device_, policy_, lenient};
  const auto [a, b] = std::pair{e.allocate(8 * mib, 0).value(), e.allocate(8 * mib, 0).value()};
  ASSERT_TRUE(e.offload(std::vector<device_address>{a, b}).has_value());
  ASSERT_EQ(e.deallocate(a), errc::ok);
  EXPECT_EQ(e.deallocate(a), errc::double_free);
  EXPECT_THAT(e.last_misuse().message, HasSubstr("already freed"));
}

TEST_F(EngineOffloadTest, ARestoreWithTheDeviceFullKeepsTheBytesOnTheHostAndSucceedsLater) {
  const device_address a = must_allocate(8 * mib);
  must_offload({a});
  std::vector<device_address> filler;
  for (int i = 0; i < 32; ++i) filler.push_back(must_allocate(2 * mib));  // all 64 MiB
  ASSERT_EQ(device_.free_bytes(), 0u);

  const std::vector<device_address> list{a};
  auto failed = engine_.restore(list);
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code, errc::out_of_memory);
  EXPECT_THAT(failed.error().message, HasSubstr("stay on the host"));
  EXPECT_EQ(device_.host_backed_bytes(), 8 * mib);  // nothing dropped
  EXPECT_EQ(current(engine_.stats().offloaded_bytes), static_cast<std::int64_t>(8 * mib));
  EXPECT_EQ(engine_.stats().num_restore_ooms, 1);

  for (int i = 0; i < 4; ++i) engine_.deallocate(filler[i]);  // 8 MiB cached: the restore releases it
  const offload_outcome back = must_restore({a});
  EXPECT_EQ(back.page_bytes, 8 * mib);
  EXPECT_EQ(device_.host_backed_bytes(), 0u);
}

TEST_F(EngineOffloadTest, ARestoreGivesBackAsMuchCachedFreeMemoryAsItMaps) {
  const device_address kept = must_allocate(8 * mib);
  const device_address scratch = must_allocate(16 * mib);
  must_offload({kept});
  engine_.deallocate(scratch);  // 16 MiB of free cached memory the restored range cannot reuse
  const std::int64_t reserved = current(engine_.stats().reserved_bytes);
  must_restore({kept});
  // At least its 8 MiB of the cache went back (a free page run goes whole: here all 16).
  EXPECT_LE(current(engine_.stats().reserved_bytes), reserved) << "the restore added to the cache";
  EXPECT_EQ(current(engine_.stats().reserved_bytes), static_cast<std::int64_t>(8 * mib));
  EXPECT_EQ(current(engine_.stats().allocated_bytes), static_cast<std::int64_t>(8 * mib));
  // A non-blocking restore keeps the cache (releasing it would wait for the device).
  const device_address other = must_allocate(16 * mib);
  must_offload({kept});
  engine_.deallocate(other);
  const std::int64_t before = current(engine_.stats().reserved_bytes);
  auto started = engine_.restore(std::vector<device_address>{kept}, move_options{.non_blocking = true});
  ASSERT_TRUE(started.has_value()) << started.error().message;
  ASSERT_TRUE(engine_.finish_moves(0, true).has_value());
  EXPECT_EQ(current(engine_.stats().reserved_bytes), before + static_cast<std::int64_t>(8 * mib));
  engine_.deallocate(kept);
}

TEST_F(EngineOffloadTest, EmptyCacheAndReleaseNeverTouchOffloadedPages) {
  const auto [a, b] = two_in_one_segment();
  must_offload({a, b});
  engine_.deallocate(a);
  engine_.empty_cache();
  EXPECT_EQ(device_.host_backed_bytes(), 8 * mib);
  EXPECT_EQ(current(engine_.stats().offloaded_bytes), static_cast<std::int64_t>(8 * mib));
  must_restore({b});
  engine_.deallocate(b);
  engine_.empty_cache();  // now the segment is idle and goes back
  EXPECT_EQ(device_.mapped_bytes(), 0u);
}

TEST_F(EngineOffloadTest, APendingFreeOfAnOffloadedBlockDropsItsRangeWhenTheStreamIsDone) {
  model_device d{model_device_config{.capacity_bytes = 64 * mib, .granularity_bytes = 2 * mib, .virtual_memory = true,
                                     .events_complete_immediately = false, .host_backing = true}};
  engine e{d, policy_, strict_options()};
  const device_address a = e.allocate(8 * mib, 0).value();
  ASSERT_EQ(e.record_stream(a, 7), errc::ok);
  d.complete_all_events();
  ASSERT_TRUE(e.offload(std::vector<device_address>{a}).has_value());
  ASSERT_EQ(e.deallocate(a), errc::ok);  // stream 7 may still use it
  EXPECT_EQ(d.host_backed_bytes(), 8 * mib);
  d.complete_events(7);
  e.empty_cache();  // polls the pending frees
  EXPECT_EQ(d.host_backed_bytes(), 0u);
  EXPECT_EQ(current(e.stats().offloaded_bytes), 0);
}

TEST_F(EngineOffloadTest, BadRequestsAreErrorsThatNameWhatWasWrongAndMoveNothing) {
  const device_address a = must_allocate(8 * mib);
  auto unknown = engine_.offload(std::vector<device_address>{a, a + 4096});
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code, errc::unknown_pointer);
  EXPECT_THAT(unknown.error().message, HasSubstr("offload of 0x"));
  EXPECT_EQ(device_.host_backed_bytes(), 0u);  // checked before anything moved

  model_device plain{model_device_config{.capacity_bytes = 64 * mib, .virtual_memory = true}};
  engine e{plain, policy_, strict_options()};
  const device_address p = e.allocate(8 * mib, 0).value();
  auto refused = e.offload(std::vector<device_address>{p});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, errc::not_supported);
  EXPECT_THAT(refused.error().message, HasSubstr("device 'model'"));

  engine_.hold_device_calls(true);
  auto capturing = engine_.offload(std::vector<device_address>{a});
  ASSERT_FALSE(capturing.has_value());
  EXPECT_THAT(capturing.error().message, HasSubstr("capture"));
  engine_.hold_device_calls(false);
  must_offload({a});
  engine_.hold_device_calls(true);
  auto restoring = engine_.restore(std::vector<device_address>{a});
  ASSERT_FALSE(restoring.has_value());
  EXPECT_THAT(restoring.error().message, HasSubstr("capture"));
  EXPECT_EQ(device_.host_backed_bytes(), 8 * mib);  // still away, still correct
  engine_.hold_device_calls(false);
}

TEST_F(EngineOffloadTest, AnOffloadPastTheHostBudgetLeavesTheRestOnTheDeviceAndNamesTheBudget) {
  engine_options o = strict_options();
  o.offload_host_budget_bytes = 12 * mib;
  engine e{device_, policy_, o};
  const device_address a = e.allocate(8 * mib, 0).value();
  const device_address b = e.allocate(8 * mib, 0).value();
  ASSERT_TRUE(e.offload(std::vector<device_address>{a}).has_value());
  auto over = e.offload(std::vector<device_address>{b});
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().code, errc::out_of_memory);
  EXPECT_THAT(over.error().message, HasSubstr("offload_host_budget"));
  EXPECT_EQ(current(e.stats().offloaded_bytes), static_cast<std::int64_t>(8 * mib));  // b stayed
  ASSERT_TRUE(e.restore(std::vector<device_address>{a}).has_value());
  EXPECT_TRUE(e.offload(std::vector<device_address>{b}).has_value());  // room again
}

TEST_F(EngineOffloadTest, AnEngineDestroyedWithRangesAwayGivesEveryByteBack) {
  {
    engine e{device_, policy_, strict_options()};
    const device_address whole = e.allocate(8 * mib, 0).value();
    e.deallocate(e.allocate(8 * mib, 0).value());
    const device_address a = e.allocate(3 * mib, 0).value();  // shares a page with b
    const device_address b = e.allocate(3 * mib, 0).value();
    const device_address small = e.allocate(4096, 0).value();
    (void)small;
    ASSERT_TRUE(e.offload(std::vector<device_address>{whole, a, b}).has_value());
    ASSERT_GT(device_.host_backed_bytes(), 0u);
  }
  EXPECT_EQ(device_.host_backed_bytes(), 0u);
  EXPECT_EQ(device_.mapped_bytes(), 0u);
  EXPECT_EQ(device_.live_reservations(), 0u);
}

TEST_F(EngineOffloadTest, AFailedDeviceOffloadChangesNoBookAndSaysWhichBlocks) {
  const device_address a = must_allocate(8 * mib);
  const device_stats before = engine_.stats();
  device_.fail_next(model_device_call::offload, errc::out_of_memory);
  auto r = engine_.offload(std::vector<device_address>{a});
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message, HasSubstr("they stay on the device"));
  EXPECT_EQ(current(engine_.stats().reserved_bytes), current(before.reserved_bytes));
  EXPECT_EQ(current(engine_.stats().offloaded_bytes), 0);
  EXPECT_FALSE(block_at(engine_.take_snapshot(), a).offloaded);
}

TEST_F(EngineOffloadTest, ATraceFollowsReservedBytesThroughAnOffloadAndARestore) {
  struct segment_events final : trace_sink {
    std::vector<trace_record> records;
    void on_event(const trace_record& r) noexcept override {
      if (r.op == trace_op::segment_map || r.op == trace_op::segment_unmap) records.push_back(r);
    }
  } sink;
  const device_address a = must_allocate(8 * mib);
  engine_.set_trace_sink(&sink);
  must_offload({a});
  must_restore({a});
  engine_.set_trace_sink(nullptr);
  ASSERT_EQ(sink.records.size(), 2u);
  EXPECT_EQ(sink.records[0].op, trace_op::segment_unmap);
  EXPECT_EQ(sink.records[0].block_bytes, 8 * mib);
  EXPECT_EQ(sink.records[0].reserved_bytes, 0u);  // the level once it happened
  EXPECT_EQ(sink.records[1].op, trace_op::segment_map);
  EXPECT_EQ(sink.records[1].reserved_bytes, 8 * mib);
}

TEST_F(EngineOffloadTest, StatsAndPhasesCarryTheOffloadedBytesUnderTorchStyleNames) {
  const device_address a = must_allocate(8 * mib);
  engine_.set_phase("training");
  must_offload({a});
  engine_.set_phase("generation");
  must_restore({});  // everything
  const auto keys = to_memory_stats(engine_.stats());
  const auto value = [&](std::string_view key) {
    const auto it = std::find_if(keys.begin(), keys.end(), [&](const auto& kv) { return kv.first == key; });
    EXPECT_NE(it, keys.end()) << key;
    return it == keys.end() ? -1 : it->second;
  };
  EXPECT_EQ(value("offloaded_bytes.all.peak"), static_cast<std::int64_t>(8 * mib));
  EXPECT_EQ(value("offloaded_bytes.all.current"), 0);
  EXPECT_EQ(value("num_offloads"), 1);
  EXPECT_EQ(value("num_restores"), 1);
  for (const phase_stats& p : engine_.phases()) {
    if (p.name == "training") {
      EXPECT_EQ(p.offloaded_bytes, static_cast<std::int64_t>(8 * mib));
    } else if (p.name == "generation") {
      EXPECT_EQ(p.restored_bytes, static_cast<std::int64_t>(8 * mib));
    }
  }
}

}  // namespace
}  // namespace phasealloc
