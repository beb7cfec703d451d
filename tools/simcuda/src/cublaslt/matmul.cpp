// cublasLtMatmul and the algorithm queries around it: every descriptor and operand checked,
// then one skipped kernel (Note [simulated BLAS] in ../cublas/blas.hpp).
//
// The heuristic answers one algorithm that needs no workspace: nothing runs, so no workspace is
// needed, and a caller that sized its workspace from the heuristic gets the least it could.
#include "lt.hpp"

using namespace simcuda;
using namespace simcuda::lt;

namespace {

matmul_desc* desc_of(cublasLtMatmulDesc_t d) {
  return is_object(d, object_kind::lt_matmul_desc) ? reinterpret_cast<matmul_desc*>(d) : nullptr;
}

matrix_layout* layout_of(cublasLtMatrixLayout_t l) {
  return is_object(l, object_kind::lt_matrix_layout) ? reinterpret_cast<matrix_layout*>(l) : nullptr;
}

/// Checks the descriptors of one matmul and fills its shape (pointers left to the caller).
cublasStatus_t shape_of(const char* function, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_desc,
                        cublasLtMatrixLayout_t b_desc, cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                        blas::gemm_shape& g) {
  matmul_desc* d = desc_of(desc);
  matrix_layout *la = layout_of(a_desc), *lb = layout_of(b_desc), *lc = layout_of(c_desc), *ld = layout_of(d_desc);
  if (d == nullptr || la == nullptr || lb == nullptr || lc == nullptr || ld == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  for (matrix_layout* l : {la, lb, lc, ld}) {
    if (l->attrs.get<std::int32_t>(CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_COL) != CUBLASLT_ORDER_COL)
      return static_cast<cublasStatus_t>(unsupported(library, function, "only column-major layouts are simulated",
                                                     CUBLAS_STATUS_NOT_SUPPORTED));
  }
  if (!blas::transposed(d->attrs.get<cublasOperation_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N), &g.trans_a) ||
      !blas::transposed(d->attrs.get<cublasOperation_t>(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N), &g.trans_b))
    return CUBLAS_STATUS_INVALID_VALUE;
  g.m = static_cast<std::int64_t>(ld->rows);
  g.n = static_cast<std::int64_t>(ld->cols);
  g.k = static_cast<std::int64_t>(g.trans_a ? la->rows : la->cols);
  const std::uint64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  const std::uint64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  if (la->rows != a_rows || la->cols != a_cols || lb->rows != b_rows || lb->cols != b_cols ||
      lc->rows != ld->rows || lc->cols != ld->cols)
    return CUBLAS_STATUS_INVALID_VALUE;  // shapes that do not multiply
  g.lda = la->ld, g.ldb = lb->ld, g.ldc = lc->ld, g.ldd = ld->ld;
  g.bytes_a = blas::element_bytes(la->type), g.bytes_b = blas::element_bytes(lb->type);
  g.bytes_c = blas::element_bytes(lc->type), g.bytes_d = blas::element_bytes(ld->type);
  g.batch = ld->attrs.get<std::int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
  for (matrix_layout* l : {la, lb, lc})
    if (l->attrs.get<std::int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1) != g.batch) return CUBLAS_STATUS_INVALID_VALUE;
  g.stride_a = la->attrs.get<std::int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 0);
  g.stride_b = lb->attrs.get<std::int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 0);
  g.stride_c = lc->attrs.get<std::int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 0);
  g.stride_d = ld->attrs.get<std::int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 0);
  return CUBLAS_STATUS_SUCCESS;
}

void fill_algo(cublasLtMatmulAlgo_t* algo, int id) {
  std::memset(algo, 0, sizeof *algo);
  algo->data[0] = algo_marker;
  algo->data[1] = static_cast<std::uint64_t>(id);
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                              cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  if (blas::handle_of(handle) == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!is_object(pref, object_kind::lt_preference) || requested <= 0 || results == nullptr || returned == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  blas::gemm_shape g;
  if (cublasStatus_t s = shape_of("cublasLtMatmulAlgoGetHeuristic", desc, a_desc, b_desc, c_desc, d_desc, g);
      s != CUBLAS_STATUS_SUCCESS)
    return s;
  std::memset(&results[0], 0, sizeof results[0]);
  fill_algo(&results[0].algo, 0);
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoInit(cublasLtHandle_t handle, cublasComputeType_t, cudaDataType_t, cudaDataType_t,
                                      cudaDataType_t, cudaDataType_t, cudaDataType_t, int id,
                                      cublasLtMatmulAlgo_t* algo) {
  if (blas::handle_of(handle) == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (algo == nullptr || id < 0) return CUBLAS_STATUS_INVALID_VALUE;
  fill_algo(algo, id);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                       cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                       cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                       const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result) {
  if (blas::handle_of(handle) == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (algo == nullptr || result == nullptr || algo->data[0] != algo_marker) return CUBLAS_STATUS_INVALID_VALUE;
  blas::gemm_shape g;
  if (cublasStatus_t s = shape_of("cublasLtMatmulAlgoCheck", desc, a_desc, b_desc, c_desc, d_desc, g);
      s != CUBLAS_STATUS_SUCCESS)
    return s;
  std::memset(result, 0, sizeof *result);
  result->algo = *algo;
  result->state = CUBLAS_STATUS_SUCCESS;
  result->wavesCount = 1.0f;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_desc, void* d,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  static constexpr const char* function = "cublasLtMatmul";
  if (blas::handle_of(handle) == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (algo != nullptr && algo->data[0] != algo_marker) return CUBLAS_STATUS_INVALID_VALUE;  // not one we gave
  if (resolve_stream(stream) == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  blas::gemm_shape g;
  if (cublasStatus_t s = shape_of(function, desc, a_desc, b_desc, c_desc, d_desc, g); s != CUBLAS_STATUS_SUCCESS)
    return s;
  g.a = a, g.b = b, g.c = c, g.d = d;
  if (c == nullptr) g.c = d;  // C may alias D; a null C with beta == 0 reads nothing, D is checked
  if (cublasStatus_t s = blas::check_gemm(library, function, g); s != CUBLAS_STATUS_SUCCESS) return s;
  const matmul_desc* md = reinterpret_cast<const matmul_desc*>(desc);
  const auto epilogue = md->attrs.get<std::uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT);
  if (epilogue & CUBLASLT_EPILOGUE_BIAS) {  // a bias vector of m elements (n for BGRADB)
    const void* bias = md->attrs.get<const void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr);
    const auto bias_type = md->attrs.get<cudaDataType>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                       reinterpret_cast<const matrix_layout*>(d_desc)->type);
    const std::int64_t length = epilogue == CUBLASLT_EPILOGUE_BGRADB ? g.n : g.m;
    if (!blas::operand_ok(library, function, "bias", bias, static_cast<std::uint64_t>(length),
                          blas::element_bytes(bias_type)))
      return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  if (workspace_bytes > 0 && !blas::operand_ok(library, function, "workspace", workspace, workspace_bytes, 1))
    return CUBLAS_STATUS_EXECUTION_FAILED;
  if (g.m > 0 && g.n > 0 && g.batch > 0) blas::launched();
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
