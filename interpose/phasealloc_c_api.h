/* phasealloc's C API: the entry points PyTorch's CUDAPluggableAllocator calls, and the control
 * API the Python package (and any other host) uses.
 *
 * This header includes no CUDA header and compiles as C or C++. Every `void* stream` is a
 * cudaStream_t (CUstream) passed by value: the handle's pointer value is the engine's stream id
 * (0 / NULL is the legacy default stream). Casting a cudaStream_t to void* and back is exact, so
 * these signatures are ABI-identical to the ones PyTorch's docs show with cudaStream_t.
 *
 * Errors
 *   - Nothing crosses this boundary but an allocation failure thrown by phasealloc_malloc (see
 *     there). Every other function catches everything and reports failure by its return value
 *     (-1, or NULL for strings) and by phasealloc_last_error().
 *   - Caller misuse (unknown pointer, double free, size mismatch, a device that never allocated)
 *     is reported on stderr, counted ("num_misuse" in the stats) and kept as the last error. With
 *     strict:true in the configuration it aborts the process with the evidence instead.
 *
 * Strings returned as `const char*` live in a thread-local buffer owned by the library, one per
 * function: valid until the same function is called again on the same thread.
 *
 * Configuration: PHASEALLOC_CONF (or phasealloc_configure, called first) is read once, at the
 * first call that needs it. Grammar and keys: interpose/README.md.
 */
#ifndef PHASEALLOC_C_API_H_
#define PHASEALLOC_C_API_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

#if defined(__GNUC__)
#define PHASEALLOC_API __attribute__((visibility("default")))
#else
#define PHASEALLOC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* --- what PyTorch calls ------------------------------------------------------------------------ */

/* Allocates `size` bytes on `device` for use on `stream`.
 * Never returns NULL for size >= 0: PyTorch does not check the result, so a failure is thrown as a
 * C++ exception, which PyTorch (calling through std::function) turns into a Python exception:
 *   out of memory -> c10::OutOfMemoryError (torch.cuda.OutOfMemoryError) when the companion
 *                    library libphasealloc_torch_oom.so (built against c10) sits next to this one
 *                    and loads; else std::runtime_error (RuntimeError). Both messages start with
 *                    "CUDA out of memory." and carry the per-phase report.
 *   anything else -> std::runtime_error (bad configuration, no usable device, ...).
 * Deliberately not noexcept. Callers that cannot take an exception (ctypes, C) use
 * phasealloc_try_malloc. */
PHASEALLOC_API void* phasealloc_malloc(ssize_t size, int device, void* stream);

/* Frees what phasealloc_malloc returned. `size` is the size that was asked for (0: unchecked);
 * `stream` is the allocation stream (ignored: the block remembers it). NULL is a no-op. */
PHASEALLOC_API void phasealloc_free(void* ptr, ssize_t size, int device, void* stream);

/* Optional hooks (CUDAPluggableAllocator._allocator.set_init_fn / set_reset_fn /
 * set_memory_fraction_fn / set_record_stream_fn). */
PHASEALLOC_API void phasealloc_init(int device_count);             /* CUDA lazy init: reads the configuration */
PHASEALLOC_API void phasealloc_reset(void);                        /* torch.cuda.empty_cache(): every engine */
PHASEALLOC_API void phasealloc_memory_fraction(double fraction, int device); /* limit on reserved bytes; [0, 1] */
PHASEALLOC_API void phasealloc_record_stream(void* ptr, void* stream);      /* Tensor.record_stream */

/* --- tools and tests ---------------------------------------------------------------------------- */

/* phasealloc_malloc without the exception: NULL on failure, with phasealloc_last_error() set
 * (for out of memory: the same report phasealloc_malloc throws). */
PHASEALLOC_API void* phasealloc_try_malloc(ssize_t size, int device, void* stream);
/* This thread's last failed allocation (phasealloc_malloc or phasealloc_try_malloc): its message,
 * and *out_of_memory = 1 when it ran out of memory, else 0 (out_of_memory may be NULL). Per thread:
 * another thread's errors never replace it, unlike phasealloc_last_error(). "" before any failure. */
PHASEALLOC_API const char* phasealloc_last_malloc_failure(int* out_of_memory);

