// Driver API: modules and libraries loaded from images (cuModuleLoad/LoadData, cuLibraryLoadData),
// their functions and kernels, function attributes, and launches through the driver
// (cuLaunchKernel, cuLaunchKernelEx): what a JIT such as Triton uses once its compiler (ptxas,
// which runs on the CPU) has produced a cubin.
//
// Rationale
//   A launch does not run (as everywhere in the simulator) but is validated, counted, and
//   recorded as a kernel node in a capture, exactly like a runtime launch; a function that the
//   image does not define, an unloaded module's function or an oversized launch fail with the
//   driver's codes.
// Approach
//   A module is an object holding the image's function names (module_image.hpp) and one function
//   object per name asked for; a library is a module, and a CUkernel is its function object
//   (cuKernelGetFunction returns it). Live handles are kept in sets, so a stale one is an error
//   value. Attributes answer what cudaFuncGetAttributes answers for nvcc's kernels.
// Limitations
//   Registers and static shared memory are defaults (32, 0), not the image's. Globals of a module
//   (cuModuleGetGlobal) are not provided (the stub line). Cluster launches are validated for the
//   grid being a multiple of the cluster; occupancy of clusters is not modelled.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "driver.hpp"
#include "module_image.hpp"

using namespace simcuda;
using namespace simcuda::drv;

namespace {

struct module_object;

struct function_object {
  module_object* owner = nullptr;
  std::string name;
  int max_dynamic_shared_bytes = 48 << 10;
};

struct module_object {
  module_image image;
  std::map<std::string, std::unique_ptr<function_object>> functions;  ///< those asked for
};

struct registry {
  std::mutex mu;
  std::set<module_object*> modules;
  std::set<const function_object*> functions;
};

registry& the_registry() {
  static registry* r = new registry;
  return *r;
}

CUresult load(const void* image, module_object** out, const char* caller) {
  if (out == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto m = std::make_unique<module_object>();
  std::string why;
  if (!read_module_image(image, &m->image, &why)) {
    unsupported(library, caller, ("the image is " + why).c_str(), CUDA_ERROR_INVALID_IMAGE);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  *out = m.release();
  r.modules.insert(*out);
  return CUDA_SUCCESS;
}

CUresult unload(module_object* m) {
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  if (r.modules.erase(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& [name, f] : m->functions) r.functions.erase(f.get());
  delete m;
  return CUDA_SUCCESS;
}

CUresult get_function(module_object* m, const char* name, function_object** out) {
  if (out == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  if (r.modules.count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (!std::binary_search(m->image.functions.begin(), m->image.functions.end(), std::string(name)))
    return CUDA_ERROR_NOT_FOUND;
  auto& slot = m->functions[name];
  if (!slot) {
    slot = std::make_unique<function_object>();
    slot->owner = m;
    slot->name = name;
    r.functions.insert(slot.get());
  }
  *out = slot.get();
  return CUDA_SUCCESS;
}

/// The function behind a handle, or nullptr when it is not a live one. The caller holds no lock:
/// a function is only destroyed by unloading its module, which a launch racing it makes
/// undefined on a GPU as well.
function_object* live_function(const void* handle) {
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  auto* f = static_cast<const function_object*>(handle);
  return r.functions.count(f) ? const_cast<function_object*>(f) : nullptr;
}

CUresult launch(function_object* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared_bytes, CUstream handle) {
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  stream* s = resolve_stream(handle);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (!launch_shape_valid(gx, gy, gz, bx, by, bz, shared_bytes, static_cast<std::size_t>(f->max_dynamic_shared_bytes)))
    return CUDA_ERROR_INVALID_VALUE;
  return from(launch_kernel(s, legacy_handle(handle), f));
}

}  // namespace

extern "C" {

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  return load(image, reinterpret_cast<module_object**>(module), "cuModuleLoadData");
}

CUresult cuModuleLoad(CUmodule* module, const char* path) {  // a cubin, fatbinary or PTX file
  if (path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::ifstream file(path, std::ios::binary);
  if (!file) return CUDA_ERROR_FILE_NOT_FOUND;
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  bytes.push_back('\0');  // PTX is read as text up to its terminating zero
  return load(bytes.data(), reinterpret_cast<module_object**>(module), "cuModuleLoad");
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int, CUjit_option*, void**) {
  // JIT options tune a PTX compilation the simulator does not run.
  return load(image, reinterpret_cast<module_object**>(module), "cuModuleLoadDataEx");
}

CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fat_cubin) {
  return load(fat_cubin, reinterpret_cast<module_object**>(module), "cuModuleLoadFatBinary");
}

CUresult cuModuleUnload(CUmodule module) { return unload(reinterpret_cast<module_object*>(module)); }

CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  return get_function(reinterpret_cast<module_object*>(module), name, reinterpret_cast<function_object**>(function));
}

CUresult cuLibraryLoadData(CUlibrary* lib, const void* code, CUjit_option*, void**, unsigned int, CUlibraryOption*,
                           void**, unsigned int) {
  return load(code, reinterpret_cast<module_object**>(lib), "cuLibraryLoadData");
}

CUresult cuLibraryUnload(CUlibrary lib) { return unload(reinterpret_cast<module_object*>(lib)); }

CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary lib, const char* name) {
  return get_function(reinterpret_cast<module_object*>(lib), name, reinterpret_cast<function_object**>(kernel));
}

CUresult cuLibraryGetModule(CUmodule* module, CUlibrary lib) {
  if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  if (r.modules.count(reinterpret_cast<module_object*>(lib)) == 0) return CUDA_ERROR_INVALID_HANDLE;
  *module = reinterpret_cast<CUmodule>(lib);
  return CUDA_SUCCESS;
}

CUresult cuKernelGetFunction(CUfunction* function, CUkernel kernel) {
  if (function == nullptr) return CUDA_ERROR_INVALID_VALUE;
  function_object* f = live_function(kernel);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *function = reinterpret_cast<CUfunction>(f);
  return CUDA_SUCCESS;
}

CUresult cuFuncGetName(const char** name, CUfunction function) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  function_object* f = live_function(function);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name.c_str();
  return CUDA_SUCCESS;
}

CUresult cuFuncGetModule(CUmodule* module, CUfunction function) {
  if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  function_object* f = live_function(function);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *module = reinterpret_cast<CUmodule>(f->owner);
  return CUDA_SUCCESS;
}

CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction function) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  function_object* f = live_function(function);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const gpu_spec& g = current_config().gpu;
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = g.max_threads_per_block; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *value = 0; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *value = g.cc_major * 10 + g.cc_minor; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *value = f->max_dynamic_shared_bytes; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *value = -1; break;
    default: return not_supported("cuFuncGetAttribute", "this function attribute is not modelled");
  }
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  function_object* f = live_function(function);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const gpu_spec& g = current_config().gpu;
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      if (value < 0 || static_cast<std::size_t>(value) > g.shared_memory_per_block_optin_bytes)
        return CUDA_ERROR_INVALID_VALUE;
      f->max_dynamic_shared_bytes = value;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      return value >= -1 && value <= 100 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: return CUDA_SUCCESS;  // scheduling hints
    default: return not_supported("cuFuncSetAttribute", "this function attribute is not modelled");
  }
}

