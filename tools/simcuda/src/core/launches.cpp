// Kernel launches, shared by the runtime (cudaLaunchKernel and nvcc's launches) and the driver
// (cuLaunchKernel, cuLaunchKernelEx): the shape checks and what a launch does here. Kernels do
// not run on the simulator; a launch is validated, recorded into a capture or counted.
#include "simcuda/core.hpp"

namespace simcuda {

bool launch_shape_valid(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        std::size_t shared_bytes, std::size_t shared_limit_bytes) noexcept {
  const gpu_spec& g = current_config().gpu;
  const unsigned long long threads = 1ull * bx * by * bz;
  return gx != 0 && gy != 0 && gz != 0 && threads != 0 && threads <= static_cast<unsigned>(g.max_threads_per_block) &&
         gy <= 65535 && gz <= 65535 && bz <= 64 && shared_bytes <= shared_limit_bytes;
}

graph_status launch_kernel(stream* s, bool legacy, const void* function) noexcept {
  node_work work;
  work.kind = node_kind::kernel;
  work.function = function;
  bool captured = false;
  graph_status status = capture_work(s, legacy, work, &captured);
  if (status != graph_status::ok || captured) return status;
  count_kernel_launch();
  tick();
  return graph_status::ok;
}

}  // namespace simcuda
