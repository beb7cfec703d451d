// SIMCUDA_GPU: the simulated machine, in the key:value grammar of PYTORCH_CUDA_ALLOC_CONF.
//
//   count:N          GPUs in the machine (1..16)                          [1]
//   memory:SIZE      capacity of each, e.g. 80GiB, 24GB, 512MiB            [80GiB]
//   name:TEXT        cudaDeviceProp::name (no commas)                      [H100 80GB]
//   cc:MAJOR.MINOR   compute capability                                    [9.0]
//   sms:N            multiprocessors                                       [132]
//   events:MODE      record | deferred[:TICKS] | sync (see core.hpp)       [record]
//   fill:BYTE        byte written over every new allocation (0x00..0xff)   [none]
//   strict:0|1       abort at the first unemulated call                    [0]
//   quiet:0|1        no start-up lines (the banner, the value-level note)  [0]
//   values:LEVEL     off | observable | exact (core.hpp's value_level)      [observable]
//   host_vmm:0|1     host-located cuMemCreate (CUDA 12.2+ drivers)          [1]
//
// A bad value is fatal: a job must not run on a GPU it did not ask for.
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "simcuda/core.hpp"

namespace simcuda {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.erase(s.begin());
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

bool parse_u64(const std::string& text, std::uint64_t& out, int base = 10) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, base);
  if (errno != 0 || end == text.c_str() || *end != '\0') return false;
  out = v;
  return true;
}

/// "80GiB", "80G", "24GB", "512MiB", "1048576": binary units; GB/MB/KB read as binary too
/// (GPU marketing sizes are binary: an "80GB" H100 has 80 GiB).
bool parse_size(const std::string& text, std::size_t& out) {
  std::size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  if (digits == 0) return false;
  std::string number = text.substr(0, digits);
  std::string unit = trim(text.substr(digits));
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(number.c_str(), &end);
  if (errno != 0 || *end != '\0' || !(value > 0)) return false;
  double scale = 1;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KiB") scale = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
  else return false;
  double bytes = value * scale;
  if (bytes < 64.0 * 1024 * 1024 || bytes > 64.0 * 1024 * 1024 * 1024 * 1024) return false;
  out = static_cast<std::size_t>(bytes);
  out &= ~((std::size_t{2} << 20) - 1);  // whole 2 MiB pages
  return out > 0;
}

bool parse_flag(const std::string& text, bool& out) {
  if (text == "1" || text == "true" || text == "True") { out = true; return true; }
  if (text == "0" || text == "false" || text == "False") { out = false; return true; }
  return false;
}

}  // namespace

std::optional<config> parse_config(const std::string& text, std::string& error) {
  config c;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    std::string item = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) continue;
    std::size_t colon = item.find(':');
    if (colon == std::string::npos) {
      error = "'" + item + "' is not key:value";
      return std::nullopt;
    }
    std::string key = trim(item.substr(0, colon));
    std::string value = trim(item.substr(colon + 1));
    auto bad = [&](const char* expected) {
      error = "bad value '" + value + "' for " + key + " (expected " + expected + ")";
      return std::nullopt;
    };
    std::uint64_t n = 0;
    if (key == "count") {
      if (!parse_u64(value, n) || n < 1 || n > 16) return bad("1..16");
      c.device_count = static_cast<int>(n);
    } else if (key == "memory") {
      if (!parse_size(value, c.gpu.memory_bytes)) return bad("a size from 64MiB to 64TiB, e.g. 80GiB");
    } else if (key == "name") {
      if (value.empty() || value.size() > 200) return bad("1..200 characters");
      c.gpu.name = value;
    } else if (key == "cc") {
      std::size_t dot = value.find('.');
      std::uint64_t major = 0, minor = 0;
      if (dot == std::string::npos || !parse_u64(value.substr(0, dot), major) ||
          !parse_u64(value.substr(dot + 1), minor) || major < 3 || major > 20 || minor > 9)
        return bad("MAJOR.MINOR, e.g. 9.0");
      c.gpu.cc_major = static_cast<int>(major);
      c.gpu.cc_minor = static_cast<int>(minor);
    } else if (key == "sms") {
      if (!parse_u64(value, n) || n < 1 || n > 1024) return bad("1..1024");
      c.gpu.sm_count = static_cast<int>(n);
    } else if (key == "events") {
      if (value == "record") c.events = event_mode::at_record;
      else if (value == "sync") c.events = event_mode::at_sync;
      else if (value == "deferred") c.events = event_mode::deferred;
      else if (value.rfind("deferred:", 0) == 0 && parse_u64(value.substr(9), n) && n >= 1 && n <= 1000000) {
        c.events = event_mode::deferred;
        c.deferred_ticks = n;
      } else return bad("record, sync, deferred or deferred:TICKS");
    } else if (key == "fill") {
      bool ok = value.rfind("0x", 0) == 0 ? parse_u64(value.substr(2), n, 16) : parse_u64(value, n);
      if (!ok || n > 255) return bad("a byte, 0..255 or 0x00..0xff");
      c.fill_byte = static_cast<std::uint8_t>(n);
    } else if (key == "strict") {
      if (!parse_flag(value, c.strict)) return bad("0 or 1");
    } else if (key == "quiet") {
      if (!parse_flag(value, c.quiet)) return bad("0 or 1");
    } else if (key == "host_vmm") {
      if (!parse_flag(value, c.host_vmm)) return bad("0 or 1");
    } else if (key == "values") {
      if (value == "exact") c.values = value_level::exact;
      else if (value == "observable") c.values = value_level::observable;
      else if (value == "off") c.values = value_level::off;
      else return bad("off, observable or exact");
    } else if (key == "nccl_peers") {
      if (value == "real") c.nccl_virtual_peers = false;
      else if (value == "virtual") c.nccl_virtual_peers = true;
      else return bad("real or virtual");
    } else {
      error = "unknown key '" + key +
              "' (valid: count, memory, name, cc, sms, events, fill, strict, quiet, values, host_vmm, nccl_peers)";
      return std::nullopt;
    }
  }
  return c;
}

const char* value_level_name(value_level level) noexcept {
  switch (level) {
    case value_level::off: return "off";
    case value_level::observable: return "observable";
    case value_level::exact: return "exact";
  }
  return "off";
}

const config& current_config() {
  static const config parsed = [] {
    const char* env = std::getenv("SIMCUDA_GPU");
    std::string error;
    std::optional<config> c = parse_config(env ? env : "", error);
    if (!c) {
      std::fprintf(stderr, "simcuda: SIMCUDA_GPU='%s': %s\n", env, error.c_str());
      std::fflush(stderr);
      std::_Exit(2);
    }
    if (!c->quiet)
      std::fprintf(stderr, "simcuda: simulated %d x %s, %zu MiB each (kernels are not run; values: %s)\n",
                   c->device_count, c->gpu.name.c_str(), c->gpu.memory_bytes >> 20, value_level_name(c->values));
    return *c;
  }();
  return parsed;
}

}  // namespace simcuda