/* Sets the configuration instead of PHASEALLOC_CONF. Must come before the first call that reads the
 * configuration; afterwards it succeeds only if `conf` equals the configuration in force.
 * 0 on success, -1 on a bad configuration or when too late. */
PHASEALLOC_API int phasealloc_configure(const char* conf);

/* The effective configuration in the PHASEALLOC_CONF grammar, every key spelled out (paste it back
 * unchanged); NULL when the configuration is bad (phasealloc_last_error() says why). */
PHASEALLOC_API const char* phasealloc_config(void);

/* --- phases (apply to every device's engine, and to engines created later) -------------------- */

PHASEALLOC_API int phasealloc_phase_begin(const char* name); /* push: 0, or -1 */
PHASEALLOC_API int phasealloc_phase_end(void);               /* pop: 0, or -1 without a matching begin */
PHASEALLOC_API int phasealloc_phase_set(const char* name);   /* replace the current one: 0, or -1 */
PHASEALLOC_API const char* phasealloc_current_phase(void);   /* "unphased" before any phase */

/* --- books ---------------------------------------------------------------------------------------- */

/* JSON object: every torch.cuda.memory_stats() key of the device ("allocated_bytes.all.current",
 * ...), "phases": [{name, intervals, peak_allocated_bytes, ..., fragmentation}], "phasealloc":
 * {device_index, engine, device, policy, current_phase, limit_bytes, capacity_bytes, ...}, and
 * "host": the host buffer pool in torch.cuda.host_memory_stats()'s names ("allocations.current",
 * "allocated_bytes.peak", "active_requests.*", "active_bytes.*", num_host_alloc, num_host_free)
 * plus num_reuses, num_waits, num_over_budget and budget_bytes.
 * A device whose engine (or host pool) was never created answers zeros (host: with the configured
 * budget). device -1: {"devices": {"<index>": <that object>, ...}} for every created engine.
 * NULL on error. */
PHASEALLOC_API const char* phasealloc_stats_json(int device);
PHASEALLOC_API int phasealloc_reset_peak_stats(int device);        /* -1: every device */
/* The engine's limit on reserved bytes, in bytes: 0 = none, 1 = nothing fits. The c10 bridge sets it
 * to a per-process memory fraction's cap less what PyTorch's own allocator holds. 0 or -1 (last error). */
PHASEALLOC_API int phasealloc_set_limit_bytes(int device, size_t limit_bytes);
/* Every later request of every engine is rounded as PyTorch's allocator rounds it under
 * roundup_power2_divisions with this table: `divisions[i]` for PyTorch's interval i (sizes in
 * [2^i MiB, 2^(i+1) MiB); the first also below, the 16th also above), 0 or a power of two, the
 * intervals from `count` on 0. The block is at least the rounded size; the request's own size stays
 * its requested bytes. Only 0s and 1s (or count 0): no rounding, the policy's own sizing (the
 * default). The c10 bridge sets it whenever the job changes PyTorch's allocator settings at run
 * time. 0, or -1 (count > 16, a value neither 0 nor a power of two; last error). */
PHASEALLOC_API int phasealloc_set_request_divisions(const size_t* divisions, size_t count);
/* held != 0: a CUDA graph capture (or a private-pool route) is under way on `device`; until it is
 * let go (held = 0), the device's engine frees nothing and waits on no event: phase-transition
 * releases, empty_cache and out-of-memory releases are skipped, as PyTorch's allocator skips them
 * during a capture. Applies to an engine created later too. 0 or -1 (last error). */
PHASEALLOC_API int phasealloc_hold_device_calls(int device, int held);
/* Lets kernels on GPU `peer` reach the memory phasealloc maps for `device` (cuda_vmm pages, which
 * cudaDeviceEnablePeerAccess does not cover): what is mapped now and later. PyTorch's
 * enablePeerAccess(peer, device) calls it through the c10 bridge. 0 or -1 (last error). */
PHASEALLOC_API int phasealloc_enable_peer_access(int device, int peer);
PHASEALLOC_API int phasealloc_reset_accumulated_stats(int device); /* -1: every device */

