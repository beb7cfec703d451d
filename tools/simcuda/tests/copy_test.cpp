// Copies move real bytes, at every value level but one case: at values:off a copy between two
// device buffers moves nothing (no kernel computes there, and such a copy is work of the same
// kind), so a dry run's device memory costs no host memory. Copies from and to the host still
// move, and the books count every copy. Each case runs in a fresh process (death-test style
// "threadsafe"), which parses SIMCUDA_GPU anew.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>

#include "simcuda/introspect.h"

namespace {

constexpr std::size_t bytes = 1 << 20;

// Host 0x11 -> device a, a -> device b (b first set from the host to 0x22), b -> host, in a process
// configured by `conf`; exits 0 when b ends holding `want_in_b`, with 3 copies counted.
[[noreturn]] void copy_chain(const char* conf, unsigned char want_in_b, bool async) {
  setenv("SIMCUDA_GPU", conf, 1);
  std::vector<unsigned char> host(bytes, 0x11), twos(bytes, 0x22), back(bytes, 0);
  void* a = nullptr;
  void* b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) std::_Exit(10);
  if (cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) std::_Exit(11);
  if (cudaMemcpy(b, twos.data(), bytes, cudaMemcpyDefault) != cudaSuccess) std::_Exit(12);
  simcuda_counters before{};
  simcuda_get_counters(&before, sizeof before);
  cudaError_t e = async ? cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, nullptr)
                        : cudaMemcpy(b, a, bytes, cudaMemcpyDefault);
  if (e != cudaSuccess) std::_Exit(13);
  if (cudaMemcpy(back.data(), b, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) std::_Exit(14);
  simcuda_counters after{};
  simcuda_get_counters(&after, sizeof after);
  if (after.memcpy_calls - before.memcpy_calls != 2) std::_Exit(15);
  for (std::size_t i = 0; i < bytes; i += 4093)
    if (back[i] != want_in_b) std::_Exit(16);
  std::_Exit(0);
}

TEST(simcuda_copies, ADeviceToDeviceCopyMovesItsBytesAtTheComputingLevels) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(copy_chain("quiet:1,values:observable", 0x11, false), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(copy_chain("quiet:1,values:exact", 0x11, true), ::testing::ExitedWithCode(0), "");
}

TEST(simcuda_copies, AtValuesOffADeviceToDeviceCopyMovesNothingButHostCopiesStillMove) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // b keeps what the host wrote into it (0x22): the host copies moved, the device one did not.
  EXPECT_EXIT(copy_chain("quiet:1,values:off", 0x22, false), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(copy_chain("quiet:1,values:off", 0x22, true), ::testing::ExitedWithCode(0), "");
}

}  // namespace
