// simcuda core: the one simulated machine that every stand-in library (libcudart.so.13,
// libcuda.so.1, libcublas.so.13, ...) shares. It lives in libsimcuda.so; the stand-ins are thin
// translations of their API onto these calls.
//
// Glossary
//   device        a simulated GPU: an ordinal, its properties (gpu_spec) and its memory.
//   arena         the device's reserved virtual range (PROT_NONE, MAP_NORESERVE): every device
//                 address of that GPU lies inside it, so a pointer names its device.
//   physical      bytes of the device's "HBM": offsets in one memfd per device, counted against
//                 the capacity. A page costs host RAM only once something writes it.
//   allocation    a cudaMalloc range: physical bytes mapped read/write at an arena address.
//   reservation   a cuMemAddressReserve range: arena addresses, no physical bytes until mapped.
//   handle        a cuMemCreate physical allocation (a memfd offset run), mapped anywhere.
//   mapped bytes  physical bytes currently held (allocations + handles); cudaMemGetInfo's free
//                 is capacity - mapped bytes.
//   stream/event  ordering objects. Work is executed at the call, so streams are trivially in
//                 order; what is simulated is *when an event reports completion* (event_mode).
//   tick          one API call that queues work; in deferred event mode an event completes
//                 after `deferred_ticks` later ticks, or at any synchronize.
//   capture       a stream capture sequence: work queued on its streams is recorded as graph
//                 nodes instead of executed (Note [simulated capture] in src/core/capture.cpp).
//   graph / exec  what a capture recorded / its instantiated copy, which a launch executes.
//
// Threading: every function here is thread-safe (one mutex per concern). Nothing here throws
// across the C boundary: failures are status values, broken invariants abort with a message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace simcuda {

// ---------------------------------------------------------------------------------------------
// Configuration: SIMCUDA_GPU="count:2,memory:80GiB,name:NVIDIA H100 80GB HBM3,cc:9.0,sms:132,
//                             events:deferred:8,fill:0x00,strict:1"
// ---------------------------------------------------------------------------------------------

struct gpu_spec {
  std::string name = "NVIDIA H100 80GB HBM3 (simcuda)";
  int cc_major = 9;
  int cc_minor = 0;
  int sm_count = 132;
  std::size_t memory_bytes = std::size_t{80} << 30;  ///< totalGlobalMem, cudaMemGetInfo's total
  int clock_khz = 1980000;
  int memory_clock_khz = 2619000;
  int memory_bus_width_bits = 5120;
  std::size_t l2_cache_bytes = std::size_t{50} << 20;
  std::size_t shared_memory_per_block_bytes = 48 << 10;
  std::size_t shared_memory_per_block_optin_bytes = 227 << 10;
  std::size_t shared_memory_per_sm_bytes = 228 << 10;
  int max_threads_per_block = 1024;
  int max_threads_per_sm = 2048;
  int warp_size = 32;
  int regs_per_block = 65536;
};

enum class event_mode {
  at_record,  ///< an event is complete as soon as it is recorded (work ran at the call)
  deferred,   ///< complete after `deferred_ticks` later ticks on any stream, or at a synchronize
  at_sync,    ///< complete only at an explicit synchronize (device, stream or event)
};

/// values:LEVEL, whether operations' outputs are real values. The values are computed above the
/// CUDA layer, by the value mode PyTorch jobs load (tools/simcuda/python/); the level is parsed here
/// so a bad one is refused with the rest of the configuration, and the value mode asks for it
/// through simcuda_value_level().
enum class value_level {
  off,         ///< kernels are skipped: outputs hold whatever the memory held
  observable,  ///< every output is real except the heavy floating-point products (a stand-in)
  exact,       ///< every output is real
};

/// The level a job gets when SIMCUDA_GPU names none.
inline constexpr value_level default_value_level = value_level::observable;

/// "off", "observable" or "exact".
const char* value_level_name(value_level level) noexcept;

