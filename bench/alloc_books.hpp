// What an allocator's books say about one benchmark run: the counters every bench allocator
// reports (alloc_patterns.hpp, device_allocators.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace phasealloc::bench {

/// What an allocator's books say about one benchmark run.
struct alloc_books {
  bool has_device = false;                 ///< false for glibc: no reserved bytes, no device calls.
  std::size_t peak_reserved_bytes = 0;     ///< Max over every engine the run built.
  std::size_t peak_allocated_bytes = 0;
  std::uint64_t device_calls = 0;          ///< reserve + release + map + unmap, all engines.
  std::uint64_t event_calls = 0;           ///< create + record + query + sync + destroy of events.
  std::uint64_t failures = 0;              ///< Allocations that failed (the run is then an error).
  std::string first_failure;
};

}  // namespace phasealloc::bench
