// Reductions of the collectives, per NCCL data type, on host copies of device bytes.
#pragma once

#include <cstddef>

#include "nccl_types.hpp"

namespace simcuda::nccl {

/// Bytes of one element of `type`; 0 for a value that is not an ncclDataType_t.
std::size_t element_bytes(ncclDataType_t type) noexcept;
const char* type_name(ncclDataType_t type) noexcept;

/// What combines the ranks' values: a built-in operator, or a pre-multiply-then-sum operator
/// (ncclRedOpCreatePreMulSum, and ncclAvg on floating types) with its scalar.
struct reduction {
  enum class kind { sum, prod, max, min, avg_int, premul_sum } op = kind::sum;
  double scalar = 1.0;  ///< premul_sum: what every input is multiplied by (in the element type)
  int ranks = 1;        ///< avg_int: the divisor
};

/// out[i] = in[0][i] (op) in[1][i] (op) ... in[n-1][i], combined in rank order, every step rounded
/// to the element type as NCCL's kernels compute in it (low-precision floats through float).
/// `out` may alias one of the inputs.
void reduce(void* out, const void* const* inputs, int n, std::size_t count, ncclDataType_t type,
            const reduction& how) noexcept;

/// The scalar at `pointer`, an element of `type`, as a double (for pre-multiply operators).
double load_scalar(const void* pointer, ncclDataType_t type) noexcept;

}  // namespace simcuda::nccl
