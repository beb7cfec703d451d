// Stream ordinals of the bench patterns -> CUDA streams, shared by the device allocators.
#include <cuda_runtime_api.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "device_allocators.hpp"

namespace phasealloc::bench {

void* cuda_stream_for(stream_id stream) {
  if (stream == 0) return nullptr;
  static std::mutex mu;
  static std::vector<cudaStream_t> streams;  // kept for the process: allocators cache blocks per stream
  std::lock_guard lock(mu);
  while (streams.size() < stream) {
    cudaStream_t s = nullptr;
    if (const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess) {
      throw std::runtime_error(std::string("cudaStreamCreateWithFlags: ") + cudaGetErrorString(e));
    }
    streams.push_back(s);
  }
  return streams[stream - 1];
}

}  // namespace phasealloc::bench
