// cuBLAS GEMMs: checked, counted as one launch each, not computed (Note [simulated BLAS]).
#include "blas.hpp"

using namespace simcuda;
using namespace simcuda::blas;

namespace {

/// The checks every cublas*gemm* shares; fills the transposes into `g`.
cublasStatus_t gemm(const char* function, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                    const void* alpha, const void* beta, gemm_shape& g) {
  handle_object* h = handle_of(handle);
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!transposed(transa, &g.trans_a) || !transposed(transb, &g.trans_b)) return CUBLAS_STATUS_INVALID_VALUE;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (resolve_stream(h->stream) == nullptr) return CUBLAS_STATUS_EXECUTION_FAILED;  // stream destroyed since
  if (cublasStatus_t s = check_gemm(library, function, g); s != CUBLAS_STATUS_SUCCESS) return s;
  if (g.m > 0 && g.n > 0 && g.batch > 0) launched();
  return CUBLAS_STATUS_SUCCESS;
}

gemm_shape shape(int m, int n, int k, const void* a, int lda, const void* b, int ldb, const void* c, int ldc,
                 std::size_t ab_bytes, std::size_t c_bytes) {
  gemm_shape g;
  g.m = m, g.n = n, g.k = k;
  g.a = a, g.lda = lda, g.b = b, g.ldb = ldb, g.c = c, g.ldc = ldc;
  g.bytes_a = g.bytes_b = ab_bytes;
  g.bytes_c = c_bytes;
  return g;
}

/// cublas[SD]gemmStridedBatched: one element type for every operand.
template <typename T>
cublasStatus_t typed_strided_batched(const char* function, cublasHandle_t handle, cublasOperation_t transa,
                                     cublasOperation_t transb, int m, int n, int k, const T* alpha, const T* a, int lda,
                                     long long stride_a, const T* b, int ldb, long long stride_b, const T* beta, T* c,
                                     int ldc, long long stride_c, int batch) {
  gemm_shape g = shape(m, n, k, a, lda, b, ldb, c, ldc, sizeof(T), sizeof(T));
  g.batch = batch, g.stride_a = stride_a, g.stride_b = stride_b, g.stride_c = stride_c;
  return gemm(function, handle, transa, transb, alpha, beta, g);
}

bool known_compute(cublasComputeType_t compute) {
  switch (compute) {
    case CUBLAS_COMPUTE_16F: case CUBLAS_COMPUTE_16F_PEDANTIC: case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC: case CUBLAS_COMPUTE_32F_FAST_16F: case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32: case CUBLAS_COMPUTE_64F: case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_32I: case CUBLAS_COMPUTE_32I_PEDANTIC:
      return true;
    default:
      return false;
  }
}

}  // namespace

extern "C" {

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float* alpha, const float* a, int lda, const float* b, int ldb,
                              const float* beta, float* c, int ldc) {
  gemm_shape g = shape(m, n, k, a, lda, b, ldb, c, ldc, 4, 4);
  return gemm("cublasSgemm_v2", handle, transa, transb, alpha, beta, g);
}

cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const double* alpha, const double* a, int lda, const double* b, int ldb,
                              const double* beta, double* c, int ldc) {
  gemm_shape g = shape(m, n, k, a, lda, b, ldb, c, ldc, 8, 8);
  return gemm("cublasDgemm_v2", handle, transa, transb, alpha, beta, g);
}

cublasStatus_t cublasSgemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                             int k, const float* alpha, const void* a, cudaDataType a_type, int lda, const void* b,
                             cudaDataType b_type, int ldb, const float* beta, void* c, cudaDataType c_type, int ldc) {
  gemm_shape g = shape(m, n, k, a, lda, b, ldb, c, ldc, 0, 0);
  g.bytes_a = element_bytes(a_type), g.bytes_b = element_bytes(b_type), g.bytes_c = element_bytes(c_type);
  if (!g.bytes_a || !g.bytes_b || !g.bytes_c)
    return static_cast<cublasStatus_t>(unsupported(library, "cublasSgemmEx", "a data type the simulator does not know",
                                                   CUBLAS_STATUS_NOT_SUPPORTED));
  return gemm("cublasSgemmEx", handle, transa, transb, alpha, beta, g);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b,
                            cudaDataType b_type, int ldb, const void* beta, void* c, cudaDataType c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  gemm_shape g = shape(m, n, k, a, lda, b, ldb, c, ldc, 0, 0);
  g.bytes_a = element_bytes(a_type), g.bytes_b = element_bytes(b_type), g.bytes_c = element_bytes(c_type);
  if (!g.bytes_a || !g.bytes_b || !g.bytes_c || !known_compute(compute))
    return static_cast<cublasStatus_t>(unsupported(library, "cublasGemmEx", "a data or compute type the simulator does not know",
                                                   CUBLAS_STATUS_NOT_SUPPORTED));
  return gemm("cublasGemmEx", handle, transa, transb, alpha, beta, g);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* a, cudaDataType a_type,
                                          int lda, long long stride_a, const void* b, cudaDataType b_type, int ldb,
                                          long long stride_b, const void* beta, void* c, cudaDataType c_type, int ldc,
                                          long long stride_c, int batch, cublasComputeType_t compute,
                                          cublasGemmAlgo_t) {
  gemm_shape g = shape(m, n, k, a, lda, b, ldb, c, ldc, 0, 0);
  g.bytes_a = element_bytes(a_type), g.bytes_b = element_bytes(b_type), g.bytes_c = element_bytes(c_type);
  g.batch = batch, g.stride_a = stride_a, g.stride_b = stride_b, g.stride_c = stride_c;
  if (!g.bytes_a || !g.bytes_b || !g.bytes_c || !known_compute(compute))
    return static_cast<cublasStatus_t>(unsupported(library, "cublasGemmStridedBatchedEx",
                                                   "a data or compute type the simulator does not know",
                                                   CUBLAS_STATUS_NOT_SUPPORTED));
  return gemm("cublasGemmStridedBatchedEx", handle, transa, transb, alpha, beta, g);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float* alpha, const float* a, int lda,
                                         long long stride_a, const float* b, int ldb, long long stride_b,
                                         const float* beta, float* c, int ldc, long long stride_c, int batch) {
  return typed_strided_batched("cublasSgemmStridedBatched", handle, transa, transb, m, n, k, alpha, a, lda, stride_a,
                               b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const double* alpha, const double* a, int lda,
                                         long long stride_a, const double* b, int ldb, long long stride_b,
                                         const double* beta, double* c, int ldc, long long stride_c, int batch) {
  return typed_strided_batched("cublasDgemmStridedBatched", handle, transa, transb, m, n, k, alpha, a, lda, stride_a,
                               b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}

}  // extern "C"
