// Driver API: tensor-memory-accelerator (TMA) descriptors, cuTensorMapEncodeTiled and
// cuTensorMapReplaceAddress, which Hopper kernels (vLLM's FlashAttention 3, DeepGEMM, Triton's
// tensor descriptors) build on the host before a launch.
//
// Rationale
//   No kernel reads a descriptor here, but building one is host work with documented rules: a
//   caller that breaks them gets CUDA_ERROR_INVALID_VALUE from a GPU, and must get it here.
// Approach
//   The requirements cuda.h states for cuTensorMapEncodeTiled are checked (alignment of the map
//   and the address, rank, dimensions, strides, box and element strides, the swizzle span, the
//   interleave layouts). The 128-byte map is opaque to the caller; it is written with the
//   address, the type and the dimensions, so two encodings of the same tensor are equal.
// Limitations
//   The packed sub-byte types (16U4/16U6) and im2col maps (cuTensorMapEncodeIm2col*) are not
//   modelled: the first is refused with a line naming the type, the second keeps the stub line.
#include <cstdint>
#include <cstring>

#include "driver.hpp"

using namespace simcuda;
using namespace simcuda::drv;

namespace {

/// Bytes per element, 0 for the packed sub-byte types.
unsigned element_bytes(CUtensorMapDataType type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: return 0;
  }
}

/// The span a swizzle mode covers in bytes, 0 for none, -1 for an unknown mode.
int swizzle_bytes(CUtensorMapSwizzle swizzle) {
  switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_NONE: return 0;
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B: return 128;
    default: return -1;
  }
}

/// The opaque map's layout here: address, then type, rank, and the dimensions.
struct encoded_map {
  std::uint64_t address;
  std::uint32_t type, rank;
  std::uint64_t global_dim[5];
  std::uint32_t box_dim[5];
};
static_assert(sizeof(encoded_map) <= sizeof(CUtensorMap));

}  // namespace

extern "C" {

CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address,
                                const cuuint64_t* global_dim, const cuuint64_t* global_strides,
                                const cuuint32_t* box_dim, const cuuint32_t* element_strides,
                                CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                CUtensorMapL2promotion l2_promotion, CUtensorMapFloatOOBfill oob_fill) {
  if (map == nullptr || reinterpret_cast<std::uintptr_t>(map) % 64 != 0) return CUDA_ERROR_INVALID_VALUE;
  const unsigned bytes = element_bytes(type);
  if (bytes == 0) {
    if (type >= CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && type <= CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B)
      return not_supported("cuTensorMapEncodeTiled", "the packed 16U4/16U6 data types are not modelled");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (interleave < CU_TENSOR_MAP_INTERLEAVE_NONE || interleave > CU_TENSOR_MAP_INTERLEAVE_32B)
    return CUDA_ERROR_INVALID_VALUE;
  const bool interleaved = interleave != CU_TENSOR_MAP_INTERLEAVE_NONE;
  if (rank == 0 || rank > 5 || (interleaved && rank < 3)) return CUDA_ERROR_INVALID_VALUE;
  const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(address);
  if (base % (interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (global_dim == nullptr || box_dim == nullptr || element_strides == nullptr ||
      (rank > 1 && global_strides == nullptr))
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < rank; ++i) {
    if (global_dim[i] == 0 || global_dim[i] > (std::uint64_t{1} << 32)) return CUDA_ERROR_INVALID_VALUE;
    if (box_dim[i] == 0 || box_dim[i] > 256) return CUDA_ERROR_INVALID_VALUE;
    if (element_strides[i] == 0 || element_strides[i] > 8) return CUDA_ERROR_INVALID_VALUE;
  }
  const unsigned stride_multiple = interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  for (unsigned i = 0; i + 1 < rank; ++i)
    if (global_strides[i] % stride_multiple != 0 || global_strides[i] >= (std::uint64_t{1} << 40))
      return CUDA_ERROR_INVALID_VALUE;
  const int span = swizzle_bytes(swizzle);
  if (span < 0) return CUDA_ERROR_INVALID_VALUE;
  const std::uint64_t inner_bytes = std::uint64_t{box_dim[0]} * bytes;
  if (!interleaved) {
    if (inner_bytes % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
    if (span > 0 && inner_bytes > static_cast<unsigned>(span)) return CUDA_ERROR_INVALID_VALUE;
  } else if (interleave == CU_TENSOR_MAP_INTERLEAVE_32B && swizzle != CU_TENSOR_MAP_SWIZZLE_32B) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (l2_promotion < CU_TENSOR_MAP_L2_PROMOTION_NONE || l2_promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
    return CUDA_ERROR_INVALID_VALUE;
  if (oob_fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE && oob_fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
    return CUDA_ERROR_INVALID_VALUE;
  encoded_map e{};
  e.address = base;
  e.type = static_cast<std::uint32_t>(type);
  e.rank = rank;
  for (unsigned i = 0; i < rank; ++i) {
    e.global_dim[i] = global_dim[i];
    e.box_dim[i] = box_dim[i];
  }
  std::memset(map, 0, sizeof *map);
  std::memcpy(map, &e, sizeof e);
  return CUDA_SUCCESS;
}

CUresult cuTensorMapReplaceAddress(CUtensorMap* map, void* address) {
  if (map == nullptr || reinterpret_cast<std::uintptr_t>(map) % 64 != 0) return CUDA_ERROR_INVALID_VALUE;
  if (reinterpret_cast<std::uintptr_t>(address) % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
  encoded_map e;
  std::memcpy(&e, map, sizeof e);
  if (e.rank == 0 || e.rank > 5) return CUDA_ERROR_INVALID_VALUE;  // not a map cuTensorMapEncodeTiled wrote
  e.address = reinterpret_cast<std::uintptr_t>(address);
  std::memcpy(map, &e, sizeof e);
  return CUDA_SUCCESS;
}

}  // extern "C"
