// Test support for the simulated NCCL: device buffers of any NCCL data type, filled and read back
// through real copies with CUDA's own host conversions (so every rounding is CUDA's).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "nccl_ranks.hpp"

namespace nccl_test {

inline std::size_t size_of(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

// Element i of a buffer of `t`, written from / read as a double, with CUDA's own host conversions.
inline void put(void* base, std::size_t i, ncclDataType_t t, double v) {
  char* p = static_cast<char*>(base) + i * size_of(t);
  auto store = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (t) {
    case ncclInt8:
      return store(static_cast<std::int8_t>(v));
    case ncclUint8:
      return store(static_cast<std::uint8_t>(v));
    case ncclInt32:
      return store(static_cast<std::int32_t>(v));
    case ncclUint32:
      return store(static_cast<std::uint32_t>(v));
    case ncclInt64:
      return store(static_cast<std::int64_t>(v));
    case ncclUint64:
      return store(static_cast<std::uint64_t>(v));
    case ncclFloat16:
      return store(__float2half(static_cast<float>(v)));
    case ncclFloat32:
      return store(static_cast<float>(v));
    case ncclFloat64:
      return store(v);
    case ncclBfloat16:
      return store(__float2bfloat16(static_cast<float>(v)));
    case ncclFloat8e4m3:
      return store(__nv_fp8_e4m3(static_cast<float>(v)));
    case ncclFloat8e5m2:
      return store(__nv_fp8_e5m2(static_cast<float>(v)));
    default:
      return;
  }
}

inline double get(const void* base, std::size_t i, ncclDataType_t t) {
  const char* p = static_cast<const char*>(base) + i * size_of(t);
  auto load = [p](auto x) {
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (t) {
    case ncclInt8:
      return load(std::int8_t{});
    case ncclUint8:
      return load(std::uint8_t{});
    case ncclInt32:
      return load(std::int32_t{});
    case ncclUint32:
      return load(std::uint32_t{});
    case ncclInt64:
      return static_cast<double>(load(std::int64_t{}));
    case ncclUint64:
      return static_cast<double>(load(std::uint64_t{}));
    case ncclFloat16:
      return __half2float(load(__half{}));
    case ncclFloat32:
      return load(float{});
    case ncclFloat64:
      return load(double{});
    case ncclBfloat16:
      return __bfloat162float(load(__nv_bfloat16{}));
    case ncclFloat8e4m3:
      return static_cast<float>(load(__nv_fp8_e4m3{}));
    case ncclFloat8e5m2:
      return static_cast<float>(load(__nv_fp8_e5m2{}));
    default:
      return NAN;
  }
}

// A device buffer of `count` elements of `t`, filled by value(i) through a real host-to-device copy.
template <typename F>
void* device_buffer(ncclDataType_t t, std::size_t count, F value) {
  std::vector<char> host(count * size_of(t) + 1);
  for (std::size_t i = 0; i < count; ++i) put(host.data(), i, t, value(i));
  void* device = nullptr;
  RANK_CHECK(cudaMalloc(&device, host.size()) == cudaSuccess, "cudaMalloc of %zu bytes", host.size());
  RANK_CHECK(cudaMemcpy(device, host.data(), count * size_of(t), cudaMemcpyHostToDevice) == cudaSuccess, "copy in");
  return device;
}

inline std::vector<char> host_copy(const void* device, ncclDataType_t t, std::size_t count) {
  std::vector<char> host(count * size_of(t) + 1);
  RANK_CHECK(cudaMemcpy(host.data(), device, count * size_of(t), cudaMemcpyDeviceToHost) == cudaSuccess, "copy out");
  return host;
}

}  // namespace nccl_test
