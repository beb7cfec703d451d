#include "allocation_tags.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace phasealloc::interpose {
namespace {

constexpr std::size_t max_name_bytes = 200;

struct tag_names {
  std::mutex mutex;
  std::vector<std::string> names;  ///< names[i] is tag named_tag_base + i
};

tag_names& registry() {
  static tag_names* names = new tag_names;  // never destroyed: threads may tag during exit
  return *names;
}

/// The number of `name` in `r` (its lock held), 0 when it has none.
std::uint32_t number_locked(const tag_names& r, std::string_view name) {
  const auto it = std::find(r.names.begin(), r.names.end(), name);
  return it == r.names.end() ? 0 : named_tag_base + static_cast<std::uint32_t>(it - r.names.begin());
}

}  // namespace

result<std::uint32_t, std::string> tag_of(std::string_view name) {
  if (name.empty()) return std::string("an empty tag name (0 is \"untagged\"; give the tag a name)");
  if (name.size() > max_name_bytes) {
    return fmt::format("a tag name of {} bytes (at most {}): \"{}...\"", name.size(), max_name_bytes,
                       name.substr(0, 40));
  }
  if (std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
    return fmt::format("a control character in the tag name \"{}\"", name);
  }
  tag_names& r = registry();
  std::lock_guard lock(r.mutex);
  if (const std::uint32_t known = number_locked(r, name)) return known;
  r.names.emplace_back(name);
  return named_tag_base + static_cast<std::uint32_t>(r.names.size() - 1);
}

std::uint32_t find_tag(std::string_view name) {
  tag_names& r = registry();
  std::lock_guard lock(r.mutex);
  return number_locked(r, name);
}

std::string tag_name(std::uint32_t tag) {
  tag_names& r = registry();
  std::lock_guard lock(r.mutex);
  return tag >= named_tag_base && tag - named_tag_base < r.names.size() ? r.names[tag - named_tag_base]
                                                                        : std::string();
}

}  // namespace phasealloc::interpose
