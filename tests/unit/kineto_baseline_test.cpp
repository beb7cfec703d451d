// A profiler trace as users have it: two GPUs, memory live before the first
// event (a baseline), and Total Reserved recorded beside every event.
#include <gtest/gtest.h>

#include <string>

#include "phasealloc/import/kineto_importer.hpp"
#include "phasealloc/replay/replay.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "phasealloc/trace/trace_validate.hpp"

namespace phasealloc {
namespace {

constexpr std::uint64_t mib_bytes = std::uint64_t{1} << 20;
constexpr std::uint64_t gib_bytes = std::uint64_t{1} << 30;

std::string memory_event(double ts, int device, std::uint64_t addr, std::int64_t bytes, std::uint64_t total_allocated,
                         std::uint64_t total_reserved) {
  return "{\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": " + std::to_string(ts) +
         ", \"args\": {\"Device Type\": 1, \"Device Id\": " + std::to_string(device) +
         ", \"Addr\": " + std::to_string(addr) + ", \"Bytes\": " + std::to_string(bytes) +
         ", \"Total Allocated\": " + std::to_string(total_allocated) +
         ", \"Total Reserved\": " + std::to_string(total_reserved) + "}}";
}

// Device 1 (4 events) had 5 GiB live and 6 GiB reserved before profiling; device 0 has 2 events.
std::string two_device_profile() {
  const std::uint64_t base = 5 * gib_bytes;
  std::string events;
  const auto add = [&](const std::string& e) { events += (events.empty() ? "" : ",\n") + e; };
  add(memory_event(100, 1, 0x10000, 512 * mib_bytes, base + 512 * mib_bytes, 6 * gib_bytes));
  add(memory_event(101, 0, 0x90000, 4 * mib_bytes, 4 * mib_bytes, 20 * mib_bytes));
  add(memory_event(102, 1, 0x20000, 2 * gib_bytes, base + 2560 * mib_bytes, 8 * gib_bytes));
  add(memory_event(103, 1, 0x20000, -static_cast<std::int64_t>(2 * gib_bytes), base + 512 * mib_bytes, 8 * gib_bytes));
  add(memory_event(104, 0, 0x90000, -static_cast<std::int64_t>(4 * mib_bytes), 0, 20 * mib_bytes));
  add(memory_event(105, 1, 0x10000, -static_cast<std::int64_t>(512 * mib_bytes), base, 8 * gib_bytes));
  return "{\"traceEvents\": [\n" + events + "\n]}";
}

std::string prop(const trace& t, std::string_view key) {
  const std::string* v = find_property(t.meta, key);
  return v == nullptr ? "<absent>" : *v;
}

TEST(KinetoBaselineTest, DefaultsToTheDeviceWithTheMostMemoryEvents) {
  const auto r = import_kineto(two_device_profile(), "two.json");
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(prop(r.value(), "kineto.device_id"), "1");
  EXPECT_EQ(prop(r.value(), "kineto.device_choice"), "the most memory events");
  EXPECT_EQ(prop(r.value(), "kineto.devices"), "0:2,1:4");
  const trace_summary s = summarize(r.value());
  EXPECT_EQ(s.allocs, 3U);  // the baseline and the two allocations of device 1
}

TEST(KinetoBaselineTest, TheDeviceAskedForIsImported) {
  kineto_import_options options;
  options.device_id = 0;
  const auto r = import_kineto(two_device_profile(), "two.json", options);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(prop(r.value(), "kineto.device_id"), "0");
  EXPECT_EQ(prop(r.value(), "kineto.device_choice"), "asked for");
  const trace_summary s = summarize(r.value());
  EXPECT_EQ(s.peak_live_bytes, 4 * mib_bytes);  // no baseline on device 0
  EXPECT_EQ(s.seeded_allocs, 0U);
  EXPECT_EQ(prop(r.value(), "recorded.peak_reserved_bytes"), std::to_string(20 * mib_bytes));
}

TEST(KinetoBaselineTest, BytesLiveBeforeTheFirstEventAreASeededBaseline) {
  const auto r = import_kineto(two_device_profile(), "two.json");
  ASSERT_TRUE(r.has_value()) << r.error().message();
  const trace& t = r.value();
  ASSERT_TRUE(validate(t).has_value());
  EXPECT_EQ(prop(t, "kineto.baseline_bytes"), std::to_string(5 * gib_bytes));
  EXPECT_EQ(prop(t, "kineto.baseline_unattributed_bytes"), std::to_string(5 * gib_bytes));
  const trace_summary s = summarize(t);
  EXPECT_EQ(s.seeded_live_bytes, 5 * gib_bytes);
  EXPECT_EQ(s.peak_live_bytes, 5 * gib_bytes + 2560 * mib_bytes);  // the floor counts the baseline
  EXPECT_EQ(s.final_live_bytes, 5 * gib_bytes);
  // Total Reserved as recorded: 6 GiB at the start, 8 GiB at the peak.
  EXPECT_EQ(s.initial_reserved_bytes, 6 * gib_bytes);
  EXPECT_EQ(s.peak_reserved_bytes, 8 * gib_bytes);
  EXPECT_EQ(prop(t, "recorded.reserved_at_start_bytes"), std::to_string(6 * gib_bytes));
  EXPECT_EQ(prop(t, "recorded.peak_reserved_bytes"), std::to_string(8 * gib_bytes));
}

TEST(KinetoBaselineTest, ASeededFreeIsNotCountedTwiceInTheBaseline) {
  // 1 GiB live before profiling, of which the 256 MiB freed at ts 2 is a seeded allocation.
  const std::string json = std::string("[") + memory_event(1, 0, 0x1000, 64 * mib_bytes, gib_bytes + 64 * mib_bytes, 2 * gib_bytes) +
                           "," + memory_event(2, 0, 0x5000, -256 * static_cast<std::int64_t>(mib_bytes),
                                              gib_bytes - 192 * mib_bytes, 2 * gib_bytes) +
                           "]";
  const auto r = import_kineto(json, "seeded.json");
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(prop(r.value(), "kineto.baseline_unattributed_bytes"), std::to_string(768 * mib_bytes));
  EXPECT_EQ(summarize(r.value()).seeded_live_bytes, gib_bytes);
}

TEST(KinetoBaselineTest, ThePytorchModelStartsFromTheBaselineAndReportsTheRecordedReserved) {
  const auto t = import_kineto(two_device_profile(), "two.json");
  ASSERT_TRUE(t.has_value());
  auto r = replay(t.value(), "pytorch");
  ASSERT_TRUE(r.has_value()) << r.error();
  const replay_result& x = r.value();
  EXPECT_EQ(x.peak_allocated_bytes, 5 * gib_bytes + 2560 * mib_bytes);
  ASSERT_TRUE(x.recorded.available);
  EXPECT_EQ(x.recorded.recorded_peak_reserved_bytes, 8 * gib_bytes);
  EXPECT_EQ(x.recorded.recorded_final_reserved_bytes, 8 * gib_bytes);
  // The model holds the baseline as one segment: 5 GiB + 512 MiB + 2 GiB at the peak, short of the
  // recorded 6 GiB start (the job's cache before profiling is unknown): a divergence, reported.
  EXPECT_EQ(x.peak_reserved_bytes, 5 * gib_bytes + 2560 * mib_bytes);
  ASSERT_TRUE(x.recorded.first_divergence.has_value());
  EXPECT_EQ(x.recorded.first_divergence->recorded_bytes, 6 * gib_bytes);
  EXPECT_EQ(x.recorded.first_divergence->modelled_bytes, 5 * gib_bytes + 512 * mib_bytes);
}

TEST(KinetoBaselineTest, NegativeTotalsNameTheMemoryEvent) {
  const std::string json = std::string("[") + memory_event(1, 0, 0x1000, 512, 512, 2 * mib_bytes) + ",\n" +
                           "{\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 2, \"args\": {\"Device Type\": 1, "
                           "\"Device Id\": 0, \"Addr\": 4096, \"Bytes\": -512, \"Total Allocated\": -512}}]";
  const auto r = import_kineto(json, "negative.json");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("memory event 1: a non-negative 'Total Allocated' (a byte count), not -512"),
            std::string::npos)
      << r.error().message();
  const auto oom = import_kineto(
      R"([{"ph": "i", "name": "[OutOfMemory]", "ts": 2, "args": {"Device Type": 1, "Device Id": 0, "Bytes": -7}}])",
      "oom.json");
  ASSERT_FALSE(oom.has_value());
  EXPECT_NE(oom.error().message().find("memory event 0: a non-negative 'Bytes'"), std::string::npos)
      << oom.error().message();
}

}  // namespace
}  // namespace phasealloc
