// The device conformance suite: what every implementation of device.hpp must do.
//
// One value-parameterised GoogleTest suite (rmm's shared mr_ref suites in spirit). A test file
// instantiates it once per device with a factory:
//
//   INSTANTIATE_TEST_SUITE_P(Model, DeviceConformanceTest,
//                            ::testing::Values(device_factory{"vmm_like", make_vmm_like_model}),
//                            device_factory_name);
//
// A factory that cannot make its device (no GPU, no driver) returns the reason, and every test
// of that device skips with it. Include this header in exactly one file per test binary.
//
// The suite only reserves, maps, offloads and queries: it never reads or writes device memory, so
// it runs on the model device and on a fake driver as well as on a GPU (the bytes an offload moves
// are checked by tests/unit/cuda_vmm_offload_test.cpp). On a real GPU free_bytes() also moves with other
// processes and with the driver's own bookkeeping, so its checks allow slack there
// (device_factory::exact_free_bytes = false).
#pragma once

#include <cstdlib>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "phasealloc/device.hpp"

namespace phasealloc::conformance {

/// A device under test, or why there is none.
struct made_device {
  std::unique_ptr<device> dev;
  std::string skip_reason;  ///< Read when dev is null.
};

struct device_factory {
  std::string name;                   ///< Test name suffix: letters, digits and '_' only.
  std::function<made_device()> make;  ///< Called once per test.
  bool exact_free_bytes = true;       ///< free_bytes() moves by exactly what the device maps.
};

inline std::string device_factory_name(const ::testing::TestParamInfo<device_factory>& info) {
  return info.param.name;
}

/// How GoogleTest prints a parameter (instead of its bytes).
inline void PrintTo(const device_factory& factory, std::ostream* os) { *os << factory.name; }

class DeviceConformanceTest : public ::testing::TestWithParam<device_factory> {
 protected:
  /// Slack on free_bytes() for a real GPU: driver page tables and other processes move it.
  static constexpr std::size_t free_bytes_slack = 256 * mib;

  void SetUp() override {
    made_device made = GetParam().make();
    // On the simulated GPU (ctest's *_on_simcuda runs) a device that cannot be made is a failure:
    // the run exists to prove the CUDA devices work there, so it must not pass by skipping.
    if (!made.dev && std::getenv("PHASEALLOC_CONFORMANCE_REQUIRE_DEVICE") != nullptr)
      FAIL() << GetParam().name << " could not be created: " << made.skip_reason;
    if (!made.dev) GTEST_SKIP() << GetParam().name << ": " << made.skip_reason;
    dev_ = std::move(made.dev);
  }

  device& dev() { return *dev_; }
  const device_caps& caps() const { return dev_->caps(); }
  std::size_t granule() const { return dev_->caps().granularity_bytes; }
  /// A segment-like size: 2 MiB rounded to the granularity.
  std::size_t segment() const { return round_up(2 * mib, granule()); }
  bool exact() const { return GetParam().exact_free_bytes; }

  /// Reserves `bytes` and, on a device with virtual reserve, maps them: memory either way.
  result<device_address> acquire(std::size_t bytes) {
    auto base = dev().reserve(bytes);
    if (!base || !caps().has_virtual_reserve) return base;
    if (const errc e = dev().map(base.value(), bytes); e != errc::ok) {
      EXPECT_EQ(dev().release(base.value(), bytes), errc::ok) << "release after a failed map";
      return e;
    }
    return base;
  }
  /// Undoes acquire().
  void give_back(device_address base, std::size_t bytes) {
    if (caps().has_virtual_reserve) {
      EXPECT_EQ(dev().unmap(base, bytes), errc::ok);
    }
    EXPECT_EQ(dev().release(base, bytes), errc::ok);
  }

  void expect_free_bytes_near(std::size_t actual, std::size_t expected) {
    if (exact()) {
      EXPECT_EQ(actual, expected);
    } else {
      const std::size_t diff = actual > expected ? actual - expected : expected - actual;
      EXPECT_LE(diff, free_bytes_slack) << "free bytes " << actual << ", expected about " << expected;
    }
  }

