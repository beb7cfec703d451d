// Library objects the stand-ins share (cuBLAS handles, cuBLASLt descriptors, ...).
// Part of simcuda's core API (core.hpp gathers it, with the glossary).
#pragma once

#include "simcuda/diagnostics.hpp"

namespace simcuda {

// ---------------------------------------------------------------------------------------------
// Library objects (cuBLAS handles, cuBLASLt descriptors, ...): a registry shared by the stand-ins,
// so a handle one library made is recognised by another (PyTorch hands its cublasHandle_t to
// cuBLASLt) and a destroyed or foreign pointer is an error value, never dereferenced.
// ---------------------------------------------------------------------------------------------

enum class object_kind { blas_handle, lt_matmul_desc, lt_matrix_layout, lt_preference };

void register_object(const void* object, object_kind kind) noexcept;
/// True when `object` is live and of `kind`.
bool is_object(const void* object, object_kind kind) noexcept;
/// Removes it; false when it was not live and of `kind`.
bool unregister_object(const void* object, object_kind kind) noexcept;

}  // namespace simcuda
