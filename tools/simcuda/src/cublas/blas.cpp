// Operand arithmetic and checks shared by the GEMM entry points (Note [simulated BLAS]).
#include "blas.hpp"

namespace simcuda::blas {

std::size_t element_bytes(cudaDataType type) noexcept {
  switch (type) {
    case CUDA_R_8I: case CUDA_R_8U: case CUDA_R_8F_E4M3: case CUDA_R_8F_E5M2: return 1;
    case CUDA_R_16F: case CUDA_R_16BF: case CUDA_C_8I: case CUDA_C_8U: return 2;
    case CUDA_R_32F: case CUDA_R_32I: case CUDA_R_32U: case CUDA_C_16F: case CUDA_C_16BF: return 4;
    case CUDA_R_64F: case CUDA_C_32F: case CUDA_R_64I: case CUDA_R_64U: return 8;
    case CUDA_C_64F: return 16;
    default: return 0;
  }
}

bool operand_ok(const char* library_name, const char* function, const char* operand, const void* pointer,
                std::uint64_t elements, std::size_t bytes_each) {
  if (elements == 0) return true;
  const std::uint64_t bytes = elements * bytes_each;
  if (pointer != nullptr && device_range_accessible(pointer, bytes)) return true;
  illegal_operand(library_name, function, operand, pointer, bytes);
  return false;
}

void launched() noexcept {
  count_kernel_launch();
  count_library_call();
  tick();
}

bool transposed(cublasOperation_t op, bool* out) noexcept {
  switch (op) {
    case CUBLAS_OP_N: *out = false; return true;
    case CUBLAS_OP_T: case CUBLAS_OP_C: *out = true; return true;
    default: return false;
  }
}

cublasStatus_t check_gemm(const char* library_name, const char* function, const gemm_shape& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const std::int64_t rows_a = g.trans_a ? g.k : g.m, cols_a = g.trans_a ? g.m : g.k;
  const std::int64_t rows_b = g.trans_b ? g.n : g.k, cols_b = g.trans_b ? g.k : g.n;
  auto at_least = [](std::int64_t rows) { return rows > 1 ? rows : 1; };
  if (g.lda < at_least(rows_a) || g.ldb < at_least(rows_b) || g.ldc < at_least(g.m) ||
      (g.d != nullptr && g.ldd < at_least(g.m)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (g.m == 0 || g.n == 0 || g.batch == 0) return CUBLAS_STATUS_SUCCESS;  // nothing to touch
  bool ok = true;
  if (g.k > 0) {
    ok &= operand_ok(library_name, function, "A", g.a, matrix_span(rows_a, cols_a, g.lda, g.batch, g.stride_a), g.bytes_a);
    ok &= operand_ok(library_name, function, "B", g.b, matrix_span(rows_b, cols_b, g.ldb, g.batch, g.stride_b), g.bytes_b);
  }
  ok &= operand_ok(library_name, function, "C", g.c, matrix_span(g.m, g.n, g.ldc, g.batch, g.stride_c), g.bytes_c);
  if (g.d != nullptr)
    ok &= operand_ok(library_name, function, "D", g.d, matrix_span(g.m, g.n, g.ldd, g.batch, g.stride_d), g.bytes_d);
  return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // namespace simcuda::blas
