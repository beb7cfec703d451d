// model_device beyond the conformance suite: deferred events, fault injection, counters, modelled
// cost, addresses placed as the CUDA driver places them, thread safety.
#include "phasealloc/devices/model_device.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace phasealloc {
namespace {

constexpr std::size_t g = 2 * mib;

model_device_config vmm(std::size_t capacity_bytes = 1 * gib) {
  return {.capacity_bytes = capacity_bytes, .granularity_bytes = g, .virtual_memory = true};
}

model_device_config runtime(std::size_t capacity_bytes = 1 * gib) {
  return {.capacity_bytes = capacity_bytes, .granularity_bytes = g, .virtual_memory = false};
}

model_device_config deferred_events() {
  model_device_config c = vmm();
  c.events_complete_immediately = false;
  return c;
}

event_id make_event(model_device& dev) {
  auto e = dev.create_event();
  EXPECT_TRUE(e);
  return e.value_or(0);
}

bool complete(model_device& dev, event_id e) {
  auto q = dev.query_event(e);
  EXPECT_TRUE(q);
  return q.value_or(false);
}

// --- caps and addresses -------------------------------------------------------------------------

TEST(SimDeviceTest, ReportsCapsFromItsConfig) {
  model_device runtime_like(runtime(3 * gib));
  EXPECT_EQ(runtime_like.name(), "model");
  EXPECT_EQ(runtime_like.caps().granularity_bytes, g);
  EXPECT_EQ(runtime_like.caps().capacity_bytes, 3 * gib);
  EXPECT_FALSE(runtime_like.caps().has_virtual_reserve);
  EXPECT_FALSE(runtime_like.caps().has_partial_unmap);
  EXPECT_EQ(runtime_like.free_bytes(), 3 * gib);

  model_device vmm_like(vmm());
  EXPECT_TRUE(vmm_like.caps().has_virtual_reserve);
  EXPECT_TRUE(vmm_like.caps().has_partial_unmap);
}

TEST(SimDeviceTest, StartsAtTheTopOfItsWindowAndReusesTheHighestReleasedRangeAsTheDriverDoes) {
  model_device dev(runtime());
  const device_address top = model_address_base + model_address_window_bytes;
  auto first = dev.reserve(4 * g);
  ASSERT_TRUE(first);
  EXPECT_EQ(first.value(), top - 4 * g);
  auto second = dev.reserve(2 * g);
  ASSERT_TRUE(second);
  EXPECT_EQ(second.value(), top - 6 * g);
  ASSERT_EQ(dev.release(first.value(), 4 * g), errc::ok);

  auto third = dev.reserve(g);  // the top range is free again: the driver hands it out first
  ASSERT_TRUE(third);
  EXPECT_EQ(third.value(), top - g);
  auto fourth = dev.reserve(8 * g);  // too big for the 3 granules left above `second`: taken below it
  ASSERT_TRUE(fourth);
  EXPECT_EQ(fourth.value(), top - 14 * g);
  EXPECT_EQ(dev.release(second.value(), 2 * g), errc::ok);
  auto fifth = dev.reserve(5 * g);  // second's range and the 3 granules above it merged
  ASSERT_TRUE(fifth);
  EXPECT_EQ(fifth.value(), top - 6 * g);
}

TEST(SimDeviceTest, PlacesEachNewReservationBelowTheEarlierOnesAsTheCudaDriverDoes) {
  model_device dev(runtime());
  device_address previous = ~device_address{0};
  for (std::size_t granules : {1, 3, 2, 10, 1}) {
    auto r = dev.reserve(granules * g);
    ASSERT_TRUE(r);
    EXPECT_LE(r.value() + granules * g, previous);
    previous = r.value();
  }
}

TEST(SimDeviceTest, AlignsTheBaseToALargeGranularity) {
  model_device dev({.capacity_bytes = 64 * gib, .granularity_bytes = 3 * gib, .virtual_memory = false});
  auto a = dev.reserve(3 * gib);
  ASSERT_TRUE(a);
  EXPECT_EQ(a.value() % (3 * gib), 0u);
}

TEST(SimDeviceTest, RefusesStalePointersIntoReleasedReservations) {
  model_device dev(vmm());
  auto a = dev.reserve(4 * g);
  ASSERT_TRUE(a);
  auto b = dev.reserve(4 * g);
  ASSERT_TRUE(b);
  ASSERT_EQ(dev.release(a.value(), 4 * g), errc::ok);
  EXPECT_EQ(dev.map(a.value(), g), errc::invalid_argument);
  EXPECT_FALSE(dev.is_mapped(a.value(), g));
  EXPECT_EQ(dev.map(b.value(), g), errc::ok);
  EXPECT_EQ(dev.unmap(b.value(), g), errc::ok);
}

TEST(SimDeviceTest, AnswersOutOfMemoryWhenTheAddressSpaceRunsOut) {
  model_device dev(vmm());
  // Address space only (vmm mode takes no memory): two of these do not fit in the window.
  const std::size_t most = model_address_window_bytes / 2 + g;
  auto a = dev.reserve(most);
  ASSERT_TRUE(a);
  auto b = dev.reserve(most);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error(), errc::out_of_memory);
  EXPECT_EQ(dev.reserved_bytes(), most);
  EXPECT_TRUE(dev.reserve(model_address_window_bytes / 2 - g)) << "what is left of the window is still handed out";
  EXPECT_EQ(dev.map(a.value() + most - g, g), errc::ok) << "books stay small for a huge reservation";
  EXPECT_EQ(dev.unmap(a.value() + most - g, g), errc::ok);
  EXPECT_EQ(dev.release(a.value(), most), errc::ok);
}