struct config {
  int device_count = 1;
  gpu_spec gpu;
  event_mode events = event_mode::at_record;
  std::uint64_t deferred_ticks = 8;
  std::optional<std::uint8_t> fill_byte;  ///< written over new allocations (costs RAM) when set
  bool strict = false;  ///< abort (after the message) when an unemulated function is called
  bool quiet = false;   ///< no start-up banner
  value_level values = default_value_level;
  /// host_vmm:0 plays a driver older than CUDA 12.2: no host-located cuMemCreate (the
  /// HOST_*_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED attributes read 0, a host location is refused).
  bool host_vmm = true;
};

/// The configuration, parsed once from SIMCUDA_GPU on first use. A malformed value prints one
/// line naming the key and the valid form, then exits the process with status 2: a job must not
/// run on a GPU it did not ask for.
const config& current_config();

/// Parses a SIMCUDA_GPU string; on failure returns nullopt and sets `error`.
std::optional<config> parse_config(const std::string& text, std::string& error);

// ---------------------------------------------------------------------------------------------
// Errors and counters
// ---------------------------------------------------------------------------------------------

/// Reports a call to a function the simulator does not emulate: one line on stderr
/// ("simcuda: <library>: <function> is not emulated ..."), counted; aborts when strict.
/// Returns `code` so a stub can `return simcuda::unemulated(...)`.
int unemulated(const char* library, const char* function, int code) noexcept;

/// Reports an emulated function called with arguments it cannot honour (a flag, a mode):
/// one line naming the function and the reason, counted like unemulated(); aborts when strict.
int unsupported(const char* library, const char* function, const char* why, int code) noexcept;

/// Aborts the process with "simcuda: fatal: <what>" (broken invariant inside the simulator).
[[noreturn]] void fatal(const char* what) noexcept;

struct counters {
  std::uint64_t kernel_launches = 0;   ///< every launch entry point, library GEMMs included
  std::uint64_t library_calls = 0;     ///< cuBLAS/cuBLASLt compute calls (counted in launches too)
  std::uint64_t memcpy_calls = 0;
  std::uint64_t memcpy_bytes = 0;
  std::uint64_t memset_calls = 0;
  std::uint64_t device_mallocs = 0;    ///< cudaMalloc/cudaMallocAsync successes
  std::uint64_t device_frees = 0;
  std::uint64_t vmm_creates = 0;       ///< cuMemCreate successes
  std::uint64_t vmm_maps = 0;
  std::uint64_t vmm_unmaps = 0;
  std::uint64_t unemulated_calls = 0;  ///< unemulated() + unsupported()
  std::uint64_t out_of_memory = 0;     ///< refused for capacity
  std::uint64_t fat_binaries = 0;
  std::uint64_t functions_registered = 0;
  std::uint64_t stream_waits = 0;      ///< cudaStreamWaitEvent/cuStreamWaitEvent outside a capture
};

/// A snapshot of the process-wide counters.
counters read_counters() noexcept;
void count_kernel_launch() noexcept;
void count_stream_wait() noexcept;
void count_library_call() noexcept;
void count_memcpy(std::size_t bytes) noexcept;
void count_memset() noexcept;
void count_fat_binary() noexcept;
void count_function_registered() noexcept;

// ---------------------------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------------------------

