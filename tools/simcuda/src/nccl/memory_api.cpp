// NCCL's memory entry points: ncclMemAlloc/ncclMemFree (device memory outside the framework's
// allocator), buffer registration, ncclCommSuspend/ncclCommResume/ncclCommMemStats (NCCL 2.29.7+),
// and the pre-multiply reduction operators.
#include <mutex>
#include <set>

#include "communicator.hpp"
#include "reduce.hpp"
#include "simcuda/core.hpp"
#include "status.hpp"

using namespace simcuda;
using namespace simcuda::nccl;

namespace {

std::mutex mem_alloc_mutex;
std::set<void*>& mem_allocations() {
  static auto* live = new std::set<void*>;
  return *live;
}

}  // namespace

extern "C" {

ncclResult_t ncclMemAlloc(void** pointer, size_t bytes) {
  if (pointer == nullptr) return fail(ncclInvalidArgument, "ncclMemAlloc", "ptr argument is NULL");
  *pointer = nullptr;
  if (bytes == 0) return ncclSuccess;  // NCCL: nothing to allocate, *ptr stays NULL
  int device = current_device();
  mark_device_active(device);
  mem_status s = device_malloc(device, bytes, pointer);
  if (s != mem_status::ok)
    return fail(ncclUnhandledCudaError, "ncclMemAlloc", "%zu bytes on device %d: %s", bytes, device, to_string(s));
  std::lock_guard<std::mutex> lock(mem_alloc_mutex);
  mem_allocations().insert(*pointer);
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void* pointer) {
  if (pointer == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(mem_alloc_mutex);
    if (mem_allocations().erase(pointer) == 0)
      return fail(ncclUnhandledCudaError, "ncclMemFree", "%p was not returned by ncclMemAlloc (or was freed already)",
                  pointer);
  }
  synchronize_device(-1);
  device_free(pointer);
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buffer, size_t bytes, void** handle) {
  const char* function = "ncclCommRegister";
  if (ncclResult_t r = check_comm(comm, function); r != ncclSuccess) return r;
  if (handle == nullptr) return fail(ncclInvalidArgument, function, "handle argument is NULL");
  if (buffer == nullptr || bytes == 0 || !device_range_accessible(buffer, bytes))
    return fail(ncclInvalidArgument, function, "buffer %p + %zu bytes is not live device memory", buffer, bytes);
  std::uintptr_t id = comm->next_registration++;
  comm->registrations[id] = {buffer, bytes};
  *handle = reinterpret_cast<void*>(id);
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  const char* function = "ncclCommDeregister";
  if (ncclResult_t r = check_comm(comm, function); r != ncclSuccess) return r;
  if (comm->registrations.erase(reinterpret_cast<std::uintptr_t>(handle)) == 0)
    return fail(ncclInvalidArgument, function, "handle %p is not a registration of this communicator", handle);
  return ncclSuccess;
}

ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  const char* function = "ncclCommSuspend";
  if (ncclResult_t r = check_comm(comm, function); r != ncclSuccess) return r;
  if ((flags & ~SIMCUDA_NCCL_SUSPEND_MEM) != 0)
    return fail(ncclInvalidArgument, function, "unknown flags %#x (NCCL_SUSPEND_MEM is %#x)", flags,
                SIMCUDA_NCCL_SUSPEND_MEM);
  if ((flags & SIMCUDA_NCCL_SUSPEND_MEM) != 0) {
    synchronize_device(comm->device);
    comm->memory->suspend();
  }
  return ncclSuccess;
}

ncclResult_t ncclCommResume(ncclComm_t comm) {
  const char* function = "ncclCommResume";
  if (ncclResult_t r = check_comm(comm, function); r != ncclSuccess) return r;
  if (!comm->memory->resume())
    return fail(ncclUnhandledCudaError, function, "out of memory on device %d restoring %zu bytes of buffers",
                comm->device, comm->memory->connected_bytes());
  return ncclSuccess;
}

ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  const char* function = "ncclCommMemStats";
  if (ncclResult_t r = check_comm(comm, function); r != ncclSuccess) return r;
  if (value == nullptr) return fail(ncclInvalidArgument, function, "value argument is NULL");
  switch (stat) {
    case ncclStatGpuMemTotal:
      *value = comm->memory->held_bytes();
      return ncclSuccess;
    case ncclStatGpuMemPersist:
      *value = 0;
      return ncclSuccess;  // every modelled buffer can be suspended
    case ncclStatGpuMemSuspend:
      *value = comm->memory->held_bytes();
      return ncclSuccess;
    case ncclStatGpuMemSuspended:
      *value = comm->memory->suspended() ? 1 : 0;
      return ncclSuccess;
  }
  return fail(ncclInvalidArgument, function, "unknown statistic %d", static_cast<int>(stat));
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* function = "ncclRedOpCreatePreMulSum";
  if (ncclResult_t r = check_comm(comm, function); r != ncclSuccess) return r;
  if (op == nullptr || scalar == nullptr) return fail(ncclInvalidArgument, function, "op or scalar argument is NULL");
  if (element_bytes(type) == 0)
    return fail(ncclInvalidArgument, function, "invalid data type %d", static_cast<int>(type));
  ncclComm::premul_op made;
  made.live = true;
  made.type = type;
  if (residence == ncclScalarDevice) {
    if (!device_range_accessible(scalar, element_bytes(type)))
      return fail(ncclInvalidArgument, function, "device scalar %p is not live device memory", scalar);
    made.on_device = true;
    made.device_scalar = scalar;
  } else if (residence == ncclScalarHostImmediate) {
    made.scalar = load_scalar(scalar, type);
  } else {
    return fail(ncclInvalidArgument, function, "invalid scalar residence %d", static_cast<int>(residence));
  }
  std::size_t index = 0;
  while (index < comm->premul_ops.size() && comm->premul_ops[index].live) ++index;
  if (index == comm->premul_ops.size())
    comm->premul_ops.push_back(made);
  else
    comm->premul_ops[index] = made;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + static_cast<int>(index));
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  const char* function = "ncclRedOpDestroy";
  if (ncclResult_t r = check_comm(comm, function); r != ncclSuccess) return r;
  int index = static_cast<int>(op) - ncclNumOps;
  if (index < 0 || static_cast<std::size_t>(index) >= comm->premul_ops.size() ||
      !comm->premul_ops[static_cast<std::size_t>(index)].live)
    return fail(ncclInvalidArgument, function, "operator %d was not made by ncclRedOpCreate* for this communicator",
                static_cast<int>(op));
  comm->premul_ops[static_cast<std::size_t>(index)].live = false;
  return ncclSuccess;
}

}  // extern "C"
