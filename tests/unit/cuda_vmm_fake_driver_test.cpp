// cuda_vmm_device on a fake CUDA driver (fake_cuda_driver.hpp): its books, rollbacks and error
// texts, with no GPU and no libcuda. Offload's failure paths: cuda_vmm_fake_offload_test.cpp.
//
// It also runs the device conformance suite on the fake (FakeDriver/DeviceConformanceTest.*), with
// and without offload entries (host-backed, and unmapping).
#include <gtest/gtest.h>

#include <string>

#include "../conformance/device_conformance.hpp"
#include "fake_cuda_driver.hpp"

namespace phasealloc {
namespace {

TEST_F(CudaVmmFakeDriverTest, TakesGranularityAndCapacityFromTheDriver) {
  auto dev = make();
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->name(), "cuda_vmm");
  EXPECT_EQ(dev->caps().granularity_bytes, page);
  EXPECT_EQ(dev->caps().capacity_bytes, 64 * mib);
  EXPECT_TRUE(dev->caps().has_virtual_reserve);
  EXPECT_TRUE(dev->caps().has_partial_unmap);
  EXPECT_EQ(dev->free_bytes(), 64 * mib);
  EXPECT_EQ(fake::state.primary_retains, 1);
  dev.reset();
  EXPECT_EQ(fake::state.primary_retains, 0) << "the primary context is released with the device";
}

TEST_F(CudaVmmFakeDriverTest, AnswersNotSupportedWithoutVirtualMemoryManagement) {
  fake::state.vmm_supported = 0;
  std::string why;
  EXPECT_EQ(creation_error(why), errc::not_supported);
  EXPECT_NE(why.find("virtual memory management"), std::string::npos) << why;
  EXPECT_EQ(fake::state.primary_retains, 0);
}

TEST_F(CudaVmmFakeDriverTest, AnswersNotSupportedWhenTheDriverFindsNoDevice) {
  fake::state.init_result = CUDA_ERROR_NO_DEVICE;
  std::string why;
  EXPECT_EQ(creation_error(why), errc::not_supported);
  EXPECT_NE(why.find("cuInit returned CUDA_ERROR_NO_DEVICE"), std::string::npos) << why;
}

TEST_F(CudaVmmFakeDriverTest, AnswersInvalidArgumentForAnOrdinalOutOfRange) {
  fake::state.device_count = 0;
  std::string why;
  EXPECT_EQ(creation_error(why), errc::invalid_argument);
  EXPECT_NE(why.find("CUDA_ERROR_INVALID_DEVICE"), std::string::npos) << why;
}

TEST_F(CudaVmmFakeDriverTest, AnswersNotSupportedForAnIncompleteDriverTable) {
  detail::cuda_driver_api api = fake::table();
  api.mem_map = nullptr;
  std::string why;
  auto made = cuda_vmm_device::create_with_driver(api, 0, {}, &why);
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error(), errc::not_supported);
  EXPECT_NE(why.find("mem_map"), std::string::npos) << why;
}

TEST_F(CudaVmmFakeDriverTest, UsesALargerPowerOfTwoPageWhenAsked) {
  auto dev = make({.page_bytes = 8 * mib});
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->caps().granularity_bytes, 8 * mib);
  auto base = dev->reserve(16 * mib);
  ASSERT_TRUE(base);
  EXPECT_EQ(base.value() % (8 * mib), 0u);
  EXPECT_EQ(dev->map(base.value(), 16 * mib), errc::ok);
  EXPECT_EQ(fake::state.calls["cuMemCreate"], 2) << "one handle per 8 MiB page";

  std::string why;
  EXPECT_EQ(creation_error(why, {.page_bytes = 6 * mib}), errc::invalid_argument);
  EXPECT_NE(why.find("page_bytes"), std::string::npos) << why;
  EXPECT_EQ(creation_error(why, {.page_bytes = 3 * mib}), errc::invalid_argument);
}