/// GPUs this process sees (CUDA_VISIBLE_DEVICES of the machine's; src/core/visible_devices.cpp).
/// Every `device` below is a CUDA ordinal of this process.
int device_count() noexcept;
bool valid_device(int device) noexcept;
/// GPUs of the simulated machine (SIMCUDA_GPU count): what NVML lists.
int machine_device_count() noexcept;
/// The machine GPU behind a valid ordinal: its identity across processes (UUID, PCI bus id).
int machine_device(int ordinal) noexcept;
/// The ordinal of a machine GPU in this process, or -1 where CUDA_VISIBLE_DEVICES hides it.
int ordinal_of_machine_device(int machine) noexcept;
/// A machine GPU's UUID, as cudaDeviceProp::uuid and cuDeviceGetUuid give it, and as text
/// ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as NVML and CUDA_VISIBLE_DEVICES write it).
void device_uuid(int machine, unsigned char bytes[16]) noexcept;
std::string device_uuid_text(int machine);
/// The calling thread's current device (cudaSetDevice), 0 until set.
int current_device() noexcept;
void set_current_device(int device) noexcept;
/// Whether the device's primary context exists (the runtime initialised it: cudaSetDevice,
/// first memory use, or cuDevicePrimaryCtxRetain). PyTorch asks, to avoid creating contexts.
bool device_active(int device) noexcept;
void mark_device_active(int device) noexcept;
/// A device attribute by its CUdevice_attribute / cudaDeviceAttr number (the two enums agree).
/// False for an attribute the simulator does not model (the caller fails loudly).
bool device_attribute(int attribute, int device, int* value) noexcept;
/// "0000:01:00.0"-style PCI bus id of a machine GPU (domain 0, bus 1 + its machine index).
std::string pci_bus_id(int machine);

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

enum class mem_status {
  ok,
  out_of_memory,     ///< over the capacity
  invalid_value,     ///< size 0 where not allowed, misaligned, bad flags
  invalid_pointer,   ///< not the base of a live allocation / handle / reservation
  in_use,            ///< e.g. releasing a reservation that still has mappings
};

const char* to_string(mem_status status) noexcept;

/// Bytes of device memory currently mapped (allocations + cuMem handles) on `device`.
std::size_t mapped_bytes(int device) noexcept;
/// Peak of mapped_bytes(device) since start.
std::size_t peak_mapped_bytes(int device) noexcept;
/// Peak of mapped_bytes(device) since the previous call (since start for the first), and starts the
/// next interval at the bytes mapped now; peak_mapped_bytes is unaffected. Measures per-phase peaks.
std::size_t take_interval_peak_mapped_bytes(int device) noexcept;
/// Live cudaMalloc allocations of `device`.
std::size_t live_allocations(int device) noexcept;

/// NCCL's own buffers on `device` (the nccl stand-in's connections, outside any framework's
/// allocator; they are also in mapped_bytes): the stand-in counts what it takes and gives back.
void count_nccl_taken(int device, std::size_t bytes) noexcept;
void count_nccl_returned(int device, std::size_t bytes) noexcept;
/// Bytes NCCL's buffers hold on `device` now / at their peak since start.
std::size_t nccl_bytes(int device) noexcept;
std::size_t peak_nccl_bytes(int device) noexcept;

/// SIMCUDA_BOOKS: writes this process's books file now (books_file.cpp; nothing when the variable
/// is unset). Called at exit and whenever NCCL's peak grows on a device.
void write_books_file();

/// cudaMalloc: `bytes` rounded up to 2 MiB of physical memory (the real driver's granularity
/// for large allocations; small ones share nothing here, so they pay a page each).
mem_status device_malloc(int device, std::size_t bytes, void** out) noexcept;
/// cudaFree: the pointer must be the base of a live device_malloc. The range becomes PROT_NONE
/// again and its pages go back to the host.
mem_status device_free(void* pointer) noexcept;