/* JSON array of segment objects in the shape of torch.cuda.memory_snapshot(): device, address,
 * total_size, allocated_size, active_size, requested_size, stream, segment_type, segment_pool_id,
 * is_expandable, frames, pool, blocks[{address, size, requested_size, state, frames}] with torch's
 * states (active_allocated, active_pending_free, inactive). One object per contiguous mapped range,
 * sorted by address. device -1: every created engine. NULL on error. */
PHASEALLOC_API const char* phasealloc_snapshot_json(int device);

/* --- same-address offload (device:cuda_vmm on a CUDA 12.2+ driver; simcuda emulates it) ------------ */

/* What an offload or a restore did (phasealloc::offload_outcome). */
typedef struct phasealloc_offload_result {
  size_t blocks;       /* blocks moved, wholly or in part */
  size_t ranges;       /* page ranges moved (adjacent blocks share one) */
  size_t page_bytes;   /* bytes of pages whose memory changed sides */
  size_t copied_bytes; /* live bytes copied (never a free cached byte) */
  size_t kept_bytes;   /* offload: bytes of the named blocks that stayed (pages shared with blocks that stay) */
} phasealloc_offload_result;

/* Moves the live bytes of the blocks at ptrs[0..count) (addresses phasealloc_malloc returned for
 * `device`) to host memory mapped at the same addresses and gives their device pages back: every
 * page only these blocks cover. The pointers stay valid; a kernel that touches them reads and
 * writes the right bytes over the link. Returns when the copies are done. 0, or -1 (last error: an
 * unknown pointer, a device without host-backed mappings, a capture under way, a device failure;
 * what was moved before the failure stays moved). `out` (may be NULL) receives what was done. */
PHASEALLOC_API int phasealloc_offload(int device, void* const* ptrs, size_t count, phasealloc_offload_result* out);
/* Brings back to device pages, at the same addresses, every offloaded range holding a block at
 * ptrs[0..count) (count 0: every offloaded range of `device`). 0; -2 when the device has no memory
 * for a range even after releasing what phasealloc caches: its bytes stay on the host, correct,
 * and a later call may succeed (last error names the range); -1 for any other error. */
PHASEALLOC_API int phasealloc_restore(int device, void* const* ptrs, size_t count, phasealloc_offload_result* out);

/* How `device` offloads: 1 host-backed (an offloaded block stays readable and writable at its address,
 * over the link), 2 unmapping (the driver cannot map host memory at device addresses, before CUDA 12.2:
 * an offloaded block is unmapped until restored, and a kernel that touches it faults), 0 not at all
 * (a device other than cuda_vmm); -1 on an error (last error). */
PHASEALLOC_API int phasealloc_offload_kind(int device);

/* Tags: allocations a thread makes while it holds a tag carry it (Python: `with phasealloc.tag(name):`).
 * The phasealloc policy gives the first 15 names pages of their own, so offloading one keeps nothing. */
/* The number of the tag `name`, numbered from 2^20 in the order names are first asked for, process-wide;
 * 0 when the name cannot be one (last error: empty, over 200 bytes, a control character). */
PHASEALLOC_API uint32_t phasealloc_tag_id(const char* name);
/* The number of `name` when phasealloc_tag_id numbered it, else 0 (a lookup: nothing is numbered). */
PHASEALLOC_API uint32_t phasealloc_find_tag(const char* name);
/* Makes `tag` (0: none) the tag of the calling thread's allocations; returns the one it replaces. */
PHASEALLOC_API uint32_t phasealloc_set_thread_tag(uint32_t tag);
/* phasealloc_offload / phasealloc_restore of every block on `device` that carries `tag` (not 0), under
 * one engine lock. No such block: 0 with nothing done. Returns as those do. */
PHASEALLOC_API int phasealloc_offload_tag(int device, uint32_t tag, phasealloc_offload_result* out);
/* Bytes of the blocks on `device` that carry `tag` now (offloaded ones included); 0 when none does. */
PHASEALLOC_API size_t phasealloc_tag_bytes(int device, uint32_t tag);
PHASEALLOC_API int phasealloc_restore_tag(int device, uint32_t tag, phasealloc_offload_result* out);