// --- capacity and books -------------------------------------------------------------------------

TEST(SimDeviceTest, CountsReservedBytesAgainstCapacityWithoutVirtualMemory) {
  model_device dev(runtime(8 * g));
  auto a = dev.reserve(6 * g);
  ASSERT_TRUE(a);
  EXPECT_EQ(dev.mapped_bytes(), 6 * g);
  EXPECT_EQ(dev.reserved_bytes(), 6 * g);
  EXPECT_EQ(dev.free_bytes(), 2 * g);
  EXPECT_TRUE(dev.is_mapped(a.value() + g, 2 * g));
  auto b = dev.reserve(4 * g);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error(), errc::out_of_memory);
  EXPECT_EQ(dev.live_reservations(), 1u);
}

TEST(SimDeviceTest, CountsMappedBytesAgainstCapacityWithVirtualMemory) {
  model_device dev(vmm(8 * g));
  auto a = dev.reserve(64 * g);
  ASSERT_TRUE(a) << "address space is not capacity";
  EXPECT_EQ(dev.mapped_bytes(), 0u);
  EXPECT_EQ(dev.reserved_bytes(), 64 * g);
  EXPECT_EQ(dev.free_bytes(), 8 * g);
  ASSERT_EQ(dev.map(a.value(), 6 * g), errc::ok);
  EXPECT_EQ(dev.map(a.value() + 6 * g, 4 * g), errc::out_of_memory);
  EXPECT_FALSE(dev.is_mapped(a.value() + 6 * g, g)) << "a failed map maps nothing";
  EXPECT_EQ(dev.map(a.value() + 6 * g, 2 * g), errc::ok);
  EXPECT_EQ(dev.free_bytes(), 0u);
  EXPECT_EQ(dev.mapped_bytes(), 8 * g);
}

TEST(SimDeviceTest, TracksMappedGranulesPrecisely) {
  model_device dev(vmm());
  auto r = dev.reserve(10 * g);
  ASSERT_TRUE(r);
  const device_address b = r.value();
  ASSERT_EQ(dev.map(b + 2 * g, 3 * g), errc::ok);
  ASSERT_EQ(dev.map(b + 5 * g, 2 * g), errc::ok);  // adjacent: merges with the first run
  EXPECT_TRUE(dev.is_mapped(b + 2 * g, 5 * g));
  EXPECT_FALSE(dev.is_mapped(b + g, 2 * g));
  EXPECT_FALSE(dev.is_mapped(b + 6 * g, 2 * g));
  ASSERT_EQ(dev.unmap(b + 4 * g, g), errc::ok);  // splits the run
  EXPECT_TRUE(dev.is_mapped(b + 2 * g, 2 * g));
  EXPECT_FALSE(dev.is_mapped(b + 4 * g, g));
  EXPECT_TRUE(dev.is_mapped(b + 5 * g, 2 * g));
  EXPECT_EQ(dev.unmap(b + 3 * g, 2 * g), errc::invalid_argument) << "straddles the hole";
  EXPECT_EQ(dev.mapped_bytes(), 4 * g);
  EXPECT_EQ(dev.release(b, 10 * g), errc::invalid_argument);
  ASSERT_EQ(dev.unmap(b + 2 * g, 2 * g), errc::ok);
  ASSERT_EQ(dev.unmap(b + 5 * g, 2 * g), errc::ok);
  EXPECT_EQ(dev.release(b, 10 * g), errc::ok);
  EXPECT_EQ(dev.live_reservations(), 0u);
  EXPECT_EQ(dev.reserved_bytes(), 0u);
}