/// cuMem* physical handles (CUmemGenericAllocationHandle values are opaque ids).
/// `shareable`: the handle can be exported as a POSIX fd (its own memfd).
mem_status vmm_create(int device, std::size_t bytes, bool shareable, std::uint64_t* handle) noexcept;
/// A host-located handle (cuMemCreate with CU_MEM_LOCATION_TYPE_HOST*): host RAM (its own memfd)
/// that maps into the device's address space like device memory; not charged to any device's
/// capacity, counted in host_located_bytes().
mem_status vmm_create_host(std::size_t bytes, std::uint64_t* handle) noexcept;
/// Bytes of live host-located handles in this process, now / at their peak since start.
std::size_t host_located_bytes() noexcept;
std::size_t peak_host_located_bytes() noexcept;
/// Whether a live handle is host-located.
bool vmm_handle_host_located(std::uint64_t handle) noexcept;
mem_status vmm_release(std::uint64_t handle) noexcept;
mem_status vmm_reserve(std::size_t bytes, std::size_t alignment, void* hint, void** out) noexcept;
mem_status vmm_address_free(void* base, std::size_t bytes) noexcept;
mem_status vmm_map(void* address, std::size_t bytes, std::size_t offset, std::uint64_t handle) noexcept;
mem_status vmm_unmap(void* address, std::size_t bytes) noexcept;
/// cuMemSetAccess: makes mapped pages readable and writable (until then they fault).
mem_status vmm_set_access(void* address, std::size_t bytes) noexcept;
/// Size and device of a live handle.
bool vmm_handle_info(std::uint64_t handle, int* device, std::size_t* bytes) noexcept;
/// cuMemRetainAllocationHandle: the handle mapped at `address`.
bool vmm_handle_at(const void* address, std::uint64_t* handle) noexcept;
/// POSIX-fd export of a shareable handle (cuMemExportToShareableHandle): a dup of its memfd.
mem_status vmm_export_fd(std::uint64_t handle, int* fd) noexcept;
/// cuMemImportFromShareableHandle: a handle over another process's memfd (not counted against
/// this process's capacity: it is the exporter's memory).
mem_status vmm_import_fd(int fd, std::uint64_t* handle) noexcept;

/// cudaIpcGetMemHandle / cudaIpcOpenMemHandle for cudaMalloc memory. The descriptor fits in a
/// cudaIpcMemHandle_t (64 bytes); the opener maps the exporter's memfd through /proc/<pid>/fd.
struct ipc_descriptor {
  std::uint32_t magic = 0;
  std::int32_t pid = 0;
  std::int32_t fd = -1;
  std::int32_t device = 0;
  std::uint64_t offset = 0;  ///< of the allocation in the exporter's device memfd
  std::uint64_t bytes = 0;
};
static_assert(sizeof(ipc_descriptor) <= 64);
mem_status ipc_export(const void* base, ipc_descriptor* out) noexcept;
mem_status ipc_open(const ipc_descriptor& descriptor, void** out) noexcept;
mem_status ipc_close(void* pointer) noexcept;

enum class pointer_kind { unknown, device, host_pinned, host_registered };

struct pointer_info {
  pointer_kind kind = pointer_kind::unknown;
  int device = -1;
  void* base = nullptr;       ///< start of the allocation / mapping / host range
  std::size_t bytes = 0;      ///< its length
};

/// What `pointer` points into. Device pointers are looked up by arena, then by allocation or
/// mapping; host ranges are those cudaHostAlloc / cudaHostRegister created.
pointer_info find_pointer(const void* pointer) noexcept;

/// True when [pointer, pointer + bytes) lies inside one live, accessible device range (an
/// allocation, or mapped pages with access set). Used to check copies and GEMM operands before
/// touching memory, so a bad pointer is an error value, not a fault.
bool device_range_accessible(const void* pointer, std::size_t bytes) noexcept;

/// Whether a copy from `src` to `dst` moves its bytes. Every copy does but one between two device
/// ranges at values:off: there no kernel computes, and a device-to-device copy is work of the same
/// kind (torch's copy_ of contiguous tensors is one); skipping it keeps the level's promise that
/// the job's device memory costs no host memory. Copies from or to the host always move.
bool copy_moves_bytes(void* dst, const void* src) noexcept;
/// Whether one side of a copy is valid: accessible memory in a device arena (device pages, or
/// host-located pages mapped there), or anything outside the arenas (host memory, pageable or
/// pinned, which the caller vouches for as CUDA does); `must_be_device` / `must_be_host` as the
/// copy's kind says.
bool copy_side_ok(const void* pointer, std::size_t bytes, bool must_be_device, bool must_be_host) noexcept;

