// Shared by the cuBLAS and cuBLASLt stand-ins: the handle object and operand arithmetic.
//
// Note [simulated BLAS]
// ~~~~~~~~~~~~~~~~~~~~~
// Rationale
//   A GEMM on the simulator computes nothing (kernels do not run), but it is where a wrong
//   leading dimension or a block freed too early would read memory it does not own. So every
//   call is checked as cuBLAS checks it, and then some: the handle, the modes, the shapes and
//   leading dimensions (CUBLAS_STATUS_INVALID_VALUE, as cuBLAS answers), and every operand's
//   extent against accessible device memory (a GPU would raise an illegal address; here it is
//   one line naming the operand, and CUBLAS_STATUS_EXECUTION_FAILED).
// Approach
//   Column-major BLAS rules: op(A) is m x k, op(B) is k x n, C is m x n; a stored matrix of
//   `rows` x `cols` with leading dimension ld spans ld * (cols - 1) + rows elements, plus
//   stride * (batch - 1) for strided batches. A valid call is counted as a kernel launch and a
//   library call, and ticks the event clock, like a launch.
// Limitations
//   Nothing is computed; batched calls with arrays of pointers (cublas*gemmBatched) and the
//   level-1/2 routines other than those defined here stay loud stubs.
#pragma once

#include <cublas_v2.h>
#include <library_types.h>

#include <cstddef>
#include <cstdint>

#include "simcuda/core.hpp"

namespace simcuda::blas {

inline constexpr const char* library = "libcublas.so.13";

struct handle_object {
  int device = 0;
  cudaStream_t stream = nullptr;  ///< as set (0: the legacy default stream)
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  int sm_count_target = 0;
};

/// The handle behind a cublasHandle_t (or a cublasLtHandle_t cast from one), or nullptr.
inline handle_object* handle_of(const void* h) {
  return is_object(h, object_kind::blas_handle) ? static_cast<handle_object*>(const_cast<void*>(h)) : nullptr;
}

/// Bytes of one element of a cudaDataType; 0 when the simulator does not know the type.
std::size_t element_bytes(cudaDataType type) noexcept;

/// Elements a stored column-major matrix spans (0 when it has no elements).
inline std::uint64_t matrix_span(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t batch,
                                 std::int64_t stride) {
  if (rows <= 0 || cols <= 0 || batch <= 0) return 0;
  std::uint64_t one = static_cast<std::uint64_t>(ld) * static_cast<std::uint64_t>(cols - 1) +
                      static_cast<std::uint64_t>(rows);
  return one + static_cast<std::uint64_t>(stride < 0 ? -stride : stride) * static_cast<std::uint64_t>(batch - 1);
}

/// Checks that `elements` of `bytes_each` at `pointer` are accessible device memory; reports and
/// returns false otherwise.
bool operand_ok(const char* library_name, const char* function, const char* operand, const void* pointer,
                std::uint64_t elements, std::size_t bytes_each);

/// A call that passed its checks: one skipped kernel on `stream`.
void launched() noexcept;

/// One GEMM's operands, for the shared checks of cublas*gemm* and cublasLtMatmul.
struct gemm_shape {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  std::int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0;
  std::size_t bytes_a = 0, bytes_b = 0, bytes_c = 0, bytes_d = 0;
  const void *a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr;
};

/// CUBLAS_STATUS_INVALID_VALUE for impossible dimensions or leading dimensions,
/// CUBLAS_STATUS_EXECUTION_FAILED (reported) for an operand outside device memory.
cublasStatus_t check_gemm(const char* library_name, const char* function, const gemm_shape& g);

/// Decodes a cublasOperation_t; false for a value that is not one.
bool transposed(cublasOperation_t op, bool* out) noexcept;

}  // namespace simcuda::blas