TEST_F(CudaVmmFakeDriverTest, MapsOneHandlePerPageAndSetsAccessOnce) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(8 * page);
  ASSERT_TRUE(base);
  ASSERT_EQ(dev->map(base.value() + page, 4 * page), errc::ok);
  EXPECT_EQ(fake::state.calls["cuMemCreate"], 4);
  EXPECT_EQ(fake::state.calls["cuMemMap"], 4);
  ASSERT_EQ(fake::state.access_calls.size(), 1u);
  EXPECT_EQ(fake::state.access_calls[0].first, base.value() + page);
  EXPECT_EQ(fake::state.access_calls[0].second, 4 * page);
  EXPECT_EQ(fake::state.handles.size(), 4u);
  EXPECT_EQ(dev->mapped_bytes(), 4 * page);
  EXPECT_EQ(dev->free_bytes(), 64 * mib - 4 * page);
}

TEST_F(CudaVmmFakeDriverTest, GrantsAPeerTheMappedRunsAndEveryLaterMap) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(8 * page);
  ASSERT_TRUE(base);
  ASSERT_EQ(dev->map(base.value(), 2 * page), errc::ok);
  ASSERT_EQ(dev->map(base.value() + 4 * page, page), errc::ok);
  EXPECT_EQ(fake::state.access_devices, (std::vector<std::vector<int>>{{0}, {0}}));
  ASSERT_EQ(dev->grant_peer_access(1), errc::ok);
  ASSERT_EQ(fake::state.access_calls.size(), 4u);  // one call per run of mapped pages
  EXPECT_EQ(fake::state.access_calls[2], std::pair(static_cast<CUdeviceptr>(base.value()), 2 * page));
  EXPECT_EQ(fake::state.access_calls[3], std::pair(static_cast<CUdeviceptr>(base.value() + 4 * page), page));
  EXPECT_EQ(fake::state.access_devices[2], std::vector<int>{1});
  ASSERT_EQ(dev->grant_peer_access(1), errc::ok);  // once is enough
  ASSERT_EQ(dev->grant_peer_access(0), errc::ok);  // the device itself
  EXPECT_EQ(fake::state.access_calls.size(), 4u);
  ASSERT_EQ(dev->map(base.value() + 6 * page, page), errc::ok);
  EXPECT_EQ(fake::state.access_devices.back(), (std::vector<int>{0, 1}));  // later maps name the peer
}

TEST_F(CudaVmmFakeDriverTest, RollsBackAMapWhoseThirdCuMemCreateRunsOutOfMemory) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(8 * page);
  ASSERT_TRUE(base);
  fake::fail_call("cuMemCreate", 3, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(dev->map(base.value(), 4 * page), errc::out_of_memory);
  EXPECT_EQ(dev->last_failure(), "cuMemCreate(2097152) failed: CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_TRUE(fake::state.handles.empty()) << "the two pages mapped before the failure were released";
  EXPECT_TRUE(fake::state.mappings.empty());
  EXPECT_EQ(fake::state.used_bytes, 0u);
  EXPECT_EQ(dev->mapped_bytes(), 0u);
  EXPECT_EQ(dev->map(base.value(), 4 * page), errc::ok) << "the range is whole again";
}

TEST_F(CudaVmmFakeDriverTest, RollsBackAMapWhenCuMemMapFails) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  fake::fail_call("cuMemMap", 2, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(dev->map(base.value(), 4 * page), errc::device_refused);
  EXPECT_NE(dev->last_failure().find("cuMemMap("), std::string::npos) << dev->last_failure();
  EXPECT_TRUE(fake::state.handles.empty()) << "including the handle whose map failed";
  EXPECT_TRUE(fake::state.mappings.empty());
  EXPECT_EQ(dev->release(base.value(), 4 * page), errc::ok);
}

TEST_F(CudaVmmFakeDriverTest, RollsBackAMapWhenCuMemSetAccessFails) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  fake::fail_call("cuMemSetAccess", 1, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(dev->map(base.value(), 3 * page), errc::out_of_memory);
  EXPECT_TRUE(fake::state.handles.empty());
  EXPECT_TRUE(fake::state.mappings.empty());
  EXPECT_EQ(dev->mapped_bytes(), 0u);
}

TEST_F(CudaVmmFakeDriverTest, UnmapsASubrangeAndReleasesItsHandles) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  ASSERT_EQ(dev->map(base.value(), 4 * page), errc::ok);
  ASSERT_EQ(dev->unmap(base.value() + page, 2 * page), errc::ok);
  EXPECT_EQ(fake::state.handles.size(), 2u);
  EXPECT_EQ(fake::state.mappings.size(), 2u);
  EXPECT_TRUE(fake::state.mappings.contains(base.value()));
  EXPECT_TRUE(fake::state.mappings.contains(base.value() + 3 * page));
  EXPECT_EQ(fake::state.used_bytes, 2 * page);
  EXPECT_EQ(dev->mapped_bytes(), 2 * page);
}

