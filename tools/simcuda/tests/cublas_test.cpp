// The cuBLAS and cuBLASLt stand-ins: handles, workspaces, and GEMMs that are checked like
// cuBLAS checks them (shapes, leading dimensions) and then some (every operand inside
// accessible device memory), counted as one skipped kernel each.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "simcuda/introspect.h"

namespace {

std::uint64_t launches() {
  simcuda_counters c{};
  simcuda_get_counters(&c, sizeof c);
  return c.kernel_launches;
}

class simcuda_blas : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv("SIMCUDA_GPU", "quiet:1,memory:1GiB", 1); }
  void SetUp() override {
    ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaMalloc(&a_, 64 * 32 * 4), cudaSuccess);  // 64 x 32 fp32
    ASSERT_EQ(cudaMalloc(&b_, 32 * 16 * 4), cudaSuccess);  // 32 x 16
    ASSERT_EQ(cudaMalloc(&c_, 64 * 16 * 4), cudaSuccess);  // 64 x 16
  }
  void TearDown() override {
    cudaFree(a_), cudaFree(b_), cudaFree(c_);
    if (handle_) cublasDestroy(handle_);
  }
  cublasHandle_t handle_ = nullptr;
  void *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  float one_ = 1, zero_ = 0;
};

TEST_F(simcuda_blas, HandlesAreCheckedAndADestroyedOneIsRefused) {
  cublasHandle_t other = nullptr;
  ASSERT_EQ(cublasCreate(&other), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasDestroy(other), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasDestroy(other), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasSetMathMode(other, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_NOT_INITIALIZED);
  int on_stack = 0;
  EXPECT_EQ(cublasSetStream(reinterpret_cast<cublasHandle_t>(&on_stack), nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  EXPECT_EQ(cublasSetStream(handle_, s), CUBLAS_STATUS_SUCCESS);
  cudaStream_t got = nullptr;
  EXPECT_EQ(cublasGetStream(handle_, &got), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, s);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cublasSetStream(handle_, s), CUBLAS_STATUS_INVALID_VALUE);  // destroyed stream
}

TEST_F(simcuda_blas, AWorkspaceMustBeDeviceMemory) {
  void* w = nullptr;
  ASSERT_EQ(cudaMalloc(&w, 1 << 20), cudaSuccess);
  EXPECT_EQ(cublasSetWorkspace(handle_, w, 1 << 20), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetWorkspace(handle_, w, 4 << 20), CUBLAS_STATUS_INVALID_VALUE);  // past its end
  char host[256];
  EXPECT_EQ(cublasSetWorkspace(handle_, host, sizeof host), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetWorkspace(handle_, nullptr, 0), CUBLAS_STATUS_SUCCESS);
  cudaFree(w);
}

TEST_F(simcuda_blas, AValidGemmIsOneSkippedLaunch) {
  const auto before = launches();
  EXPECT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 64, 16, 32, &one_, static_cast<float*>(a_), 64,
                        static_cast<float*>(b_), 32, &zero_, static_cast<float*>(c_), 64),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 32, 16, 64, &one_, a_, CUDA_R_32F, 64, c_, CUDA_R_32F, 64,
                         &zero_, b_, CUDA_R_32F, 32, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  // Two batches of 32 x 8 x 16 in fp32, strided through the same buffers.
  EXPECT_EQ(cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 32, 8, 16, &one_, a_, CUDA_R_32F, 32, 32 * 16,
                                       b_, CUDA_R_32F, 16, 16 * 8, &zero_, c_, CUDA_R_32F, 32, 32 * 8, 2,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  // The same in cublasSgemmStridedBatched (what torch 2.11-2.14 call for a float bmm).
  EXPECT_EQ(cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 32, 8, 16, &one_, static_cast<float*>(a_), 32,
                                      32 * 16, static_cast<float*>(b_), 16, 16 * 8, &zero_, static_cast<float*>(c_), 32,
                                      32 * 8, 2),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(launches(), before + 4);
  // Batches strided past the end of C's allocation (checked at 2 MiB page granularity) are refused.
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 32, 8, 16, &one_, static_cast<float*>(a_), 32,
                                      0, static_cast<float*>(b_), 16, 0, &zero_, static_cast<float*>(c_), 32,
                                      32 * 8, 3000),
            CUBLAS_STATUS_EXECUTION_FAILED);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("operand C"), std::string::npos);
  // m == 0: nothing to do, nothing launched.
  EXPECT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 0, 16, 32, &one_, nullptr, 1, nullptr, 32, &zero_, nullptr, 1),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(launches(), before + 4);
}

