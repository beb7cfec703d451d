#include "launcher.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "commands.hpp"

namespace phasealloc::cli {
namespace {

namespace fs = std::filesystem;

fs::path executable_dir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : self.parent_path();
}

// The source tree of a build-tree executable: the build folder (the first folder above the
// executable with a CMakeCache.txt) holds phasealloc-source-tree, written by CMake and never
// installed. An installed executable has no such folder above it, so it never reaches a source tree.
fs::path build_source_tree() {
  std::error_code ec;
  for (fs::path dir = executable_dir(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / "CMakeCache.txt", ec)) {
      std::ifstream in(dir / "phasealloc-source-tree");
      std::string line;
      if (!in || !std::getline(in, line) || line.empty()) return {};
      return fs::path(line);
    }
    if (dir == dir.root_path()) break;
  }
  return {};
}

}  // namespace

std::string find_launcher(const char* what) {
  if (const char* env = std::getenv("PHASEALLOC_RUN"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  if (const fs::path beside = executable_dir() / "phasealloc-run"; fs::exists(beside, ec)) return beside.string();
  if (const fs::path tree = build_source_tree(); !tree.empty()) {
    const fs::path in_tree = tree / "interpose" / "python" / "bin" / "phasealloc-run";
    if (fs::exists(in_tree, ec)) return in_tree.string();
  }
  throw command_error(fmt::format("{}: phasealloc-run not found (set PHASEALLOC_RUN to its path)", what));
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string source_python_path() {
  std::error_code ec;
  const fs::path tree = build_source_tree();
  if (tree.empty()) return "";
  const fs::path pkg = tree / "interpose" / "python";
  if (!fs::exists(pkg, ec)) return "";
  const char* old = std::getenv("PYTHONPATH");
  return pkg.string() + (old != nullptr && *old != '\0' ? ":" + std::string(old) : "");
}

}  // namespace phasealloc::cli
