// What the C entry points share: running a body as a C function that cannot throw, device
// argument checks, and reporting misuse that no engine saw.
//
// Every C function catches everything; failures return -1 (or NULL) and set the last error.
// Strings are returned from one thread-local buffer per function.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "device_slot.hpp"
#include "last_error.hpp"

namespace phasealloc::interpose {

/// An error (thrown inside as_string / as_status bodies only, never across the boundary).
struct api_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Keeps `value` in `buffer` and returns its C string.
inline const char* hold(std::string& buffer, std::string value) {
  buffer = std::move(value);
  return buffer.c_str();
}

/// Runs `body` (returning "" or an error message) as an int-returning C function.
template <class F>
int as_status(const char* what, F&& body) noexcept {
  try {
    const std::string error = body();
    if (error.empty()) return 0;
    set_last_error(fmt::format("{}: {}", what, error));
  } catch (const std::exception& e) {
    set_last_error(fmt::format("{}: {}", what, e.what()));
  } catch (...) {
    set_last_error(fmt::format("{}: unknown exception", what));
  }
  return -1;
}

/// Runs `body` (returning the string to hand out) as a const-char*-returning C function.
template <class F>
const char* as_string(const char* what, std::string& buffer, F&& body) noexcept {
  try {
    return hold(buffer, body());
  } catch (const std::exception& e) {
    set_last_error(fmt::format("{}: {}", what, e.what()));
  } catch (...) {
    set_last_error(fmt::format("{}: unknown exception", what));
  }
  return nullptr;
}

/// "" when `device` is an ordinal (or -1 with allow_all), else the error message.
std::string check_device(int device, bool allow_all);

/// The created slots `device` names (-1: every one); none when that device has no engine.
std::vector<device_slot*> slots_for(int device);

/// Misuse the interpose layer sees itself (no engine could report it): stderr, last error, the
/// interpose misuse count; aborts with the evidence under strict:true.
void report_interpose_misuse(const std::string& message) noexcept;

}  // namespace phasealloc::interpose