TEST_F(CudaVmmFakeDriverTest, MapsPagesBackWhenAnUnmapFails) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  ASSERT_EQ(dev->map(base.value(), 4 * page), errc::ok);
  const auto handles_before = fake::state.mappings;
  fake::fail_call("cuMemUnmap", 3, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(dev->unmap(base.value(), 4 * page), errc::device_refused);
  EXPECT_EQ(dev->last_failure(), fmt::format("cuMemUnmap({:#x}, {}) failed: CUDA_ERROR_ILLEGAL_ADDRESS",
                                             base.value() + 2 * page, page));
  ASSERT_EQ(fake::state.mappings.size(), 4u) << "the two pages unmapped first were mapped back";
  for (const auto& [at, m] : handles_before) EXPECT_EQ(fake::state.mappings.at(at).handle, m.handle) << "same handle";
  EXPECT_EQ(dev->mapped_bytes(), 4 * page);
  EXPECT_EQ(dev->unmap(base.value(), 4 * page), errc::ok);
  EXPECT_TRUE(fake::state.handles.empty());
}

TEST_F(CudaVmmFakeDriverTest, AnswersOutOfMemoryWhenTheAddressSpaceRunsOut) {
  auto dev = make();
  ASSERT_TRUE(dev);
  fake::fail_call("cuMemAddressReserve", 1, CUDA_ERROR_OUT_OF_MEMORY);
  auto base = dev->reserve(4 * page);
  ASSERT_FALSE(base);
  EXPECT_EQ(base.error(), errc::out_of_memory);
  EXPECT_EQ(dev->live_reservations(), 0u);
}

TEST_F(CudaVmmFakeDriverTest, KeepsTheReservationWhenCuMemAddressFreeFails) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  fake::fail_call("cuMemAddressFree", 1, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(dev->release(base.value(), 4 * page), errc::device_refused);
  EXPECT_EQ(dev->live_reservations(), 1u);
  EXPECT_EQ(dev->release(base.value(), 4 * page), errc::ok);
}

TEST_F(CudaVmmFakeDriverTest, AnswersCallerErrorsWithoutCallingTheDriver) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  const int reserves = fake::state.calls["cuMemAddressReserve"];
  EXPECT_FALSE(dev->reserve(page + 1));
  EXPECT_EQ(dev->map(base.value() + 1, page), errc::invalid_argument);
  EXPECT_EQ(dev->map(base.value() + 3 * page, 2 * page), errc::invalid_argument);
  EXPECT_EQ(dev->unmap(base.value(), page), errc::invalid_argument);
  EXPECT_EQ(dev->release(base.value(), 2 * page), errc::invalid_argument);
  EXPECT_EQ(fake::state.calls["cuMemAddressReserve"], reserves);
  EXPECT_EQ(fake::state.calls["cuMemCreate"], 0);
  EXPECT_EQ(fake::state.calls["cuMemUnmap"], 0);
  EXPECT_EQ(fake::state.calls["cuMemAddressFree"], 0);
  EXPECT_EQ(dev->last_failure(), "");
}