/// memset of accessible device memory (the caller checked the range). A zero fill over whole
/// host pages punches them out of the backing memfd instead of writing them: they read as zero
/// and cost no RAM, so zero-initialised optimizer states of a dry run stay free.
void device_memset(void* pointer, int value, std::size_t bytes) noexcept;

/// Pinned host memory (cudaHostAlloc / cudaMallocHost) and registration of existing host memory.
mem_status host_alloc(std::size_t bytes, void** out) noexcept;
mem_status host_free(void* pointer) noexcept;
/// Bytes of page-locked host memory host_alloc made and host_free has not freed.
std::size_t pinned_host_bytes() noexcept;
mem_status host_register(void* pointer, std::size_t bytes) noexcept;
mem_status host_unregister(void* pointer) noexcept;

/// Installs (once) the SIGSEGV/SIGBUS handler that names a fault inside a device arena
/// ("illegal address: ... freed/unmapped device memory of GPU n") before the default action.
void install_fault_reporter() noexcept;

// ---------------------------------------------------------------------------------------------
// Streams and events. Handles are the addresses of these objects; 0 (legacy default) and the
// special values 0x1 (cudaStreamLegacy) and 0x2 (cudaStreamPerThread) are the device's default
// stream.
// ---------------------------------------------------------------------------------------------

struct stream;
struct event;

/// The stream a CUDA handle names for the current device; nullptr if the handle is not a live
/// stream (destroyed or never created).
stream* resolve_stream(const void* handle) noexcept;
stream* create_stream(int device, unsigned flags, int priority) noexcept;
bool destroy_stream(stream* s) noexcept;
int stream_device(const stream* s) noexcept;
unsigned stream_flags(const stream* s) noexcept;
int stream_priority(const stream* s) noexcept;
std::uint64_t stream_id(const stream* s) noexcept;

/// One unit of queued work: ticks the deferred-event clock.
void tick() noexcept;

event* create_event(int device, unsigned flags) noexcept;
bool valid_event(const event* e) noexcept;
bool destroy_event(event* e) noexcept;
int event_device(const event* e) noexcept;
unsigned event_flags(const event* e) noexcept;
/// Records `e` on `s`; when it completes depends on event_mode.
void record_event(event* e, stream* s) noexcept;
/// True when complete (an event never recorded is complete, as in CUDA).
bool query_event(event* e) noexcept;
/// Completes `e` (and everything recorded before it).
void synchronize_event(event* e) noexcept;
/// Completes every event recorded on `s`.
void synchronize_stream(stream* s) noexcept;
bool query_stream(stream* s) noexcept;
/// Completes every event of `device` (or of all devices when device < 0).
void synchronize_device(int device) noexcept;
/// Milliseconds between two completed events (host clock at record time).
bool elapsed_ms(event* start, event* end, float* ms) noexcept;

// ---------------------------------------------------------------------------------------------
// Stream capture and graphs (src/core/capture.cpp, src/core/graphs.cpp; Note [simulated capture]).
// While a stream captures, its work is recorded as graph nodes instead of run; launching the
// instantiated graph runs the recorded copies and memsets in order on the launch stream.
// ---------------------------------------------------------------------------------------------

/// cudaStreamCaptureMode / CUstreamCaptureMode (the numbers agree).
enum class capture_mode { global = 0, thread_local_mode = 1, relaxed = 2 };
/// cudaStreamCaptureStatus / CUstreamCaptureStatus.
enum class capture_status { none = 0, active = 1, invalidated = 2 };

