# What the c10 bridge may override in the torch it is compiled against.
#
# Rationale: RLHF frameworks pin different torch releases (2.11 to 2.15), and CUDAAllocator gains
# virtual methods and stats fields from one release to the next. The bridge overrides each one its
# torch has and leaves the rest out, so one source builds against every release.
# Approach: each feature is found by name in the torch headers the bridge is compiled against (a
# probe of the headers, not of version numbers, so a backport or a patched wheel is read right),
# and becomes PHASEALLOC_TORCH_HAS_<FEATURE>=0/1 for the bridge's sources.
# Limitations: a feature is found by its name alone; a changed signature under the same name shows
# up as a compile error, which is the place to add a probe.
function(phasealloc_torch_features target include_dir)
  file(READ ${include_dir}/c10/cuda/CUDACachingAllocator.h cuda_allocator_h)
  file(READ ${include_dir}/c10/core/CachingDeviceAllocator.h device_allocator_h)
  set(probes
    # feature               header               what names it
    "CAPTURE_MARKS"         cuda_allocator_h     "virtual void markCaptureBegin"
    "CONTEXT_FOR_POINTER"   cuda_allocator_h     "getContextForPointer"
    "USER_METADATA_SUPPORT" cuda_allocator_h     "virtual bool supportsUserMetadata"
    "ANNOTATE_MEMORY"       cuda_allocator_h     "virtual void annotateMemory"
    "OOM_REJECTION"         cuda_allocator_h     "attachOomRejectionObserver"
    "ALLOCATE_WITH_ADDRESS" cuda_allocator_h     "virtual DataPtr allocateWithAddress"
    "PRIVATE_POOL_RESERVED" device_allocator_h   "reserved_bytes_by_private_pools"
    "OOM_REJECTION_STAT"    device_allocator_h   "num_oom_rejections")
  set(found "")
  set(missing "")
  list(LENGTH probes n)
  math(EXPR last "${n} - 1")
  foreach(i RANGE 0 ${last} 3)
    math(EXPR j "${i} + 1")
    math(EXPR k "${i} + 2")
    list(GET probes ${i} feature)
    list(GET probes ${j} header)
    list(GET probes ${k} needle)
    string(FIND "${${header}}" "${needle}" at)
    if(at EQUAL -1)
      target_compile_definitions(${target} PRIVATE PHASEALLOC_TORCH_HAS_${feature}=0)
      list(APPEND missing ${feature})
    else()
      target_compile_definitions(${target} PRIVATE PHASEALLOC_TORCH_HAS_${feature}=1)
      list(APPEND found ${feature})
    endif()
  endforeach()
  if(missing)
    string(REPLACE ";" ", " missing "${missing}")
    message(STATUS "phasealloc: this torch's CUDAAllocator lacks: ${missing} (the bridge leaves them out)")
  endif()
endfunction()