TEST_F(CudaVmmFakeDriverTest, PushesThePrimaryContextOnlyWhenItIsNotCurrent) {
  auto dev = make();
  ASSERT_TRUE(dev);
  ASSERT_TRUE(dev->reserve(page));
  EXPECT_EQ(fake::state.calls["cuCtxPushCurrent"], 1);
  EXPECT_TRUE(fake::state.ctx_stack.empty()) << "pushed and popped";

  fake::state.ctx_stack.push_back(fake::primary_ctx);  // as after the runtime made it current
  ASSERT_TRUE(dev->reserve(page));
  EXPECT_EQ(fake::state.calls["cuCtxPushCurrent"], 1);
  ASSERT_EQ(fake::state.ctx_stack.size(), 1u);
}

TEST_F(CudaVmmFakeDriverTest, PassesStreamsToTheDriverAndReadsNotReadyAsIncomplete) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto e = dev->create_event();
  ASSERT_TRUE(e);
  ASSERT_EQ(dev->record_event(e.value(), 0x1234), errc::ok);
  ASSERT_EQ(fake::state.recorded_streams.size(), 1u);
  EXPECT_EQ(fake::state.recorded_streams[0], reinterpret_cast<CUstream>(std::uintptr_t{0x1234}));
  fake::state.event_query_result = CUDA_ERROR_NOT_READY;
  auto q = dev->query_event(e.value());
  ASSERT_TRUE(q);
  EXPECT_FALSE(q.value());
  fake::state.event_query_result = CUDA_ERROR_ILLEGAL_ADDRESS;
  auto broken = dev->query_event(e.value());
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error(), errc::device_refused);
  fake::fail_call("cuCtxSynchronize", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(dev->synchronize(), errc::device_refused);
  EXPECT_EQ(dev->last_failure(), "cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS");
}

TEST_F(CudaVmmFakeDriverTest, ReturnsEverythingWhenDestroyed) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto a = dev->reserve(4 * page);
  auto b = dev->reserve(2 * page);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(dev->map(a.value() + page, 2 * page), errc::ok);
  ASSERT_EQ(dev->map(b.value(), 2 * page), errc::ok);
  ASSERT_TRUE(dev->create_event());
  dev.reset();
  EXPECT_TRUE(fake::state.mappings.empty());
  EXPECT_TRUE(fake::state.handles.empty());
  EXPECT_TRUE(fake::state.reservations.empty());
  EXPECT_TRUE(fake::state.events.empty());
  EXPECT_EQ(fake::state.used_bytes, 0u);
  EXPECT_EQ(fake::state.primary_retains, 0);
  EXPECT_TRUE(fake::state.ctx_stack.empty());
}

}  // namespace

// --- the conformance suite on the fake ------------------------------------------------------------

namespace conformance {
namespace {

made_device make_on_fake_driver(bool offload, int host_vmm) {
  fake::state = fake::driver_state{};
  fake::state.host_vmm = host_vmm;
  std::string why;
  auto made = cuda_vmm_device::create_with_driver(fake::table(offload), 0, {}, &why);
  if (!made) return {nullptr, why};
  return {std::move(made).value(), {}};
}

made_device make_vmm_on_fake_driver() { return make_on_fake_driver(false, 1); }
made_device make_host_backed_vmm_on_fake_driver() { return make_on_fake_driver(true, 1); }
made_device make_unmapping_vmm_on_fake_driver() { return make_on_fake_driver(true, 0); }

INSTANTIATE_TEST_SUITE_P(FakeDriver, DeviceConformanceTest,
                         ::testing::Values(device_factory{"cuda_vmm", make_vmm_on_fake_driver, true},
                                           device_factory{"cuda_vmm_host_backed", make_host_backed_vmm_on_fake_driver,
                                                          true},
                                           device_factory{"cuda_vmm_unmapping", make_unmapping_vmm_on_fake_driver,
                                                          true}),
                         device_factory_name);

}  // namespace
}  // namespace conformance
}  // namespace phasealloc
