#include "launcher.hpp"

#include <cstdlib>
#include <filesystem>

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

}  // namespace

std::string find_launcher(const char* what) {
  if (const char* env = std::getenv("PHASEALLOC_RUN"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  if (const fs::path beside = executable_dir() / "phasealloc-run"; fs::exists(beside, ec)) return beside.string();
  const fs::path in_tree = fs::path(PHASEALLOC_SOURCE_DIR) / "interpose" / "python" / "bin" / "phasealloc-run";
  if (fs::exists(in_tree, ec)) return in_tree.string();
  throw command_error(fmt::format("{}: phasealloc-run not found (set PHASEALLOC_RUN to its path)", what));
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string source_python_path() {
  std::error_code ec;
  const fs::path pkg = fs::path(PHASEALLOC_SOURCE_DIR) / "interpose" / "python";
  if (!fs::exists(pkg, ec)) return "";
  const char* old = std::getenv("PYTHONPATH");
  return pkg.string() + (old != nullptr && *old != '\0' ? ":" + std::string(old) : "");
}

}  // namespace phasealloc::cli