CUresult cuKernelGetAttribute(int* value, CUfunction_attribute attribute, CUkernel kernel, CUdevice device) {
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  return cuFuncGetAttribute(value, attribute, reinterpret_cast<CUfunction>(kernel));
}

CUresult cuKernelSetAttribute(CUfunction_attribute attribute, int value, CUkernel kernel, CUdevice device) {
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  return cuFuncSetAttribute(reinterpret_cast<CUfunction>(kernel), attribute, value);
}

CUresult cuFuncSetCacheConfig(CUfunction function, CUfunc_cache config) {
  if (live_function(function) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return config >= CU_FUNC_CACHE_PREFER_NONE && config <= CU_FUNC_CACHE_PREFER_EQUAL ? CUDA_SUCCESS
                                                                                      : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuLaunchKernel(CUfunction function, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shared_bytes, CUstream stream, void**,
                        void**) {
  return launch(live_function(function), gx, gy, gz, bx, by, bz, shared_bytes, stream);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction function, void**, void**) {
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    if (a.id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) continue;  // the others are scheduling hints
    const auto& c = a.value.clusterDim;
    if (c.x == 0 || c.y == 0 || c.z == 0 || config->gridDimX % c.x || config->gridDimY % c.y || config->gridDimZ % c.z)
      return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  }
  return launch(live_function(function), config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                config->blockDimY, config->blockDimZ, config->sharedMemBytes, config->hStream);
}

}  // extern "C"