/* Non-blocking moves. phasealloc_offload_start / phasealloc_restore_start do what phasealloc_offload /
 * phasealloc_restore do (or the _tag forms, when `tag` is not 0; then count must be 0), but return
 * once the copies are enqueued on the device's copy stream; *ticket (may be NULL) names the moves in
 * flight (0: none, everything was done). An offload's device pages go back when its copies are done
 * and the move finishes: phasealloc_finish_moves, any later offload or restore that finds them done,
 * or an allocation that would otherwise run out of memory (it waits for them); until then the
 * blocks must not be written. A restore's device pages are mapped (and counted) at once and the
 * streams that used the blocks wait for its copies on the device; work on another stream must be
 * ordered after them (phasealloc_order_after_moves, or a finish). A move that failed to finish where
 * no call could report it (an allocation landing it) is reported by the next offload, restore or
 * finish on the device, which then does nothing else (call it again).
 * Returns as the blocking forms do. */
PHASEALLOC_API int phasealloc_offload_start(int device, void* const* ptrs, size_t count, uint32_t tag,
                                            phasealloc_offload_result* out, uint64_t* ticket);
PHASEALLOC_API int phasealloc_restore_start(int device, void* const* ptrs, size_t count, uint32_t tag,
                                            phasealloc_offload_result* out, uint64_t* ticket);
/* phasealloc_offload / phasealloc_restore (non_blocking: the _start forms) of segments phasealloc lent to
 * a pool of PyTorch's allocator (a CUDA graph pool; ptrs: the segments' addresses), copying only the
 * bytes that allocator holds in them: the spans (span_addrs[i], span_bytes[i]), in address order and
 * not overlapping (none: nothing is copied); the free space of the segments moves without its bytes (a graph's scratch: its
 * kernels write it before they read it). Returns as those do. */
PHASEALLOC_API int phasealloc_move_lent(int device, int restore, int non_blocking, void* const* ptrs, size_t count,
                                        void* const* span_addrs, const size_t* span_bytes, size_t span_count,
                                        phasealloc_offload_result* out, uint64_t* ticket);
/* Finishes the moves in flight of `ticket` on `device` (0: every one): waits for their copies when
 * `wait` is nonzero, else finishes only those whose copies are done. 1 when none of them is left in
 * flight, 0 when some are, -1 on an error (last error: an offload that could not finish keeps its
 * blocks on the device, contents intact; a restore whose copies cannot be waited for stays in flight). */
PHASEALLOC_API int phasealloc_finish_moves(int device, uint64_t ticket, int wait);
/* Makes `stream` (a cudaStream_t of `device`; NULL: the legacy default stream) wait, on the device,
 * for the copies of the moves in flight of `ticket` (0: every one). 0, or -1 (last error). */
PHASEALLOC_API int phasealloc_order_after_moves(int device, uint64_t ticket, void* stream);

/* Called when an allocation runs out of device memory, with the device and the request, outside every
 * engine lock: nonzero when it gave device memory back (offload:pressure offloads idle state), and the
 * allocation is then tried once more. Runs on the allocating thread; never re-entered on one thread. */
typedef int (*phasealloc_pressure_fn)(int device, size_t bytes);
/* Installs the handler (NULL: none), replacing the previous one. */
PHASEALLOC_API void phasealloc_set_pressure_handler(phasealloc_pressure_fn handler);

/* --- traces ----------------------------------------------------------------------------------------- */

/* Records every engine (and engines created later) until phasealloc_trace_stop, or until the
 * process exits. The pattern expands %p (pid), %r (RANK, else LOCAL_RANK, else 0), %d (device
 * index) and %%; without %d, device N > 0 writes "<stem>.devN<ext>". A path ending in .txt gets
 * the text encoding, anything else the binary one. 0, or -1 (a trace is already running). */
PHASEALLOC_API int phasealloc_trace_start(const char* path_pattern);
/* Writes the files and stops. 0, or -1 (no trace running, or a file could not be written). */
PHASEALLOC_API int phasealloc_trace_stop(void);
/* Writes the running traces' files now and keeps recording (the files are written again at exit).
 * The Python package calls it at interpreter exit, before the threads and objects of the process
 * are torn down, so a crash late in the exit cannot lose a trace. 0 (also with no trace running),
 * or -1 (a file could not be written). */