  std::unique_ptr<device> dev_;
};

// --- capabilities -------------------------------------------------------------------------------

TEST_P(DeviceConformanceTest, ReportsConsistentCaps) {
  EXPECT_FALSE(dev().name().empty());
  EXPECT_GT(granule(), 0u);
  EXPECT_GT(caps().capacity_bytes, 0u);
  EXPECT_LE(dev().free_bytes(), caps().capacity_bytes);
  if (caps().has_partial_unmap) {
    EXPECT_TRUE(caps().has_virtual_reserve) << "partial unmap needs virtual reserve";
  }
}

// --- reserve / release --------------------------------------------------------------------------

TEST_P(DeviceConformanceTest, ReserveAndReleaseRoundTrip) {
  const std::size_t before = dev().free_bytes();
  auto base = acquire(segment());
  ASSERT_TRUE(base) << to_string(base.error());
  EXPECT_NE(base.value(), 0u);
  const std::size_t during = dev().free_bytes();
  if (exact()) {
    EXPECT_EQ(during, before - segment());
  } else {
    EXPECT_LE(during, before + free_bytes_slack);
  }
  give_back(base.value(), segment());
  expect_free_bytes_near(dev().free_bytes(), before);
}

TEST_P(DeviceConformanceTest, AlignsReservationsToTheGranularity) {
  for (std::size_t granules : {1u, 2u, 3u, 5u, 8u}) {
    const std::size_t bytes = granules * granule();
    auto base = dev().reserve(bytes);
    ASSERT_TRUE(base) << granules << " granules: " << to_string(base.error());
    EXPECT_EQ(base.value() % granule(), 0u) << "base " << base.value() << " of " << granules << " granules";
    EXPECT_EQ(dev().release(base.value(), bytes), errc::ok);
  }
}

TEST_P(DeviceConformanceTest, GivesUniqueDisjointReservations) {
  struct range {
    device_address base;
    std::size_t bytes;
  };
  // 64 reservations of 1..4 units, 160 units in all: at most half the capacity.
  const std::size_t unit = std::min(segment(), std::max(granule(), caps().capacity_bytes / 320 / granule() * granule()));
  std::vector<range> held;
  for (std::size_t i = 0; i < 64; ++i) {
    const std::size_t bytes = (1 + i % 4) * unit;
    auto base = dev().reserve(bytes);
    ASSERT_TRUE(base) << "reservation " << i << ": " << to_string(base.error());
    held.push_back({base.value(), bytes});
  }
  std::vector<range> sorted = held;
  std::sort(sorted.begin(), sorted.end(), [](const range& a, const range& b) { return a.base < b.base; });
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    EXPECT_GE(sorted[i].base, sorted[i - 1].base + sorted[i - 1].bytes) << "reservations " << i - 1 << " and " << i
                                                                         << " overlap";
  }
  for (const range& r : held) EXPECT_EQ(dev().release(r.base, r.bytes), errc::ok);
}

TEST_P(DeviceConformanceTest, RejectsZeroAndUnalignedReserveSizes) {
  auto zero = dev().reserve(0);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error(), errc::invalid_argument);
  auto unaligned = dev().reserve(granule() + granule() / 2);
  ASSERT_FALSE(unaligned);
  EXPECT_EQ(unaligned.error(), errc::invalid_argument);
}

TEST_P(DeviceConformanceTest, RejectsReleaseOfUnknownOrMisnamedRanges) {
  const std::size_t bytes = 2 * segment();
  auto base = dev().reserve(bytes);
  ASSERT_TRUE(base) << to_string(base.error());
  const device_address b = base.value();
  EXPECT_EQ(dev().release(0, bytes), errc::invalid_argument);
  EXPECT_EQ(dev().release(b + granule(), bytes - granule()), errc::invalid_argument) << "interior base";
  EXPECT_EQ(dev().release(b, segment()), errc::invalid_argument) << "wrong size";
  EXPECT_EQ(dev().release(b, bytes + granule()), errc::invalid_argument) << "wrong size";
  EXPECT_EQ(dev().release(b, bytes), errc::ok) << "the reservation survived the bad calls";
  EXPECT_EQ(dev().release(b, bytes), errc::invalid_argument) << "double release";
}

