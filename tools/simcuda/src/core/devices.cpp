// The device list and each thread's current device (cudaSetDevice is per thread).
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "simcuda/core.hpp"

namespace simcuda {

namespace {
thread_local int t_current_device = 0;
}

namespace {

/// The GPUs this process sees, by machine index, in ordinal order. Read at the first question
/// about devices, as the driver reads CUDA_VISIBLE_DEVICES at cuInit: a process may set it after it
/// started and before it uses CUDA (Ray sets it in an actor's process when it assigns the actor its
/// GPUs), but not after.
const std::vector<int>& visible_devices() {
  static const std::vector<int> visible = [] {
    const config& c = current_config();
    std::vector<int> shown;
    if (const char* text = std::getenv("CUDA_VISIBLE_DEVICES")) {
      shown = parse_visible_devices(text, c.device_count);
      if (!c.quiet && static_cast<int>(shown.size()) != c.device_count) {
        std::string list;
        for (int i : shown) list += (list.empty() ? "" : ",") + std::to_string(i);
        std::fprintf(stderr, "simcuda: CUDA_VISIBLE_DEVICES='%s': this process sees GPU %s of %d\n", text,
                     list.empty() ? "(none)" : list.c_str(), c.device_count);
      }
    } else {
      for (int i = 0; i < c.device_count; ++i) shown.push_back(i);
    }
    return shown;
  }();
  return visible;
}

}  // namespace

int device_count() noexcept { return static_cast<int>(visible_devices().size()); }

int machine_device_count() noexcept { return current_config().device_count; }

int machine_device(int device) noexcept {
  if (!valid_device(device)) fatal("machine_device with an invalid ordinal (callers check first)");
  return visible_devices()[static_cast<std::size_t>(device)];
}

unsigned char gpu_uuid_byte(int machine_index, int i) noexcept {
  return static_cast<unsigned char>(0x5a ^ (i * 7) ^ machine_index);
}

std::string gpu_uuid_text(int machine_index) {
  unsigned char b[16];
  for (int i = 0; i < 16; ++i) b[i] = gpu_uuid_byte(machine_index, i);
  char text[64];
  std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

std::vector<int> parse_visible_devices(const std::string& text, int machine_count) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string entry = text.substr(pos, end - pos);
    while (!entry.empty() && std::isspace(static_cast<unsigned char>(entry.front()))) entry.erase(entry.begin());
    while (!entry.empty() && std::isspace(static_cast<unsigned char>(entry.back()))) entry.pop_back();
    int found = -1;
    if (!entry.empty() && std::all_of(entry.begin(), entry.end(), [](unsigned char c) { return std::isdigit(c); })) {
      if (entry.size() < 6) found = std::stoi(entry);
      if (found >= machine_count) found = -1;
    } else if (entry.rfind("GPU-", 0) == 0) {
      for (int i = 0; i < machine_count; ++i) {
        if (gpu_uuid_text(i).rfind(entry, 0) != 0) continue;
        if (found >= 0) {  // an ambiguous prefix names no GPU
          found = -1;
          break;
        }
        found = i;
      }
    }
    if (found < 0 || std::find(out.begin(), out.end(), found) != out.end()) break;
    out.push_back(found);
    pos = end + 1;
  }
  return out;
}

bool valid_device(int device) noexcept { return device >= 0 && device < device_count(); }

int current_device() noexcept { return t_current_device; }

void set_current_device(int device) noexcept {
  if (!valid_device(device)) fatal("set_current_device with an invalid ordinal (callers check first)");
  t_current_device = device;
  mark_device_active(device);
}

}  // namespace simcuda

namespace simcuda {

namespace {
std::atomic<bool> g_active[16];
}

bool device_active(int device) noexcept { return valid_device(device) && g_active[device].load(); }

void mark_device_active(int device) noexcept {
  if (valid_device(device)) g_active[device].store(true);
}

}  // namespace simcuda
