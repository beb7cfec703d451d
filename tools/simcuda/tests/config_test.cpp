// SIMCUDA_GPU parsing: every key, and errors that name the key and the valid form.
#include <gtest/gtest.h>

#include "simcuda/core.hpp"

namespace {

using simcuda::parse_config;

TEST(simcuda_config, DefaultsAreOneH100With80GiB) {
  std::string error;
  auto c = parse_config("", error);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->device_count, 1);
  EXPECT_EQ(c->gpu.memory_bytes, std::size_t{80} << 30);
  EXPECT_EQ(c->gpu.cc_major, 9);
  EXPECT_EQ(c->gpu.sm_count, 132);
  EXPECT_EQ(c->events, simcuda::event_mode::at_record);
  EXPECT_FALSE(c->fill_byte);
  EXPECT_FALSE(c->strict);
  EXPECT_EQ(c->values, simcuda::default_value_level);
}

TEST(simcuda_config, EveryKeyIsRead) {
  std::string error;
  auto c = parse_config("count:4, memory:24GiB,name:NVIDIA L4,cc:8.9,sms:58,events:deferred:5,fill:0xab,strict:1,quiet:1",
                        error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->device_count, 4);
  EXPECT_EQ(c->gpu.memory_bytes, std::size_t{24} << 30);
  EXPECT_EQ(c->gpu.name, "NVIDIA L4");
  EXPECT_EQ(c->gpu.cc_major, 8);
  EXPECT_EQ(c->gpu.cc_minor, 9);
  EXPECT_EQ(c->gpu.sm_count, 58);
  EXPECT_EQ(c->events, simcuda::event_mode::deferred);
  EXPECT_EQ(c->deferred_ticks, 5u);
  ASSERT_TRUE(c->fill_byte);
  EXPECT_EQ(*c->fill_byte, 0xab);
  EXPECT_TRUE(c->strict);
  EXPECT_TRUE(c->quiet);
  EXPECT_TRUE(c->host_vmm);  // the default: a CUDA 12.2+ driver
  EXPECT_FALSE(parse_config("host_vmm:0", error)->host_vmm);
  EXPECT_FALSE(c->nccl_virtual_peers);  // the default: every rank runs
  EXPECT_TRUE(parse_config("nccl_peers:virtual", error)->nccl_virtual_peers);
  EXPECT_FALSE(parse_config("nccl_peers:real", error)->nccl_virtual_peers);
}

TEST(simcuda_config, SizesTakeBinaryUnitsAndRoundToWholePages) {
  std::string error;
  EXPECT_EQ(parse_config("memory:80GB", error)->gpu.memory_bytes, std::size_t{80} << 30);
  EXPECT_EQ(parse_config("memory:512MiB", error)->gpu.memory_bytes, std::size_t{512} << 20);
  EXPECT_EQ(parse_config("memory:1.5G", error)->gpu.memory_bytes, std::size_t{1536} << 20);
  EXPECT_EQ(parse_config("memory:100000001", error)->gpu.memory_bytes, std::size_t{94} << 20);
  EXPECT_EQ(parse_config("events:sync", error)->events, simcuda::event_mode::at_sync);
  EXPECT_EQ(parse_config("values:off", error)->values, simcuda::value_level::off);
  EXPECT_EQ(parse_config("values:observable", error)->values, simcuda::value_level::observable);
  EXPECT_EQ(parse_config("values:exact", error)->values, simcuda::value_level::exact);
}

TEST(simcuda_config, BadValuesNameTheKey) {
  struct bad_case {
    const char* text;
    const char* says;
  };
  const bad_case cases[] = {
      {"count:0", "bad value '0' for count (expected 1..16)"},
      {"count:17", "for count"},
      {"memory:lots", "for memory"},
      {"memory:1MiB", "for memory"},  // below 64 MiB
      {"memory:-5GiB", "for memory"},
      {"cc:9", "for cc (expected MAJOR.MINOR"},
      {"events:later", "for events"},
      {"fill:300", "for fill"},
      {"strict:yes", "for strict"},
      {"colour:blue", "unknown key 'colour' (valid: count, memory, name, cc, sms, events, fill, strict, quiet, values, host_vmm, nccl_peers)"},
      {"nccl_peers:some", "bad value 'some' for nccl_peers (expected real or virtual)"},
      {"host_vmm:2", "bad value '2' for host_vmm (expected 0 or 1)"},
      {"values:fast", "bad value 'fast' for values (expected off, observable or exact)"},
      {"count", "'count' is not key:value"},
  };
  for (const bad_case& c : cases) {
    std::string error;
    EXPECT_FALSE(parse_config(c.text, error)) << c.text;
    EXPECT_NE(error.find(c.says), std::string::npos) << c.text << " -> " << error;
  }
}

}  // namespace