TEST_P(DeviceConformanceTest, AnswersOutOfMemoryWhenExhaustedAndLeaksNothing) {
  const std::size_t before = dev().free_bytes();

  // One request larger than what is free fails and holds nothing.
  const std::size_t too_big = round_up(before + segment(), granule());
  if (caps().has_virtual_reserve) {
    auto base = dev().reserve(too_big);  // address space only: fine
    ASSERT_TRUE(base) << to_string(base.error());
    EXPECT_EQ(dev().map(base.value(), too_big), errc::out_of_memory);
    EXPECT_EQ(dev().release(base.value(), too_big), errc::ok) << "a failed map must leave nothing mapped";
  } else {
    auto base = dev().reserve(too_big);
    ASSERT_FALSE(base);
    EXPECT_EQ(base.error(), errc::out_of_memory);
  }
  expect_free_bytes_near(dev().free_bytes(), before);

  // Filling the device chunk by chunk ends in out_of_memory.
  const std::size_t chunk = std::max(round_up(caps().capacity_bytes / 8, granule()), granule());
  std::vector<device_address> held;
  errc last = errc::ok;
  for (int i = 0; i < 64 && last == errc::ok; ++i) {
    auto base = acquire(chunk);
    if (base) {
      held.push_back(base.value());
    } else {
      last = base.error();
    }
  }
  EXPECT_EQ(last, errc::out_of_memory);
  EXPECT_FALSE(held.empty());
  EXPECT_LT(dev().free_bytes(), chunk + (exact() ? 0 : free_bytes_slack));

  for (device_address base : held) give_back(base, chunk);
  expect_free_bytes_near(dev().free_bytes(), before);
}

// --- map / unmap --------------------------------------------------------------------------------

TEST_P(DeviceConformanceTest, MapAndUnmapAreNotSupportedWithoutVirtualReserve) {
  if (caps().has_virtual_reserve) GTEST_SKIP() << "the device has virtual reserve";
  auto base = dev().reserve(segment());
  ASSERT_TRUE(base) << to_string(base.error());
  EXPECT_EQ(dev().map(base.value(), segment()), errc::not_supported);
  EXPECT_EQ(dev().unmap(base.value(), segment()), errc::not_supported);
  EXPECT_EQ(dev().release(base.value(), segment()), errc::ok);
}

TEST_P(DeviceConformanceTest, OffloadIsNotSupportedWithoutHostBacking) {
  if (can_offload(caps())) GTEST_SKIP() << "the device can offload";
  auto base = acquire(segment());
  ASSERT_TRUE(base) << to_string(base.error());
  const byte_range live[] = {{base.value(), 64}};
  EXPECT_EQ(dev().offload(base.value(), segment(), live, {}), errc::not_supported);
  EXPECT_EQ(dev().restore(base.value(), segment(), live, {}), errc::not_supported);
  EXPECT_EQ(dev().host_backed_bytes(), 0u);
  give_back(base.value(), segment());
}

TEST_P(DeviceConformanceTest, OffloadAndRestoreKeepTheBooks) {
  if (!can_offload(caps())) GTEST_SKIP() << "the device cannot offload";
  const std::size_t bytes = 2 * segment();
  auto base = acquire(bytes);
  ASSERT_TRUE(base) << to_string(base.error());
  const device_address at = base.value();
  const byte_range live[] = {{at + 100, 1000}, {at + segment(), 4096}};
  const byte_range outside[] = {{at + bytes, 1}};
  EXPECT_EQ(dev().offload(at, bytes, outside, {}), errc::invalid_argument);  // a live range outside
  const std::size_t free_before = dev().free_bytes();
  ASSERT_EQ(dev().offload(at, bytes, live, {}), errc::ok) << dev().last_failure();
  EXPECT_EQ(dev().host_backed_bytes(), bytes);
  expect_free_bytes_near(dev().free_bytes(), free_before + bytes);  // the device memory went back
  EXPECT_EQ(dev().moved().to_host, 1000u + 4096u);                  // live bytes only
  EXPECT_EQ(dev().offload(at, bytes, live, {}), errc::invalid_argument);   // already on the host
  EXPECT_EQ(dev().restore(at, segment(), live, {}), errc::invalid_argument);  // not the whole range
  ASSERT_EQ(dev().restore(at, bytes, live, {}), errc::ok) << dev().last_failure();
  EXPECT_EQ(dev().host_backed_bytes(), 0u);
  EXPECT_EQ(dev().moved().to_device, 1000u + 4096u);
  EXPECT_EQ(dev().restore(at, bytes, live, {}), errc::invalid_argument);  // nothing offloaded there
  give_back(at, bytes);
}