TEST_F(simcuda_blas, BadShapesAndOperandsAreRefused) {
  auto sgemm = [&](int m, int n, int k, void* a, int lda, void* b, int ldb, void* c, int ldc) {
    return cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one_, static_cast<float*>(a), lda,
                       static_cast<float*>(b), ldb, &zero_, static_cast<float*>(c), ldc);
  };
  EXPECT_EQ(sgemm(64, 16, 32, a_, 63, b_, 32, c_, 64), CUBLAS_STATUS_INVALID_VALUE);  // lda < m
  EXPECT_EQ(sgemm(-1, 16, 32, a_, 64, b_, 32, c_, 64), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSgemm(handle_, static_cast<cublasOperation_t>(7), CUBLAS_OP_N, 64, 16, 32, &one_,
                        static_cast<float*>(a_), 64, static_cast<float*>(b_), 32, &zero_, static_cast<float*>(c_), 64),
            CUBLAS_STATUS_INVALID_VALUE);
  // Checks are at allocation granularity (whole 2 MiB pages): B ends exactly where its allocation does.
  void* page = nullptr;
  ASSERT_EQ(cudaMalloc(&page, 2 << 20), cudaSuccess);
  void* b_at_end = static_cast<char*>(page) + (2 << 20) - 32 * 16 * 4;
  EXPECT_EQ(sgemm(64, 16, 32, a_, 64, b_at_end, 32, c_, 64), CUBLAS_STATUS_SUCCESS);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(sgemm(64, 17, 32, a_, 64, b_at_end, 32, c_, 64), CUBLAS_STATUS_EXECUTION_FAILED);  // one column more
  std::string said = ::testing::internal::GetCapturedStderr();
  cudaFree(page);
  EXPECT_NE(said.find("cublasSgemm_v2: operand B"), std::string::npos) << said;
  void* freed = nullptr;
  ASSERT_EQ(cudaMalloc(&freed, 64 * 32 * 4), cudaSuccess);
  ASSERT_EQ(cudaFree(freed), cudaSuccess);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(sgemm(64, 16, 32, freed, 64, b_, 32, c_, 64), CUBLAS_STATUS_EXECUTION_FAILED);  // use after free
  said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("operand A"), std::string::npos) << said;
}

TEST_F(simcuda_blas, LtMatmulChecksItsDescriptorsAndTakesACublasHandle) {
  auto lt = reinterpret_cast<cublasLtHandle_t>(handle_);  // as PyTorch does
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  cublasOperation_t n = CUBLAS_OP_N;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &n, sizeof n), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &n, 2), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, static_cast<cublasLtMatmulDescAttributes_t>(9999), &n, 4),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  void* bias = nullptr;
  ASSERT_EQ(cudaMalloc(&bias, 64 * 4), cudaSuccess);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, bad = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 64, 32, 64), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 32, 16, 32), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 64, 16, 64), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&bad, CUDA_R_32F, 33, 16, 33), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &result, &returned), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(returned, 1);
  EXPECT_EQ(result.state, CUBLAS_STATUS_SUCCESS);
  const auto before = launches();
  EXPECT_EQ(cublasLtMatmul(lt, desc, &one_, a_, la, b_, lb, &zero_, c_, lc, c_, lc, &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(launches(), before + 1);
  // Shapes that do not multiply (B has 33 rows for k = 32).
  EXPECT_EQ(cublasLtMatmul(lt, desc, &one_, a_, la, b_, bad, &zero_, c_, lc, c_, lc, nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  // A bias vector shorter than m.
  void* short_bias = nullptr;
  ASSERT_EQ(cudaMalloc(&short_bias, 2 << 20), cudaSuccess);
  void* near_end = static_cast<char*>(short_bias) + (2 << 20) - 32 * 4;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &near_end, sizeof near_end),
            CUBLAS_STATUS_SUCCESS);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cublasLtMatmul(lt, desc, &one_, a_, la, b_, lb, &zero_, c_, lc, c_, lc, nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_EXECUTION_FAILED);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("operand bias"), std::string::npos);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(la), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(la), CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc), cublasLtMatrixLayoutDestroy(bad);
  cublasLtMatmulPreferenceDestroy(pref);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
  cudaFree(bias), cudaFree(short_bias);
}

}  // namespace
