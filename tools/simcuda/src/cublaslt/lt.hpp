// The cuBLASLt stand-in's objects: matmul descriptors, matrix layouts and preferences, each a
// registered object holding its attributes by value (Note [simulated BLAS] in ../cublas/blas.hpp).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "../cublas/blas.hpp"

namespace simcuda::lt {

inline constexpr const char* library = "libcublasLt.so.13";

/// Attributes as the caller set them: id -> bytes.
struct attributes {
  std::map<int, std::vector<std::uint8_t>> values;

  template <class T>
  T get(int id, T fallback) const {
    auto it = values.find(id);
    if (it == values.end() || it->second.size() != sizeof(T)) return fallback;
    T out;
    std::memcpy(&out, it->second.data(), sizeof(T));
    return out;
  }
};

struct matmul_desc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType scale = CUDA_R_32F;
  attributes attrs;
};

struct matrix_layout {
  cudaDataType type = CUDA_R_32F;
  std::uint64_t rows = 0, cols = 0;
  std::int64_t ld = 0;
  attributes attrs;  ///< order, batch count, strided batch offset, ...
};

struct preference {
  attributes attrs;
};

/// The size in bytes of an attribute's value, or 0 for an id that is not an attribute.
std::size_t desc_attribute_bytes(int id) noexcept;
std::size_t layout_attribute_bytes(int id) noexcept;
std::size_t preference_attribute_bytes(int id) noexcept;

/// The marker our algorithms carry in data[0] (from the heuristic or AlgoInit).
inline constexpr std::uint64_t algo_marker = 0x53494d43414c474fULL;  // "SIMCALGO"

}  // namespace simcuda::lt