TEST_P(DeviceConformanceTest, ARestoreWithoutMemoryChangesNothing) {
  if (!can_offload(caps())) GTEST_SKIP() << "the device cannot offload";
  auto base = acquire(segment());
  ASSERT_TRUE(base) << to_string(base.error());
  ASSERT_EQ(dev().offload(base.value(), segment(), {}, {}), errc::ok) << dev().last_failure();
  // Every byte of the device taken by another reservation, page by page.
  const std::size_t filler_bytes = round_up(caps().capacity_bytes + segment(), granule());
  auto filler = dev().reserve(filler_bytes);
  ASSERT_TRUE(filler) << to_string(filler.error());
  std::size_t filled = 0;
  while (filled < filler_bytes && dev().map(filler.value() + filled, granule()) == errc::ok) filled += granule();
  EXPECT_EQ(dev().restore(base.value(), segment(), {}, {}), errc::out_of_memory);
  EXPECT_EQ(dev().host_backed_bytes(), segment());  // still offloaded, still restorable
  if (filled > 0) {
    EXPECT_EQ(dev().unmap(filler.value(), filled), errc::ok);
  }
  EXPECT_EQ(dev().release(filler.value(), filler_bytes), errc::ok);
  EXPECT_EQ(dev().restore(base.value(), segment(), {}, {}), errc::ok) << dev().last_failure();
  EXPECT_EQ(dev().host_backed_bytes(), 0u);
  give_back(base.value(), segment());
}

TEST_P(DeviceConformanceTest, VirtualReserveTakesNoMemory) {
  if (!caps().has_virtual_reserve) GTEST_SKIP() << "the device has no virtual reserve";
  const std::size_t before = dev().free_bytes();
  const std::size_t bytes = round_up(2 * caps().capacity_bytes, granule());  // more than the device has
  auto base = dev().reserve(bytes);
  ASSERT_TRUE(base) << to_string(base.error());
  expect_free_bytes_near(dev().free_bytes(), before);
  EXPECT_EQ(dev().map(base.value(), granule()), errc::ok);
  EXPECT_EQ(dev().unmap(base.value(), granule()), errc::ok);
  EXPECT_EQ(dev().release(base.value(), bytes), errc::ok);
}

TEST_P(DeviceConformanceTest, MapsAndUnmapsSubranges) {
  if (!caps().has_partial_unmap) GTEST_SKIP() << "the device has no partial unmap";
  const std::size_t g = granule();
  auto reserved = dev().reserve(8 * g);
  ASSERT_TRUE(reserved) << to_string(reserved.error());
  const device_address b = reserved.value();
  const std::size_t before = dev().free_bytes();

  EXPECT_EQ(dev().map(b, 2 * g), errc::ok);
  EXPECT_EQ(dev().map(b + 4 * g, 4 * g), errc::ok);
  if (exact()) {
    EXPECT_EQ(dev().free_bytes(), before - 6 * g);
  }
  EXPECT_EQ(dev().unmap(b + 5 * g, g), errc::ok) << "one granule out of the middle of a mapping";
  EXPECT_EQ(dev().map(b + 5 * g, g), errc::ok) << "and back";
  EXPECT_EQ(dev().map(b + 2 * g, 2 * g), errc::ok) << "the hole between two mappings";
  if (exact()) {
    EXPECT_EQ(dev().free_bytes(), before - 8 * g);
  }
  EXPECT_EQ(dev().unmap(b + g, 6 * g), errc::ok) << "a range across mappings made by different calls";
  EXPECT_EQ(dev().unmap(b, g), errc::ok);
  EXPECT_EQ(dev().unmap(b + 7 * g, g), errc::ok);
  expect_free_bytes_near(dev().free_bytes(), before);
  EXPECT_EQ(dev().release(b, 8 * g), errc::ok);
}

