// The kernels a module image defines: what cuModuleLoadData and cuLibraryLoadData read from the
// bytes they are given, so that asking for a function the image lacks fails as on a GPU.
//
// Rationale
//   The simulator runs no kernel, but a name that is not in the image is a real error
//   (CUDA_ERROR_NOT_FOUND) that a JIT (Triton) or a loader must see. The driver is given no
//   length with the image, so the format says where it ends, as it does for the real driver.
// Approach
//   Three formats are read. A cubin is an ELF64 file: its functions are the defined STT_FUNC
//   symbols of .symtab. PTX is text: its kernels are the `.entry NAME` directives (the real
//   driver would compile it; here nothing runs, so nothing is compiled). A fatbinary (what nvcc
//   embeds) is a header followed by entries, each a cubin or PTX; its kernels are the union.
// Limitations
//   Kernel attributes (registers, static shared memory) are not read from the image's .nv.info
//   sections; callers answer the same defaults as cudaFuncGetAttributes. Compressed fatbinary
//   entries are refused (CUDA_ERROR_INVALID_IMAGE with a line): their names cannot be read.
#pragma once

#include <string>
#include <vector>

namespace simcuda::drv {

enum class image_format { cubin, ptx, fatbinary };

struct module_image {
  image_format format = image_format::cubin;
  std::vector<std::string> functions;  ///< kernel and device-function names, sorted, unique
};

/// Reads the image at `data`. On failure returns false and says why in `*why`.
bool read_module_image(const void* data, module_image* out, std::string* why);

}  // namespace simcuda::drv
