#include "phasealloc/trace/file_bytes.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <istream>
#include <iterator>

namespace phasealloc {
namespace {

/// read(2) from `fd` to its end into `bytes`, starting with room for `expected` bytes; whether it
/// read without error.
bool read_all(int fd, std::size_t expected, std::string& bytes) {
  bytes.resize(expected + 1);  // one byte more: reaching the end takes no second resize
  std::size_t filled = 0;
  while (true) {
    if (filled == bytes.size()) bytes.resize(bytes.size() * 2);
    const ssize_t got = ::read(fd, bytes.data() + filled, bytes.size() - filled);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      bytes.resize(filled);
      return false;
    }
    filled += static_cast<std::size_t>(got);
  }
  bytes.resize(filled);
  return true;
}

}  // namespace

result<std::string, trace_error> read_file_bytes(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return trace_error{path.string(), 0, 0, "a readable file", std::strerror(errno)};
  struct stat st {};
  const std::size_t size = ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<std::size_t>(st.st_size) : 0;
  std::string bytes;
  const bool ok = read_all(fd, size, bytes);
  ::close(fd);
  if (!ok) return trace_error{path.string(), bytes.size(), 0, "readable bytes", "a read error"};
  return bytes;
}

result<std::string, trace_error> read_stream_bytes(std::istream& in, std::string_view source_name) {
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) return trace_error{std::string(source_name), bytes.size(), 0, "readable bytes", "a read error"};
  return bytes;
}

}  // namespace phasealloc
