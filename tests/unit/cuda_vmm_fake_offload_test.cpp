// cuda_vmm_device's same-address offload on the fake CUDA driver (fake_cuda_driver.hpp): the
// failure paths no GPU can be made to take (a host mapping, an event wait or a device mapping that
// fails), and the unmapping mode of a driver without host-located handles.
#include <gtest/gtest.h>

#include <vector>

#include "fake_cuda_driver.hpp"

namespace phasealloc {
namespace {

/// Whether the fake maps a device handle at `at` (not a host-located one).
bool device_mapped_at(CUdeviceptr at) {
  const auto it = fake::state.mappings.find(at);
  return it != fake::state.mappings.end() && !fake::state.host_handles.contains(it->second.handle);
}

bool host_mapped_at(CUdeviceptr at) {
  const auto it = fake::state.mappings.find(at);
  return it != fake::state.mappings.end() && fake::state.host_handles.contains(it->second.handle);
}

TEST_F(CudaVmmFakeDriverTest, AnOffloadWhoseHostMappingFailsMapsTheDevicePagesBack) {
  auto dev = make({}, /*offload=*/true);
  ASSERT_TRUE(dev && dev->caps().has_host_backing && !dev->caps().offload_unmaps);
  const device_address base = dev->reserve(2 * page).value();
  ASSERT_EQ(dev->map(base, 2 * page), errc::ok);
  const std::size_t used = fake::state.used_bytes;
  const std::vector<byte_range> live{{base, 100}};
  // The start maps the host handle at a staging range (cuMemMap 1); the finish's map over the range fails.
  ASSERT_EQ(dev->offload_start(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  fake::fail_call("cuMemMap", 1, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(dev->finish_move(base, {}), errc::out_of_memory);
  EXPECT_NE(dev->last_failure().find("moving"), std::string::npos) << dev->last_failure();
  EXPECT_TRUE(device_mapped_at(base) && device_mapped_at(base + page)) << "the device pages were not mapped back";
  EXPECT_EQ(fake::state.used_bytes, used);  // the device handles were kept, not released
  EXPECT_EQ(dev->mapped_bytes(), 2 * page);
  EXPECT_EQ(dev->host_backed_bytes(), 0u);
  EXPECT_EQ(dev->moves_in_flight(), 0u);
  EXPECT_EQ(dev->moved().to_host, 0u);
  // Nothing was lost: the same offload succeeds now, with the kept host handle.
  const std::size_t host_handles = fake::state.host_handles.size();
  ASSERT_EQ(dev->offload(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  EXPECT_EQ(fake::state.host_handles.size(), host_handles);
  EXPECT_TRUE(host_mapped_at(base));
  EXPECT_EQ(fake::state.used_bytes, used - 2 * page);
}

TEST_F(CudaVmmFakeDriverTest, AnOffloadWhoseFinishCannotWaitStaysInFlightWithItsDevicePages) {
  auto dev = make({}, /*offload=*/true);
  ASSERT_TRUE(dev);
  const device_address base = dev->reserve(page).value();
  ASSERT_EQ(dev->map(base, page), errc::ok);
  ASSERT_EQ(dev->offload_start(base, page, std::vector<byte_range>{{base, page}}, {}), errc::ok);
  fake::fail_call("cuEventSynchronize", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(dev->finish_move(base, {}), errc::device_refused);
  EXPECT_EQ(dev->moves_in_flight(), 1u);  // the copies' fate is unknown: nothing is dropped
  EXPECT_TRUE(device_mapped_at(base));
  EXPECT_EQ(dev->unmap(base, page), errc::invalid_argument);  // not under a move in flight
  ASSERT_EQ(dev->finish_move(base, {}), errc::ok) << dev->last_failure();
  EXPECT_TRUE(host_mapped_at(base));
  EXPECT_EQ(dev->moved().to_host, page);
}

TEST_F(CudaVmmFakeDriverTest, ARestoreWhoseDeviceMappingFailsPutsTheHostMappingBack) {
  auto dev = make({.restore_chunk_bytes = page}, /*offload=*/true);  // a handle per page
  ASSERT_TRUE(dev);
  const device_address base = dev->reserve(3 * page).value();
  ASSERT_EQ(dev->map(base, 3 * page), errc::ok);
  const std::vector<byte_range> live{{base, 3 * page}};
  ASSERT_EQ(dev->offload(base, 3 * page, live, {}), errc::ok) << dev->last_failure();
  const std::size_t used = fake::state.used_bytes;
  // restore: the staging map (1), then the device chunks (2, 3, 4): the third chunk's map fails.
  fake::fail_call("cuMemMap", 4, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(dev->restore(base, 3 * page, live, {}), errc::device_refused);
  EXPECT_NE(dev->last_failure().find("mapping device pages"), std::string::npos) << dev->last_failure();
  EXPECT_TRUE(host_mapped_at(base)) << "the bytes' host mapping did not come back";
  EXPECT_FALSE(device_mapped_at(base + page));
  EXPECT_EQ(fake::state.used_bytes, used);  // the chunks made for it were released
  EXPECT_EQ(dev->host_backed_bytes(), 3 * page);
  EXPECT_EQ(dev->mapped_bytes(), 0u);
  ASSERT_EQ(dev->restore(base, 3 * page, live, {}), errc::ok) << dev->last_failure();
  EXPECT_TRUE(device_mapped_at(base) && device_mapped_at(base + 2 * page));
  EXPECT_EQ(dev->moved().to_device, 3 * page);
}

TEST_F(CudaVmmFakeDriverTest, WithoutHostBackingAnOffloadUnmapsTheRangeAndCopiesThroughAPinnedBuffer) {
  fake::state.host_vmm = 0;
  auto dev = make({}, /*offload=*/true);
  ASSERT_TRUE(dev);
  EXPECT_FALSE(dev->caps().has_host_backing);
  EXPECT_TRUE(dev->caps().offload_unmaps);
  const device_address base = dev->reserve(2 * page).value();
  ASSERT_EQ(dev->map(base, 2 * page), errc::ok);
  const std::size_t used = fake::state.used_bytes;
  const std::vector<byte_range> live{{base + 64, 1000}, {base + page, 4096}};
  ASSERT_EQ(dev->offload(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  ASSERT_EQ(fake::state.pinned.size(), 1u);
  const auto buffer = reinterpret_cast<CUdeviceptr>(fake::state.pinned.begin()->first);
  EXPECT_EQ(fake::state.pinned.begin()->second, 2 * page);  // the range's bytes, no rounding
  ASSERT_EQ(fake::state.copies.size(), 2u);  // the live ranges only, into the buffer at their offsets
  EXPECT_EQ(fake::state.copies[0].dst, buffer + 64);
  EXPECT_EQ(fake::state.copies[1].dst, buffer + page);
  EXPECT_EQ(fake::state.copies[1].bytes, 4096u);
  EXPECT_FALSE(device_mapped_at(base) || host_mapped_at(base) || device_mapped_at(base + page));  // unmapped
  EXPECT_TRUE(fake::state.host_handles.empty());
  EXPECT_EQ(fake::state.used_bytes, used - 2 * page);
  EXPECT_EQ(dev->host_backed_bytes(), 2 * page);
  EXPECT_EQ(dev->map(base, page), errc::invalid_argument);  // offloaded, not free address space

  const int host_waits = fake::state.calls["cuStreamSynchronize"];
  ASSERT_EQ(dev->restore(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  EXPECT_EQ(fake::state.calls["cuStreamSynchronize"], host_waits) << "a restore of an unmapped range waited on the host";
  ASSERT_EQ(fake::state.copies.size(), 4u);
  EXPECT_EQ(fake::state.copies[2].src, buffer + 64);
  EXPECT_EQ(fake::state.copies[2].dst, base + 64);
  EXPECT_TRUE(device_mapped_at(base));
  EXPECT_EQ(dev->host_held_bytes(), 2 * page);  // the buffer is kept for the next offload
  ASSERT_EQ(dev->offload(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  EXPECT_EQ(fake::state.calls["cuMemHostAlloc"], 1) << "the second offload pinned anew";
  EXPECT_EQ(dev->unmap(base, 2 * page), errc::ok);  // a free while offloaded: its buffer is kept
  EXPECT_EQ(dev->host_backed_bytes(), 0u);
  EXPECT_EQ(dev->release(base, 2 * page), errc::ok);
  dev.reset();
  EXPECT_TRUE(fake::state.pinned.empty()) << "a pinned buffer outlived the device";
  EXPECT_TRUE(fake::state.streams.empty());
}

TEST_F(CudaVmmFakeDriverTest, WithoutHostBackingFailuresLeaveTheRangeAsItWas) {
  fake::state.host_vmm = 0;
  auto dev = make({.restore_chunk_bytes = page}, /*offload=*/true);
  ASSERT_TRUE(dev);
  const device_address base = dev->reserve(2 * page).value();
  ASSERT_EQ(dev->map(base, 2 * page), errc::ok);
  const std::vector<byte_range> live{{base, 2 * page}};
  fake::fail_call("cuMemHostAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(dev->offload(base, 2 * page, live, {}), errc::out_of_memory);
  EXPECT_NE(dev->last_failure().find("cuMemHostAlloc"), std::string::npos) << dev->last_failure();
  EXPECT_TRUE(device_mapped_at(base));
  EXPECT_EQ(dev->mapped_bytes(), 2 * page);
  ASSERT_EQ(dev->offload(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  // A restore whose second chunk cannot be mapped leaves the range unmapped, its bytes in the buffer.
  fake::fail_call("cuMemMap", 2, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(dev->restore(base, 2 * page, live, {}), errc::device_refused);
  EXPECT_FALSE(device_mapped_at(base) || device_mapped_at(base + page));
  EXPECT_EQ(dev->host_backed_bytes(), 2 * page);
  EXPECT_EQ(fake::state.pinned.size(), 1u);
  ASSERT_EQ(dev->restore(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  EXPECT_TRUE(device_mapped_at(base) && device_mapped_at(base + page));
}

}  // namespace
}  // namespace phasealloc