/// Outcome of a capture or graph call; the stand-ins translate it to their error enum.
enum class graph_status {
  ok,
  unsupported,      ///< not permitted while capturing (cudaErrorStreamCaptureUnsupported)
  invalidated,      ///< the capture was invalidated by an earlier error (cudaErrorStreamCaptureInvalidated)
  merge,            ///< would merge two independent captures (cudaErrorStreamCaptureMerge)
  unmatched,        ///< the capture did not begin on this stream (cudaErrorStreamCaptureUnmatched)
  unjoined,         ///< a forked stream was not joined back (cudaErrorStreamCaptureUnjoined)
  isolation,        ///< a dependency on work outside the capture (cudaErrorStreamCaptureIsolation)
  implicit,         ///< the legacy stream would depend on a capturing blocking stream
  captured_event,   ///< the event was last recorded in a capture (cudaErrorCapturedEvent)
  wrong_thread,     ///< a non-relaxed capture ended by another thread (cudaErrorStreamCaptureWrongThread)
  illegal_state,    ///< e.g. a capture begun on a stream already capturing (cudaErrorIllegalState)
  invalid_value,
  invalid_handle,
  illegal_address,  ///< a graph launch whose node touches memory that is no longer accessible
};

const char* to_string(graph_status status) noexcept;

struct graph;
struct graph_node;
struct graph_exec;
struct user_object;

enum class node_kind { kernel, memcpy, memset, event_record, event_wait, host };

/// One unit of captured work. A copy or memset covers `height` rows of `width` bytes (memset:
/// elements of `element_size` bytes), rows `dst_pitch` / `src_pitch` bytes apart.
struct node_work {
  node_kind kind = node_kind::kernel;
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t width = 0;
  std::size_t height = 1;
  std::size_t dst_pitch = 0;
  std::size_t src_pitch = 0;
  std::uint32_t value = 0;
  unsigned element_size = 1;
  event* target = nullptr;                 ///< event_record, event_wait
  void (*host_fn)(void*) = nullptr;        ///< host
  void* host_data = nullptr;
  const void* function = nullptr;          ///< kernel (informational)
};

/// Sets the calling thread's capture interaction mode (cudaThreadExchangeStreamCaptureMode) and
/// returns the one it replaces.
capture_mode exchange_thread_capture_mode(capture_mode mode) noexcept;

/// cudaStreamBeginCapture(ToGraph): `into` (nullable) is an existing graph to add to, `deps` the
/// nodes of it the first captured work depends on.
graph_status begin_capture(stream* s, capture_mode mode, graph* into, graph_node* const* deps,
                           std::size_t dep_count) noexcept;
/// cudaStreamEndCapture: the graph, or nullptr and the reason the capture failed.
graph_status end_capture(stream* s, graph** out) noexcept;

struct capture_info {
  capture_status status = capture_status::none;
  std::uint64_t id = 0;
  graph* into = nullptr;
  graph_node* const* deps = nullptr;  ///< valid until the next capture call on the stream
  std::size_t dep_count = 0;
};
/// The capture state of `s`. `legacy`: the handle named the legacy default stream (then a capture
/// on a blocking stream of its device is an implicit dependency: status implicit, and invalidated).
graph_status stream_capture_info(stream* s, bool legacy, capture_info* out) noexcept;
/// cudaStreamUpdateCaptureDependencies: add (`replace` false) or set the stream's dependencies.
graph_status update_capture_dependencies(stream* s, graph_node* const* deps, std::size_t count, bool replace) noexcept;

