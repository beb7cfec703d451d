// Modules, launches and TMA descriptors through the driver: what a JIT (Triton, inductor) and
// vLLM's compiled attention do. A function is found only if the image defines it, a launch is
// validated, counted and skipped, a stale handle is an error, a bad descriptor is refused.
#include <cuda.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "simcuda/introspect.h"

namespace {

const char* const kPtx =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry add_one(.param .u64 p)\n{\n  ret;\n}\n"
    ".visible .entry scale(.param .u64 p)\n{\n  ret;\n}\n";

/// A minimal ELF64 cubin: a null section, .symtab with one defined STT_FUNC symbol, .strtab.
std::vector<unsigned char> tiny_cubin(const std::string& kernel) {
  const std::string strtab = std::string("\0", 1) + kernel + std::string("\0", 1);
  const std::size_t symtab_off = 64, symtab_size = 2 * 24;
  const std::size_t strtab_off = symtab_off + symtab_size;
  const std::size_t shoff = (strtab_off + strtab.size() + 7) & ~std::size_t{7};
  std::vector<unsigned char> elf(shoff + 3 * 64, 0);
  auto put16 = [&](std::size_t at, std::uint16_t v) { std::memcpy(&elf[at], &v, 2); };
  auto put32 = [&](std::size_t at, std::uint32_t v) { std::memcpy(&elf[at], &v, 4); };
  auto put64 = [&](std::size_t at, std::uint64_t v) { std::memcpy(&elf[at], &v, 8); };
  std::memcpy(&elf[0], "\x7f" "ELF", 4);
  elf[4] = 2;  // ELFCLASS64
  elf[5] = 1;  // little-endian
  put64(0x28, shoff);
  put16(0x3a, 64);
  put16(0x3c, 3);
  const std::size_t sym = symtab_off + 24;  // entry 1 (entry 0 is the null symbol)
  put32(sym, 1);                            // name: offset 1 in .strtab
  elf[sym + 4] = (1 << 4) | 2;              // STB_GLOBAL, STT_FUNC
  put16(sym + 6, 1);                        // defined in some section
  std::memcpy(&elf[strtab_off], strtab.data(), strtab.size());
  const std::size_t sh1 = shoff + 64, sh2 = shoff + 128;
  put32(sh1 + 4, 2);  // SHT_SYMTAB
  put64(sh1 + 0x18, symtab_off);
  put64(sh1 + 0x20, symtab_size);
  put32(sh1 + 0x28, 2);  // linked string table: section 2
  put64(sh1 + 0x38, 24);
  put32(sh2 + 4, 3);  // SHT_STRTAB
  put64(sh2 + 0x18, strtab_off);
  put64(sh2 + 0x20, strtab.size());
  return elf;
}

std::uint64_t launches() {
  simcuda_counters c{};
  EXPECT_EQ(simcuda_get_counters(&c, sizeof c), 0);
  return c.kernel_launches;
}

class simcuda_modules : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("SIMCUDA_GPU", "quiet:1", 1);
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  }
};

TEST_F(simcuda_modules, PtxEntriesAreTheModulesFunctionsAndALaunchIsCountedNotRun) {
  CUmodule module = nullptr;
  ASSERT_EQ(cuModuleLoadData(&module, kPtx), CUDA_SUCCESS);
  CUfunction f = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&f, module, "scale"), CUDA_SUCCESS);
  CUfunction missing = nullptr;
  EXPECT_EQ(cuModuleGetFunction(&missing, module, "not_there"), CUDA_ERROR_NOT_FOUND);
  const char* name = nullptr;
  ASSERT_EQ(cuFuncGetName(&name, f), CUDA_SUCCESS);
  EXPECT_STREQ(name, "scale");
  const std::uint64_t before = launches();
  EXPECT_EQ(cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(launches(), before + 1);
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(launches(), before + 1);
  ASSERT_EQ(cuModuleUnload(module), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(simcuda_modules, DynamicSharedMemoryBeyond48KiBNeedsTheAttribute) {
  CUmodule module = nullptr;
  ASSERT_EQ(cuModuleLoadData(&module, kPtx), CUDA_SUCCESS);
  CUfunction f = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&f, module, "add_one"), CUDA_SUCCESS);
  const unsigned big = 100 << 10;
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, big, nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, big), CUDA_SUCCESS);
  int value = 0;
  ASSERT_EQ(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f), CUDA_SUCCESS);
  EXPECT_EQ(value, static_cast<int>(big));
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, big, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1 << 20), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuModuleUnload(module), CUDA_SUCCESS);
}