PHASEALLOC_API int phasealloc_trace_flush(void);

/* --- host buffers for offload copies ------------------------------------------------------------------ */

/* Page-locked host buffers (cudaHostAlloc; heap memory on device:model) for copies between `device`
 * and the host, from a per-device pool that keeps them for reuse under a byte budget (host_budget
 * in the configuration, per GPU ordinal; 0 disables the pool). The pool is built at the first call
 * for a device (with that device's engine, as a first malloc would). */

/* A buffer of at least `size` bytes, or NULL with phasealloc_last_error() set: over budget (every
 * buffer the budget allows is in use; the message names the request and the budget: copy through
 * pageable memory instead), size 0 or larger than the budget, pool disabled, bad device, or the
 * host refused to lock more. A refusal is not misuse: nothing is printed or counted. Never throws. */
PHASEALLOC_API void* phasealloc_host_alloc(size_t size, int device);

/* Hands a buffer back to `device`'s pool. A copy enqueued on `stream` (a cudaStream_t; NULL is the
 * legacy default stream) before this call may still use it: the pool records an event there and
 * hands the buffer out again only after it completes. Work on other streams is not waited for.
 * 0, or -1 for an unknown pointer (including one from another device's pool) or a double free,
 * reported as misuse like phasealloc_free's (stderr, counted, last error; strict:true aborts).
 * NULL is a no-op (0). */
PHASEALLOC_API int phasealloc_host_free(void* ptr, int device, void* stream);

/* Frees the idle buffers of `device`'s pool (-1: every device); buffers in use or whose copies
 * are still in flight stay. 0, or -1 for a bad device. */
PHASEALLOC_API int phasealloc_host_trim(int device);

/* --- events: the allocator's history, for a host that keeps PyTorch's memory history ---------- */

/* What every engine reports, as PyTorch's TraceEntry actions. `addr` is the block or segment
 * address (for OOM: the device's free bytes), `size` its bytes (for OOM: the request), `stream`
 * the stream handle. */
enum phasealloc_event_action {
  PHASEALLOC_EVENT_ALLOC = 0,
  PHASEALLOC_EVENT_FREE_REQUESTED = 1,
  PHASEALLOC_EVENT_FREE_COMPLETED = 2,
  PHASEALLOC_EVENT_SEGMENT_ALLOC = 3,
  PHASEALLOC_EVENT_SEGMENT_FREE = 4,
  PHASEALLOC_EVENT_SEGMENT_MAP = 5,
  PHASEALLOC_EVENT_SEGMENT_UNMAP = 6,
  PHASEALLOC_EVENT_OOM = 7
};
typedef struct phasealloc_event {
  int device;
  int action; /* enum phasealloc_event_action */
  size_t addr;
  size_t size;        /* as PyTorch's trace records it: a block's requested bytes, a segment's bytes */
  void* stream;
  size_t block_bytes; /* alloc / free_requested / free_completed: the block's bytes (allocated_bytes' unit) */
  size_t reserved_bytes; /* the device's reserved bytes (all pools) once this event has happened: every
                            change of them comes with a segment event, so a host follows them exactly */
} phasealloc_event;
/* Called on the thread that caused the event, under that device's engine lock: it must return
 * quickly, must not throw, and must not call back into phasealloc. */
typedef void (*phasealloc_event_fn)(const phasealloc_event* event, void* context);
/* Sets the one listener (NULL: none). It sees every event of every engine from then on; the
 * previous listener may still be running its last call when this returns. 0 always. */
PHASEALLOC_API int phasealloc_set_event_listener(phasealloc_event_fn fn, void* context);

/* Whether `ptr` lies in device memory phasealloc holds for some device: that device's ordinal,
 * or -1. Silent (no misuse is reported for foreign pointers). */
PHASEALLOC_API int phasealloc_owner_device(const void* ptr);

/* --- errors ----------------------------------------------------------------------------------------- */

/* The most recent error any thread reported ("" when none). */
PHASEALLOC_API const char* phasealloc_last_error(void);
PHASEALLOC_API void phasealloc_clear_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PHASEALLOC_C_API_H_ */
