#include "process_title.hpp"

#include <array>
#include <cctype>
#include <fstream>
#include <iterator>

namespace phasealloc::interpose {

std::string role_from_title(std::string_view title) {
  for (std::string_view prefix : std::array<std::string_view, 2>{"ray::", "VLLM::"}) {
    if (title.substr(0, prefix.size()) != prefix) continue;
    std::string role;  // letters, digits, '_' and '-': the name, and nothing a file name cannot hold
    for (char c : title.substr(prefix.size())) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') break;
      role += c;
    }
    return role;
  }
  return {};
}

std::string process_title_role() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  if (!in) return {};
  std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return role_from_title(std::string_view(cmdline.c_str()));  // argv[0]: up to the first NUL
}

}  // namespace phasealloc::interpose
