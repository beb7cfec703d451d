// CUDA_VISIBLE_DEVICES: which of the simulated machine's GPUs this process sees, and in what order.
//
// Rationale: launchers give each worker its own GPU by setting CUDA_VISIBLE_DEVICES in the
// worker's environment (Ray does so for every actor, to its assigned GPU ids, and to "" for actors
// that asked for none), so every worker uses its ordinal 0. A simulator that ignored the variable
// would put every worker on the machine's GPU 0: NCCL rejects two ranks on one GPU ("duplicate GPU
// detected"), and frameworks that match processes by GPU UUID (weight sync over CUDA IPC) match
// the wrong ones.
//
// Approach: the CUDA runtime's and driver's ordinals index the visible list; the machine GPU
// behind an ordinal gives the identity a GPU has across processes (UUID, PCI bus id, NCCL's GPU);
// NVML lists the machine's GPUs, as the real NVML does whatever the variable says. The list is read
// once, as the driver does at initialisation, with the driver's rules: comma-separated entries,
// each a GPU index or a UUID ("GPU-" and a unique prefix of the UUID's text); the list ends at the
// first entry that names no GPU, or one already named; set and empty means no GPU.
//
// Limitations: MIG entries ("MIG-...") end the list like any other unknown name. Each process
// still has its own simulated memory: two processes that see the same machine GPU do not share
// its capacity.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "simcuda/core.hpp"

namespace simcuda {

namespace {

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t");
  std::size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

/// The machine GPU an entry names, or -1.
int machine_device_named(const std::string& entry) {
  const int machine = current_config().device_count;
  if (entry.empty()) return -1;
  if (entry.rfind("GPU-", 0) == 0) {
    int found = -1;
    for (int d = 0; d < machine; ++d) {
      if (device_uuid_text(d).rfind(entry, 0) == 0) {
        if (found >= 0) return -1;  // a prefix of two UUIDs names neither
        found = d;
      }
    }
    return found;
  }
  int index = 0;
  for (char c : entry) {
    if (c < '0' || c > '9') return -1;
    index = index * 10 + (c - '0');
    if (index >= machine) return -1;
  }
  return index;
}

std::vector<int> read_visible() {
  const int machine = current_config().device_count;
  std::vector<int> visible;
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (env == nullptr) {
    for (int d = 0; d < machine; ++d) visible.push_back(d);
    return visible;
  }
  const std::string text = env;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const int d = machine_device_named(trim(text.substr(start, comma - start)));
    bool repeated = false;
    for (int v : visible) repeated = repeated || v == d;
    if (d < 0 || repeated) break;
    visible.push_back(d);
    start = comma + 1;
  }
  return visible;
}

const std::vector<int>& visible() {
  static const std::vector<int> list = read_visible();
  return list;
}

}  // namespace

int device_count() noexcept { return static_cast<int>(visible().size()); }

int machine_device_count() noexcept { return current_config().device_count; }

int machine_device(int ordinal) noexcept {
  if (!valid_device(ordinal)) fatal("machine_device with an invalid ordinal (callers check first)");
  return visible()[static_cast<std::size_t>(ordinal)];
}

int ordinal_of_machine_device(int machine) noexcept {
  for (std::size_t i = 0; i < visible().size(); ++i)
    if (visible()[i] == machine) return static_cast<int>(i);
  return -1;
}

void device_uuid(int machine, unsigned char bytes[16]) noexcept {
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<unsigned char>(0x5a ^ (i * 7) ^ machine);
}

std::string device_uuid_text(int machine) {
  unsigned char b[16];
  device_uuid(machine, b);
  char text[64];
  std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

}  // namespace simcuda
