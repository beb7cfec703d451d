// The whole contents of a file, read-only, for the trace loaders.
//
// Design note
// Rationale: reading a 125 MB trace into a string cost a fresh 125 MB buffer (30 k page faults,
//   each zeroing a page) and a copy out of the page cache, only for the decoder to read it once.
// Approach: map the file (MAP_PRIVATE, read-only, populated at once), so the bytes are the page
//   cache's own; where mapping fails (or the file is empty), read(2) into a string sized from fstat.
// Limitations: a file truncated by another process while it is mapped makes reading past its new
//   end fault (SIGBUS), as with any mapped input; a file changed meanwhile may be seen half old,
//   half new (a read races the same way).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace phasealloc::cli {

class file_bytes {
 public:
  file_bytes() = default;
  file_bytes(const file_bytes&) = delete;
  file_bytes& operator=(const file_bytes&) = delete;
  ~file_bytes();

  /// Maps (or reads) the file at `path`; "" or an error message: "cannot read 'PATH': WHY".
  std::string load(const std::string& path);

  std::string_view view() const noexcept;

 private:
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::string read_;  ///< The contents when not mapped.
};

}  // namespace phasealloc::cli
