// A memory resource for the engine's container nodes (pool-set and live-map entries): small
// sizes come from per-size free lists carved out of 64 KiB chunks, so allocate/free on the hot
// path never reaches the system allocator. Larger requests (hash bucket arrays) go upstream.
//
// Not thread-safe: used only under the engine's mutex. Memory returns to the system when the
// engine goes away.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <memory_resource>
#include <new>
#include <vector>

namespace phasealloc::detail {

class node_recycler final : public std::pmr::memory_resource {
 public:
  node_recycler() = default;
  node_recycler(const node_recycler&) = delete;
  node_recycler& operator=(const node_recycler&) = delete;

 private:
  static constexpr std::size_t unit_bytes = 16;
  static constexpr std::size_t max_node_bytes = 128;
  static constexpr std::size_t chunk_bytes = 64 * 1024;

  static std::size_t class_of(std::size_t bytes) noexcept { return (bytes + unit_bytes - 1) / unit_bytes - 1; }

  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (bytes > max_node_bytes || alignment > unit_bytes) return ::operator new(bytes, std::align_val_t(alignment));
    const std::size_t c = class_of(bytes);
    if (void* p = free_[c]) {
      free_[c] = *static_cast<void**>(p);
      return p;
    }
    const std::size_t size = (c + 1) * unit_bytes;
    if (left_ < size) {
      chunks_.push_back(std::make_unique<std::byte[]>(chunk_bytes));
      next_ = chunks_.back().get();
      left_ = chunk_bytes;
    }
    void* p = next_;
    next_ += size;
    left_ -= size;
    return p;
  }

  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    if (bytes > max_node_bytes || alignment > unit_bytes) {
      ::operator delete(p, std::align_val_t(alignment));  // unsized: clang without -fsized-deallocation
      return;
    }
    const std::size_t c = class_of(bytes);
    *static_cast<void**>(p) = free_[c];
    free_[c] = p;
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  std::array<void*, max_node_bytes / unit_bytes> free_{};
  std::vector<std::unique_ptr<std::byte[]>> chunks_;
  std::byte* next_ = nullptr;
  std::size_t left_ = 0;
};

}  // namespace phasealloc::detail
