#include "file_bytes.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace phasealloc::cli {
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

std::string file_bytes::load(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fmt::format("cannot read '{}': {}", path, std::strerror(errno));
  struct stat st {};
  const std::size_t size = ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<std::size_t>(st.st_size) : 0;
  const bool ok = read_all(fd, size, read_);
  ::close(fd);
  if (!ok) return fmt::format("cannot read '{}': read error", path);
  return {};
}

}  // namespace phasealloc::cli