TEST_F(simcuda_modules, ACubinsFunctionsAreItsSymbolTablesAndALibraryKernelIsAFunction) {
  const std::vector<unsigned char> cubin = tiny_cubin("triton_poi_fused_add_0");
  CUlibrary library = nullptr;
  ASSERT_EQ(cuLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  CUkernel kernel = nullptr;
  ASSERT_EQ(cuLibraryGetKernel(&kernel, library, "triton_poi_fused_add_0"), CUDA_SUCCESS);
  EXPECT_EQ(cuLibraryGetKernel(&kernel, library, "triton_poi_fused_add_1"), CUDA_ERROR_NOT_FOUND);
  CUfunction f = nullptr;
  ASSERT_EQ(cuKernelGetFunction(&f, kernel), CUDA_SUCCESS);
  CUlaunchConfig config{};
  config.gridDimX = 3;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 64;
  config.blockDimY = config.blockDimZ = 1;
  CUlaunchAttribute cluster{};
  cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster.value.clusterDim.x = 2;
  cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  EXPECT_EQ(cuLaunchKernelEx(&config, f, nullptr, nullptr), CUDA_ERROR_INVALID_CLUSTER_SIZE);  // 3 % 2
  config.gridDimX = 4;
  EXPECT_EQ(cuLaunchKernelEx(&config, f, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuLibraryUnload(library), CUDA_SUCCESS);
}

TEST_F(simcuda_modules, AnImageOfNoKnownFormatIsRefusedWithItsReason) {
  const char garbage[] = "not a module";
  CUmodule module = nullptr;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cuModuleLoadData(&module, garbage), CUDA_ERROR_INVALID_IMAGE);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("neither a cubin, a fatbinary nor PTX"), std::string::npos) << said;
}

TEST_F(simcuda_modules, TmaDescriptorsFollowCudaHsRules) {
  alignas(64) CUtensorMap map{};
  alignas(16) static unsigned char tensor[64 * 128 * 2];
  const cuuint64_t dims[2] = {64, 128};
  const cuuint64_t strides[1] = {64 * 2};
  const cuuint32_t box[2] = {64, 32};
  const cuuint32_t element_strides[2] = {1, 1};
  EXPECT_EQ(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, tensor, dims, strides, box,
                                   element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_SUCCESS);
  EXPECT_EQ(cuTensorMapReplaceAddress(&map, tensor + 16), CUDA_SUCCESS);
  EXPECT_EQ(cuTensorMapReplaceAddress(&map, tensor + 8), CUDA_ERROR_INVALID_VALUE);  // not 16-byte aligned
  // The inner box (64 bf16 = 128 bytes) exceeds a 64-byte swizzle span.
  EXPECT_EQ(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, tensor, dims, strides, box,
                                   element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_64B,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_ERROR_INVALID_VALUE);
  const cuuint64_t odd_strides[1] = {100};  // not a multiple of 16
  EXPECT_EQ(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, tensor, dims, odd_strides, box,
                                   element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(simcuda_modules, ProcAddressGivesTheEmulatedVariantNotANewerStub) {
  void* function = nullptr;
  CUdriverProcAddressQueryResult found{};
  ASSERT_EQ(cuGetProcAddress("cuCtxSynchronize", &function, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &found),
            CUDA_SUCCESS);
  // cuCtxSynchronize_v2 (CUDA 13: takes a context) is exported as a generated stub only.
  EXPECT_EQ(function, reinterpret_cast<void*>(static_cast<CUresult (*)(void)>(&cuCtxSynchronize)));
  using sync_fn = CUresult (*)(void);
  EXPECT_EQ(reinterpret_cast<sync_fn>(function)(), CUDA_SUCCESS);
}

}  // namespace