TEST_P(DeviceConformanceTest, RejectsBadMapAndUnmapRanges) {
  if (!caps().has_virtual_reserve) GTEST_SKIP() << "the device has no virtual reserve";
  const std::size_t g = granule();
  auto reserved = dev().reserve(4 * g);
  ASSERT_TRUE(reserved) << to_string(reserved.error());
  const device_address b = reserved.value();

  EXPECT_EQ(dev().map(b, 0), errc::invalid_argument) << "zero size";
  EXPECT_EQ(dev().map(b + g / 2, g), errc::invalid_argument) << "unaligned address";
  EXPECT_EQ(dev().map(b, g + g / 2), errc::invalid_argument) << "unaligned size";
  EXPECT_EQ(dev().map(b + 3 * g, 2 * g), errc::invalid_argument) << "past the end of the reservation";
  EXPECT_EQ(dev().map(b - 4 * g, g), errc::invalid_argument) << "before the reservation";
  EXPECT_EQ(dev().unmap(b, g), errc::invalid_argument) << "unmap of an unmapped granule";

  ASSERT_EQ(dev().map(b + g, 2 * g), errc::ok);
  EXPECT_EQ(dev().map(b + 2 * g, g), errc::invalid_argument) << "double map";
  EXPECT_EQ(dev().map(b, 2 * g), errc::invalid_argument) << "overlaps a mapped granule";
  EXPECT_EQ(dev().unmap(b, 2 * g), errc::invalid_argument) << "partly unmapped range";
  EXPECT_EQ(dev().release(b, 4 * g), errc::invalid_argument) << "release with mapped granules";

  // The bad calls changed nothing: the mapping is whole and the reservation alive.
  EXPECT_EQ(dev().unmap(b + g, 2 * g), errc::ok);
  EXPECT_EQ(dev().release(b, 4 * g), errc::ok);
  EXPECT_EQ(dev().map(b, g), errc::invalid_argument) << "map in a released reservation";
}

// --- events -------------------------------------------------------------------------------------

TEST_P(DeviceConformanceTest, RecordsQueriesAndSynchronizesEvents) {
  auto event = dev().create_event();
  ASSERT_TRUE(event) << to_string(event.error());
  const event_id e = event.value();
  auto unrecorded = dev().query_event(e);
  ASSERT_TRUE(unrecorded) << to_string(unrecorded.error());
  EXPECT_TRUE(unrecorded.value()) << "an event never recorded is complete (cudaEventQuery)";

  EXPECT_EQ(dev().record_event(e, 0), errc::ok);
  EXPECT_EQ(dev().synchronize_event(e), errc::ok);
  auto done = dev().query_event(e);
  ASSERT_TRUE(done) << to_string(done.error());
  EXPECT_TRUE(done.value()) << "complete after synchronize_event";

  EXPECT_EQ(dev().record_event(e, 0), errc::ok) << "events are reusable";
  EXPECT_EQ(dev().synchronize(), errc::ok);
  auto synced = dev().query_event(e);
  ASSERT_TRUE(synced) << to_string(synced.error());
  EXPECT_TRUE(synced.value()) << "complete after synchronize";
  dev().destroy_event(e);
}

TEST_P(DeviceConformanceTest, GivesDistinctEventIds) {
  std::vector<event_id> ids;
  for (int i = 0; i < 16; ++i) {
    auto event = dev().create_event();
    ASSERT_TRUE(event) << to_string(event.error());
    ids.push_back(event.value());
  }
  std::vector<event_id> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "an id was given twice";
  for (event_id e : ids) EXPECT_EQ(dev().record_event(e, 0), errc::ok);
  for (event_id e : ids) dev().destroy_event(e);
}

TEST_P(DeviceConformanceTest, AnswersUnknownEventsWithInvalidArgument) {
  auto event = dev().create_event();
  ASSERT_TRUE(event) << to_string(event.error());
  const event_id destroyed = event.value();
  dev().destroy_event(destroyed);
  for (event_id e : {destroyed, event_id{0xdead'beef}}) {
    EXPECT_EQ(dev().record_event(e, 0), errc::invalid_argument) << "event " << e;
    auto q = dev().query_event(e);
    ASSERT_FALSE(q) << "event " << e;
    EXPECT_EQ(q.error(), errc::invalid_argument);
    EXPECT_EQ(dev().synchronize_event(e), errc::invalid_argument) << "event " << e;
    dev().destroy_event(e);  // nothing to answer; must not crash
  }
}

}  // namespace phasealloc::conformance
