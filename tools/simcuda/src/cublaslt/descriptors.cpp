// cuBLASLt descriptors: create, set and get attributes (checked against each attribute's size),
// destroy. An unknown attribute or a wrong size is CUBLAS_STATUS_INVALID_VALUE, as in cuBLASLt.
#include "lt.hpp"

using namespace simcuda;
using namespace simcuda::lt;

namespace simcuda::lt {

std::size_t desc_attribute_bytes(int id) noexcept {
  switch (id) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: case CUBLASLT_MATMUL_DESC_TRANSA: case CUBLASLT_MATMUL_DESC_TRANSB:
    case CUBLASLT_MATMUL_DESC_TRANSC: case CUBLASLT_MATMUL_DESC_FILL_MODE: case CUBLASLT_MATMUL_DESC_EPILOGUE:
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: case CUBLASLT_MATMUL_DESC_A_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE: case CUBLASLT_MATMUL_DESC_C_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_D_SCALE_MODE: case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE:
      return 4;
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM:
      return 1;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER: case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE:
    case CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR:
      return 8;
    default:
      return 0;
  }
}

std::size_t layout_attribute_bytes(int id) noexcept {
  switch (id) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: case CUBLASLT_MATRIX_LAYOUT_ORDER: case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE:
      return 4;
    case CUBLASLT_MATRIX_LAYOUT_ROWS: case CUBLASLT_MATRIX_LAYOUT_COLS: case CUBLASLT_MATRIX_LAYOUT_LD:
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET:
      return 8;
    default:
      return 0;
  }
}

std::size_t preference_attribute_bytes(int id) noexcept {
  switch (id) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT:
      return 4;
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: case CUBLASLT_MATMUL_PREF_IMPL_MASK:
      return 8;
    default:
      return 0;
  }
}

}  // namespace simcuda::lt

namespace {

cublasStatus_t set(attributes& attrs, std::size_t expected, int id, const void* buffer, std::size_t bytes) {
  if (expected == 0 || buffer == nullptr || bytes != expected) return CUBLAS_STATUS_INVALID_VALUE;
  const auto* p = static_cast<const std::uint8_t*>(buffer);
  attrs.values[id].assign(p, p + bytes);
  return CUBLAS_STATUS_SUCCESS;
}

matmul_desc* desc_of(cublasLtMatmulDesc_t d) {
  return is_object(d, object_kind::lt_matmul_desc) ? reinterpret_cast<matmul_desc*>(d) : nullptr;
}

matrix_layout* layout_of(cublasLtMatrixLayout_t l) {
  return is_object(l, object_kind::lt_matrix_layout) ? reinterpret_cast<matrix_layout*>(l) : nullptr;
}

preference* preference_of(cublasLtMatmulPreference_t p) {
  return is_object(p, object_kind::lt_preference) ? reinterpret_cast<preference*>(p) : nullptr;
}

}  // namespace

extern "C" {

size_t cublasLtGetVersion(void) { return 130200; }  // cuBLASLt 13.2, as the wheel was built against

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* out, cublasComputeType_t compute, cudaDataType_t scale) {
  if (out == nullptr || blas::element_bytes(scale) == 0) return CUBLAS_STATUS_INVALID_VALUE;
  auto* d = new matmul_desc;
  d->compute = compute;
  d->scale = scale;
  register_object(d, object_kind::lt_matmul_desc);
  *out = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  matmul_desc* d = desc_of(desc);
  if (d == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  unregister_object(d, object_kind::lt_matmul_desc);
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buffer, size_t bytes) {
  matmul_desc* d = desc_of(desc);
  if (d == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return set(d->attrs, desc_attribute_bytes(attr), attr, buffer, bytes);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              void* buffer, size_t bytes, size_t* written) {
  matmul_desc* d = desc_of(desc);
  const std::size_t expected = desc_attribute_bytes(attr);
  if (d == nullptr || expected == 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (written) *written = expected;
  if (bytes == 0 && written) return CUBLAS_STATUS_SUCCESS;  // a size query
  if (buffer == nullptr || bytes < expected) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(buffer, 0, expected);
  auto it = d->attrs.values.find(attr);
  if (attr == CUBLASLT_MATMUL_DESC_COMPUTE_TYPE) std::memcpy(buffer, &d->compute, 4);
  else if (attr == CUBLASLT_MATMUL_DESC_SCALE_TYPE) std::memcpy(buffer, &d->scale, 4);
  else if (it != d->attrs.values.end()) std::memcpy(buffer, it->second.data(), expected);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* out, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  if (out == nullptr || blas::element_bytes(type) == 0 || ld < 0) return CUBLAS_STATUS_INVALID_VALUE;
  auto* l = new matrix_layout;
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  register_object(l, object_kind::lt_matrix_layout);
  *out = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  matrix_layout* l = layout_of(layout);
  if (l == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  unregister_object(l, object_kind::lt_matrix_layout);
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buffer, size_t bytes) {
  matrix_layout* l = layout_of(layout);
  if (l == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t s = set(l->attrs, layout_attribute_bytes(attr), attr, buffer, bytes);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (attr == CUBLASLT_MATRIX_LAYOUT_TYPE) l->type = l->attrs.get<cudaDataType>(attr, l->type);
  if (attr == CUBLASLT_MATRIX_LAYOUT_ROWS) l->rows = l->attrs.get<std::uint64_t>(attr, l->rows);
  if (attr == CUBLASLT_MATRIX_LAYOUT_COLS) l->cols = l->attrs.get<std::uint64_t>(attr, l->cols);
  if (attr == CUBLASLT_MATRIX_LAYOUT_LD) l->ld = l->attrs.get<std::int64_t>(attr, l->ld);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* out) {
  if (out == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* p = new preference;
  register_object(p, object_kind::lt_preference);
  *out = reinterpret_cast<cublasLtMatmulPreference_t>(p);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  preference* p = preference_of(pref);
  if (p == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  unregister_object(p, object_kind::lt_preference);
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buffer,
                                                    size_t bytes) {
  preference* p = preference_of(pref);
  if (p == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return set(p->attrs, preference_attribute_bytes(attr), attr, buffer, bytes);
}

}  // extern "C"