// --- events -------------------------------------------------------------------------------------

TEST(SimDeviceTest, CompletesEventsImmediatelyByDefault) {
  model_device dev(vmm());
  const event_id e = make_event(dev);
  ASSERT_EQ(dev.record_event(e, 7), errc::ok);
  EXPECT_TRUE(complete(dev, e));
  EXPECT_EQ(dev.incomplete_events(), 0u);
}

TEST(SimDeviceTest, KeepsDeferredEventsIncompleteUntilTheirStreamCompletes) {
  model_device dev(deferred_events());
  const event_id on_1 = make_event(dev);
  const event_id on_2 = make_event(dev);
  ASSERT_EQ(dev.record_event(on_1, 1), errc::ok);
  ASSERT_EQ(dev.record_event(on_2, 2), errc::ok);
  EXPECT_FALSE(complete(dev, on_1));
  EXPECT_FALSE(complete(dev, on_2));
  EXPECT_EQ(dev.incomplete_events(), 2u);

  dev.complete_events(1);
  EXPECT_TRUE(complete(dev, on_1));
  EXPECT_FALSE(complete(dev, on_2));
  dev.complete_all_events();
  EXPECT_TRUE(complete(dev, on_2));
  EXPECT_EQ(dev.incomplete_events(), 0u);
}

TEST(SimDeviceTest, SynchronizeEventCompletesEarlierRecordsOnItsStreamOnly) {
  model_device dev(deferred_events());
  const event_id first = make_event(dev);
  const event_id second = make_event(dev);
  const event_id third = make_event(dev);
  const event_id other_stream = make_event(dev);
  ASSERT_EQ(dev.record_event(first, 1), errc::ok);
  ASSERT_EQ(dev.record_event(other_stream, 2), errc::ok);
  ASSERT_EQ(dev.record_event(second, 1), errc::ok);
  ASSERT_EQ(dev.record_event(third, 1), errc::ok);

  ASSERT_EQ(dev.synchronize_event(second), errc::ok);
  EXPECT_TRUE(complete(dev, first)) << "recorded before on the same stream";
  EXPECT_TRUE(complete(dev, second));
  EXPECT_FALSE(complete(dev, third)) << "recorded after";
  EXPECT_FALSE(complete(dev, other_stream)) << "another stream";
}

TEST(SimDeviceTest, SynchronizeCompletesEveryEvent) {
  model_device dev(deferred_events());
  const event_id a = make_event(dev);
  const event_id b = make_event(dev);
  ASSERT_EQ(dev.record_event(a, 1), errc::ok);
  ASSERT_EQ(dev.record_event(b, 2), errc::ok);
  ASSERT_EQ(dev.synchronize(), errc::ok);
  EXPECT_TRUE(complete(dev, a));
  EXPECT_TRUE(complete(dev, b));
}

TEST(SimDeviceTest, RecordingAgainMakesAnEventIncompleteAgain) {
  model_device dev(deferred_events());
  const event_id e = make_event(dev);
  EXPECT_TRUE(complete(dev, e)) << "never recorded";
  ASSERT_EQ(dev.record_event(e, 1), errc::ok);
  dev.complete_events(1);
  EXPECT_TRUE(complete(dev, e));
  ASSERT_EQ(dev.record_event(e, 3), errc::ok);
  EXPECT_FALSE(complete(dev, e));
  dev.complete_events(1);
  EXPECT_FALSE(complete(dev, e)) << "now on stream 3";
  dev.complete_events(3);
  EXPECT_TRUE(complete(dev, e));
}

TEST(SimDeviceTest, CountsLiveEvents) {
  model_device dev(vmm());
  const event_id a = make_event(dev);
  const event_id b = make_event(dev);
  EXPECT_EQ(dev.live_events(), 2u);
  dev.destroy_event(a);
  EXPECT_EQ(dev.live_events(), 1u);
  dev.destroy_event(a);  // unknown now: counted as failed, nothing else
  EXPECT_EQ(dev.live_events(), 1u);
  EXPECT_EQ(dev.counters().failed, 1u);
  dev.destroy_event(b);
  EXPECT_EQ(dev.live_events(), 0u);
}

// --- fault injection ----------------------------------------------------------------------------

