// The sizing NCCL documents and uses (its environment variables and their defaults), and the
// allocations that stand for a communicator's connection buffers. Every allocation is a
// simulated cudaMalloc (whole 2 MiB pages, the cuMem granularity NCCL allocates with), made
// directly on the device: not through the framework's allocator, exactly as NCCL's own are.
#include "memory_model.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "simcuda/core.hpp"
#include "status.hpp"

namespace simcuda::nccl {

namespace {

constexpr std::size_t page_bytes = std::size_t{2} << 20;

std::size_t rounded(std::size_t bytes) { return (bytes + page_bytes - 1) / page_bytes * page_bytes; }

// A positive integer from `name`, or `fallback` (with a line) when it is malformed.
long long env_positive(const char* name, long long fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0' || value <= 0) {
    std::fprintf(stderr, "simcuda: %s: %s=%s is not a positive integer; using %lld\n", library, name, text, fallback);
    return fallback;
  }
  return value;
}

buffer_sizing read_sizing() {
  buffer_sizing s;
  s.simple_bytes = static_cast<std::size_t>(env_positive("NCCL_BUFFSIZE", static_cast<long long>(s.simple_bytes)));
  s.ll_bytes = static_cast<std::size_t>(env_positive("NCCL_LL_BUFFSIZE", static_cast<long long>(s.ll_bytes)));
  s.ll128_bytes = static_cast<std::size_t>(env_positive("NCCL_LL128_BUFFSIZE", static_cast<long long>(s.ll128_bytes)));
  long long min_channels = env_positive("NCCL_MIN_NCHANNELS", 1);
  long long max_channels = env_positive("NCCL_MAX_NCHANNELS", 64);
  long long channels = s.channels;
  if (channels > max_channels) channels = max_channels;
  if (channels < min_channels) channels = min_channels;
  s.channels = static_cast<int>(channels);
  s.p2p_channels_per_peer = static_cast<int>(env_positive("NCCL_NCHANNELS_PER_PEER", s.p2p_channels_per_peer));
  s.p2p_chunk_bytes =
      static_cast<std::size_t>(env_positive("NCCL_P2P_NVL_CHUNKSIZE", static_cast<long long>(s.p2p_chunk_bytes)));
  const char* runtime_connect = std::getenv("NCCL_RUNTIME_CONNECT");
  s.runtime_connect = runtime_connect == nullptr || std::atoi(runtime_connect) != 0;
  return s;
}

}  // namespace

const buffer_sizing& sizing() {
  static const buffer_sizing s = read_sizing();
  return s;
}

bool comm_memory::take(std::size_t bytes, int count) {
  std::size_t first = allocations_.size();
  for (int i = 0; i < count; ++i) {
    void* pointer = nullptr;
    if (device_malloc(device_, bytes, &pointer) != mem_status::ok) {
      while (allocations_.size() > first) {
        device_free(allocations_.back().pointer);
        count_nccl_returned(device_, rounded(allocations_.back().bytes));
        allocations_.pop_back();
      }
      return false;
    }
    allocations_.push_back({pointer, bytes});
    count_nccl_taken(device_, rounded(bytes));
  }
  return true;
}

bool comm_memory::connect_ring() {
  if (ring_connected_ || nranks_ < 2) return true;
  const buffer_sizing& s = sizing();
  if (!suspended_ && !take(s.ring_connection_bytes(), s.channels)) return false;
  ring_connected_ = true;
  connected_bytes_ += rounded(s.ring_connection_bytes()) * static_cast<std::size_t>(s.channels);
  return true;
}

bool comm_memory::connect_p2p_receive(int peer) {
  if (peer < 0 || peer >= nranks_ || p2p_receive_connected_[static_cast<std::size_t>(peer)] || nranks_ < 2) return true;
  const buffer_sizing& s = sizing();
  if (!suspended_ && !take(s.p2p_connection_bytes(), s.p2p_channels_per_peer)) return false;
  p2p_receive_connected_[static_cast<std::size_t>(peer)] = true;
  connected_bytes_ += rounded(s.p2p_connection_bytes()) * static_cast<std::size_t>(s.p2p_channels_per_peer);
  return true;
}

void comm_memory::suspend() {
  release();
  suspended_ = true;
}

bool comm_memory::resume() {
  if (!suspended_) return true;
  const buffer_sizing& s = sizing();
  bool ok = true;
  if (ring_connected_) ok = take(s.ring_connection_bytes(), s.channels);
  for (bool connected : p2p_receive_connected_)
    if (ok && connected) ok = take(s.p2p_connection_bytes(), s.p2p_channels_per_peer);
  if (!ok) {
    release();
    return false;
  }
  suspended_ = false;
  return true;
}

std::size_t comm_memory::held_bytes() const noexcept {
  std::size_t total = 0;
  for (const allocation& a : allocations_) total += rounded(a.bytes);
  return total;
}

void comm_memory::release() noexcept {
  for (const allocation& a : allocations_) {
    device_free(a.pointer);
    count_nccl_returned(device_, rounded(a.bytes));
  }
  allocations_.clear();
}

}  // namespace simcuda::nccl