/// Work queued on `s`. Not capturing: `*captured` false, ok (the caller runs it). Capturing: the
/// work becomes a node (`*captured` true), or the error (invalidated, implicit).
graph_status capture_work(stream* s, bool legacy, const node_work& work, bool* captured) noexcept;
/// A kernel launch's shape: the grid and block extents and threads per block the device allows,
/// and dynamic shared memory up to `shared_limit_bytes` (what the function may ask for).
bool launch_shape_valid(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        std::size_t shared_bytes, std::size_t shared_limit_bytes) noexcept;
/// A kernel launch whose shape is valid, from the runtime or the driver: recorded as a kernel
/// node when `s` captures (counted when a launch of the graph runs it), else counted and skipped.
graph_status launch_kernel(stream* s, bool legacy, const void* function) noexcept;
/// cudaEventRecord on `s`: inside a capture the event remembers the capture's position
/// (`external`: also an event-record node); outside, any capture marker of the event is dropped.
graph_status capture_event_record(event* e, stream* s, bool legacy, bool external, bool* captured) noexcept;
/// cudaStreamWaitEvent: joins `s` to the capture `e` was recorded in, or adds `e`'s position to
/// its dependencies; a capturing stream waiting on outside work is an isolation error
/// (`external`: an event-wait node instead).
graph_status capture_event_wait(stream* s, event* e, bool legacy, bool external, bool* captured) noexcept;
/// Work that cannot be captured (a stream callback, cudaMallocAsync, ...): unsupported and the
/// capture invalidated when `s` captures; ok otherwise.
graph_status refuse_in_capture(stream* s) noexcept;
/// Synchronizing or querying `s`: unsupported (and invalidated) when it captures; implicit when
/// `legacy` and a blocking stream of its device captures.
graph_status check_stream_sync(stream* s, bool legacy) noexcept;
/// Querying or synchronizing `e`: captured_event when last recorded in a capture, else as an
/// unsafe call (check_unsafe_call).
graph_status check_event_use(event* e) noexcept;
/// A device-wide synchronize: unsupported (and every capture on it invalidated) while any of its
/// streams captures.
graph_status check_device_sync(int device) noexcept;
/// A potentially unsafe call (cudaMalloc, cudaFree, a synchronous copy, ...) from this thread:
/// unsupported when the thread's mode and the ongoing captures prohibit it (then those captures
/// are invalidated), as cudaStreamCaptureMode describes.
graph_status check_unsafe_call() noexcept;
/// Use of the legacy default stream of `device` (a synchronous copy): implicit while a blocking
/// stream of it captures.
graph_status check_legacy_use(int device) noexcept;
/// Whether `s` takes part in a capture (destroying it then is refused).
bool stream_capturing(stream* s) noexcept;

/// cudaGraphGetNodes semantics: with `out` null, *count = nodes; else up to *count handles, the
/// rest of `out` nulled, and *count = min(*count, nodes).
graph_status graph_nodes(graph* g, graph_node** out, std::size_t* count) noexcept;
graph_status node_dependencies(graph_node* n, graph_node** out, std::size_t* count) noexcept;
graph_status destroy_graph(graph* g) noexcept;
graph_status instantiate_graph(graph* g, graph_exec** out) noexcept;
graph_status destroy_graph_exec(graph_exec* x) noexcept;
/// Runs the recorded work on `s`, in order. Memory every node touches is checked first: a node
/// over memory freed since capture is illegal_address (said on stderr through illegal_operand,
/// in `library`'s name), and nothing runs.
graph_status launch_graph(graph_exec* x, stream* s, bool legacy, const char* library) noexcept;

/// User objects (cudaUserObjectCreate): a destructor run when the last reference goes.
graph_status create_user_object(void* pointer, void (*destroy)(void*), unsigned initial_refs, user_object** out) noexcept;
graph_status release_user_object(user_object* o, unsigned count) noexcept;
/// The graph takes `count` references (`move`: the caller's, else new ones); instantiated
/// graphs hold their own, released with them.
graph_status graph_retain_user_object(graph* g, user_object* o, unsigned count, bool move) noexcept;

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

/// Reports an access a kernel would make outside accessible device memory (on a GPU: an illegal
/// address). One line naming the function and the operand; counted; aborts when strict.
void illegal_operand(const char* library, const char* function, const char* operand, const void* pointer,
                     std::size_t bytes) noexcept;

}  // namespace simcuda

/// The C entry point the generated stubs call (they are compiled as C).
extern "C" int simcuda_unemulated(const char* library, const char* function, int code);