TEST(SimDeviceTest, FailsTheNthCallOfAKindAndChangesNothing) {
  model_device dev(vmm());
  auto r = dev.reserve(8 * g);
  ASSERT_TRUE(r);
  const device_address b = r.value();
  dev.fail_next(model_device_call::map, errc::device_refused, 2);  // the third map fails
  EXPECT_EQ(dev.map(b, g), errc::ok);
  EXPECT_EQ(dev.map(b + g, g), errc::ok);
  EXPECT_EQ(dev.map(b + 2 * g, g), errc::device_refused);
  EXPECT_FALSE(dev.is_mapped(b + 2 * g, g));
  EXPECT_EQ(dev.mapped_bytes(), 2 * g);
  EXPECT_EQ(dev.map(b + 2 * g, g), errc::ok) << "a fault fires once";
  EXPECT_EQ(dev.counters().map, 4u);
  EXPECT_EQ(dev.counters().failed, 1u);
}

TEST(SimDeviceTest, InjectsFaultsIntoEveryFailableCall) {
  model_device dev(vmm());
  auto r = dev.reserve(4 * g);
  ASSERT_TRUE(r);
  const device_address b = r.value();
  ASSERT_EQ(dev.map(b, g), errc::ok);
  const event_id e = make_event(dev);

  dev.fail_next(model_device_call::reserve, errc::out_of_memory);
  auto failed_reserve = dev.reserve(g);
  ASSERT_FALSE(failed_reserve);
  EXPECT_EQ(failed_reserve.error(), errc::out_of_memory);

  dev.fail_next(model_device_call::unmap, errc::device_refused);
  EXPECT_EQ(dev.unmap(b, g), errc::device_refused);
  EXPECT_TRUE(dev.is_mapped(b, g)) << "a failed unmap unmaps nothing";
  ASSERT_EQ(dev.unmap(b, g), errc::ok);

  dev.fail_next(model_device_call::release, errc::device_refused);
  EXPECT_EQ(dev.release(b, 4 * g), errc::device_refused);
  EXPECT_EQ(dev.live_reservations(), 1u) << "a failed release releases nothing";

  dev.fail_next(model_device_call::create_event, errc::device_refused);
  EXPECT_FALSE(dev.create_event());
  dev.fail_next(model_device_call::record_event, errc::device_refused);
  EXPECT_EQ(dev.record_event(e, 0), errc::device_refused);
  dev.fail_next(model_device_call::query_event, errc::device_refused);
  EXPECT_FALSE(dev.query_event(e));
  dev.fail_next(model_device_call::synchronize_event, errc::device_refused);
  EXPECT_EQ(dev.synchronize_event(e), errc::device_refused);
  dev.fail_next(model_device_call::synchronize, errc::device_refused);
  EXPECT_EQ(dev.synchronize(), errc::device_refused);

  EXPECT_EQ(dev.counters().failed, 8u);
  EXPECT_EQ(dev.release(b, 4 * g), errc::ok);
  EXPECT_EQ(dev.live_events(), 1u);
}

TEST(SimDeviceTest, FiresAFaultWhateverTheArguments) {
  model_device dev(vmm());
  dev.fail_next(model_device_call::reserve, errc::device_refused);
  auto bad = dev.reserve(0);  // would be invalid_argument; the injected fault comes first
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), errc::device_refused);
}

TEST(SimDeviceTest, ClearsPendingFaults) {
  model_device dev(vmm());
  dev.fail_next(model_device_call::reserve, errc::out_of_memory);
  dev.fail_next(model_device_call::synchronize, errc::device_refused, 5);
  dev.clear_faults();
  EXPECT_TRUE(dev.reserve(g));
  EXPECT_EQ(dev.synchronize(), errc::ok);
  EXPECT_EQ(dev.counters().failed, 0u);
}

// --- counters and modelled cost -----------------------------------------------------------------

TEST(SimDeviceTest, CountsEveryCall) {
  model_device dev(vmm());
  auto r = dev.reserve(2 * g);
  ASSERT_TRUE(r);
  EXPECT_EQ(dev.map(r.value(), 2 * g), errc::ok);
  EXPECT_EQ(dev.map(r.value(), g), errc::invalid_argument);
  EXPECT_EQ(dev.unmap(r.value(), 2 * g), errc::ok);
  EXPECT_EQ(dev.release(r.value(), 2 * g), errc::ok);
  const event_id e = make_event(dev);
  EXPECT_EQ(dev.record_event(e, 0), errc::ok);
  EXPECT_TRUE(complete(dev, e));
  EXPECT_EQ(dev.synchronize_event(e), errc::ok);
  dev.destroy_event(e);
  EXPECT_EQ(dev.synchronize(), errc::ok);

  const model_device_counters c = dev.counters();
  EXPECT_EQ(c.reserve, 1u);
  EXPECT_EQ(c.map, 2u);
  EXPECT_EQ(c.unmap, 1u);
  EXPECT_EQ(c.release, 1u);
  EXPECT_EQ(c.create_event, 1u);
  EXPECT_EQ(c.record_event, 1u);
  EXPECT_EQ(c.query_event, 1u);
  EXPECT_EQ(c.synchronize_event, 1u);
  EXPECT_EQ(c.destroy_event, 1u);
  EXPECT_EQ(c.synchronize, 1u);
  EXPECT_EQ(c.failed, 1u);

  dev.reset_counters();
  EXPECT_EQ(dev.counters().map, 0u);
  EXPECT_EQ(dev.counters().failed, 0u);
}

