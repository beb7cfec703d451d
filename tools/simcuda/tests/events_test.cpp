// simcuda's deferred event mode (SIMCUDA_GPU=events:deferred:N): an event completes N queued
// operations after its record, or at a synchronize, so allocators' cross-stream paths run.
#include <cuda_runtime_api.h>

#include <cstdlib>

#include <gtest/gtest.h>

namespace {

class simcuda_events : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv("SIMCUDA_GPU", "quiet:1,events:deferred:3", 1); }
};

TEST_F(simcuda_events, AnEventCompletesAfterTheConfiguredTicksOrAtSynchronize) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorNotReady);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(cudaMemsetAsync(p, i, 16, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorNotReady);
  ASSERT_EQ(cudaMemsetAsync(p, 0, 16, s), cudaSuccess);  // the third tick after the record
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);

  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorNotReady);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);

  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

}  // namespace
