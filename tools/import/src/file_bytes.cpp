#include "file_bytes.hpp"

#include <fstream>
#include <iterator>

namespace phasealloc::detail {

result<std::string, trace_error> read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return trace_error{path.string(), 0, 0, "a readable file", "it cannot be opened"};
  }
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) {
    return trace_error{path.string(), bytes.size(), 0, "readable bytes", "a read error"};
  }
  return bytes;
}

}  // namespace phasealloc::detail