TEST(SimDeviceTest, AccumulatesModelledCostPerCallAndPerGranule) {
  model_device_config c = vmm();
  c.cost = {.reserve_ns = 1000,
            .release_ns = 2000,
            .map_ns = 300,
            .unmap_ns = 400,
            .map_granule_ns = 10,
            .unmap_granule_ns = 20,
            .event_ns = 5,
            .sync_ns = 7};
  model_device dev(c);
  auto r = dev.reserve(4 * g);                        // 1000
  ASSERT_TRUE(r);
  ASSERT_EQ(dev.map(r.value(), 4 * g), errc::ok);     // 300 + 4 * 10
  ASSERT_EQ(dev.map(r.value(), g), errc::invalid_argument);  // 300: a failed call costs its base
  ASSERT_EQ(dev.unmap(r.value(), 3 * g), errc::ok);   // 400 + 3 * 20
  const event_id e = make_event(dev);                 // 5
  ASSERT_EQ(dev.synchronize_event(e), errc::ok);      // 7
  ASSERT_EQ(dev.synchronize(), errc::ok);             // 7
  EXPECT_EQ(dev.modeled_time_ns(), 1000u + 340u + 300u + 460u + 5u + 7u + 7u);
  dev.reset_counters();
  EXPECT_EQ(dev.modeled_time_ns(), 0u);
}

TEST(SimDeviceTest, SpinsTheModelledTimeWhenAsked) {
  model_device_config c = vmm();
  c.cost.reserve_ns = 3'000'000;
  c.cost.spin = true;
  model_device dev(c);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(dev.reserve(g));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::nanoseconds(3'000'000));
  EXPECT_EQ(dev.modeled_time_ns(), 3'000'000u);
}

// --- threads ------------------------------------------------------------------------------------

TEST(SimDeviceTest, KeepsExactBooksUnderConcurrentCallers) {
  model_device dev(vmm(64 * g));
  constexpr int threads = 4;
  constexpr int rounds = 500;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&dev, t] {
      for (int i = 0; i < rounds; ++i) {
        auto r = dev.reserve(4 * g);
        ASSERT_TRUE(r);
        ASSERT_EQ(dev.map(r.value(), 4 * g), errc::ok);
        auto e = dev.create_event();
        ASSERT_TRUE(e);
        ASSERT_EQ(dev.record_event(e.value(), static_cast<stream_id>(t)), errc::ok);
        ASSERT_EQ(dev.unmap(r.value() + g, 2 * g), errc::ok);
        ASSERT_EQ(dev.unmap(r.value(), g), errc::ok);
        ASSERT_EQ(dev.unmap(r.value() + 3 * g, g), errc::ok);
        ASSERT_EQ(dev.release(r.value(), 4 * g), errc::ok);
        dev.destroy_event(e.value());
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(dev.mapped_bytes(), 0u);
  EXPECT_EQ(dev.reserved_bytes(), 0u);
  EXPECT_EQ(dev.live_reservations(), 0u);
  EXPECT_EQ(dev.live_events(), 0u);
  const model_device_counters c = dev.counters();
  EXPECT_EQ(c.reserve, std::uint64_t{threads * rounds});
  EXPECT_EQ(c.unmap, std::uint64_t{3 * threads * rounds});
  EXPECT_EQ(c.failed, 0u);
}

TEST(SimDeviceAddressBaseTest, EachSimHandsOutItsOwnWindow) {
  model_device a(model_device_config{.capacity_bytes = gib});
  model_device b(model_device_config{.capacity_bytes = gib,
                                    .address_base = model_address_base + model_address_window_bytes});
  const device_address from_a = a.reserve(2 * mib).value();
  const device_address from_b = b.reserve(2 * mib).value();
  EXPECT_EQ(from_a, model_address_base + model_address_window_bytes - 2 * mib);
  EXPECT_EQ(from_b, model_address_base + 2 * model_address_window_bytes - 2 * mib);
  EXPECT_EQ(a.release(from_a, 2 * mib), errc::ok);
  EXPECT_EQ(b.release(from_b, 2 * mib), errc::ok);
}

}  // namespace
}  // namespace phasealloc
