// The C ABI of libnccl.so.2 that the stand-in implements: the handle, enum and struct layouts of
// NCCL's public header (nccl.h, 2.28 and later), declared here so that the simulator builds
// without an NCCL installation. Only what the emulation reads is declared; the values are NCCL's.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef struct ncclComm* ncclComm_t;

#define SIMCUDA_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[SIMCUDA_NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,  ///< the first handle ncclRedOpCreatePreMulSum hands out
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/// The leading fields of ncclConfig_t, identical in every NCCL since 2.14: later versions append
/// fields, which the emulation does not read (it reads `blocking` only after checking `size`).
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
} simcuda_nccl_config_head;

/// ncclCommMemStats's statistics (NCCL 2.29.7+).
typedef enum {
  ncclStatGpuMemTotal = 0,
  ncclStatGpuMemPersist = 1,
  ncclStatGpuMemSuspend = 2,
  ncclStatGpuMemSuspended = 3
} ncclCommMemStat_t;

#define SIMCUDA_NCCL_CONFIG_MAGIC 0xcafebeefu
#define SIMCUDA_NCCL_SPLIT_NOCOLOR (-1)
#define SIMCUDA_NCCL_SUSPEND_MEM 0x01

}  // extern "C"
