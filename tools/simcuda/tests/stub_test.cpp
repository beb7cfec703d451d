// A function the simulator does not emulate fails loudly: an error status and one line naming
// it, or an abort under strict:1. Nothing that is not emulated answers success.
#include <cuda_runtime_api.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "simcuda/introspect.h"

namespace {

TEST(simcuda_stubs, AnUnemulatedRuntimeFunctionReturnsNotSupportedAndSaysItsName) {
  setenv("SIMCUDA_GPU", "quiet:1", 1);
  simcuda_counters before{};
  ASSERT_EQ(simcuda_get_counters(&before, sizeof before), 0);
  ::testing::internal::CaptureStderr();
  cudaError_t status = cudaMemPoolTrimTo(nullptr, 0);
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, cudaErrorNotSupported);
  EXPECT_NE(said.find("simcuda: libcudart.so.13: cudaMemPoolTrimTo is not emulated"), std::string::npos) << said;
  simcuda_counters after{};
  ASSERT_EQ(simcuda_get_counters(&after, sizeof after), 0);
  EXPECT_EQ(after.unemulated_calls, before.unemulated_calls + 1);
}

TEST(simcuda_stubs, AnEmulatedFunctionAskedForAnUnsupportedModeSaysWhy) {
  setenv("SIMCUDA_GPU", "quiet:1", 1);
  ::testing::internal::CaptureStderr();
  void* pointer = nullptr;
  cudaError_t status = cudaMallocManaged(&pointer, 4096, cudaMemAttachGlobal);
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, cudaErrorNotSupported);
  EXPECT_NE(said.find("cudaMallocManaged: managed (unified) memory is not simulated"), std::string::npos) << said;
}

TEST(simcuda_stubs_death, StrictModeAbortsAtTheFirstUnemulatedCall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process parses SIMCUDA_GPU anew
  EXPECT_DEATH(
      {
        setenv("SIMCUDA_GPU", "quiet:1,strict:1", 1);
        cudaMemPoolTrimTo(nullptr, 0);
      },
      "cudaMemPoolTrimTo is not emulated");
}

TEST(simcuda_stubs_death, ABadSimcudaGpuStopsTheProcessNamingTheKey) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("SIMCUDA_GPU", "memory:huge", 1);
        int n = 0;
        cudaGetDeviceCount(&n);
      },
      ::testing::ExitedWithCode(2), "simcuda: SIMCUDA_GPU='memory:huge': bad value 'huge' for memory");
}

}  // namespace
