// Errors as values inside the engine: an error code and a small result<T, E> carrier.
#pragma once

#include <string_view>
#include <utility>
#include <variant>

#include "phasealloc/check.hpp"

namespace phasealloc {

enum class errc {
  ok = 0,
  out_of_memory,     ///< The device has no memory for the request (an expected outcome).
  device_refused,    ///< The device failed a call for another reason (driver error).
  not_supported,     ///< The device cannot do this (e.g. map on a device without virtual reserve).
  invalid_argument,  ///< A caller passed a value outside the contract.
  unknown_pointer,   ///< A free named an address the engine never handed out.
  double_free,       ///< A free named a block that is already free.
  interior_pointer,  ///< A free named an address inside a block, not its start.
  size_mismatch,     ///< A free's size differs from the size that was allocated.
};

constexpr std::string_view to_string(errc e) noexcept {
  switch (e) {
    case errc::ok: return "ok";
    case errc::out_of_memory: return "out of memory";
    case errc::device_refused: return "device refused";
    case errc::not_supported: return "not supported";
    case errc::invalid_argument: return "invalid argument";
    case errc::unknown_pointer: return "unknown pointer";
    case errc::double_free: return "double free";
    case errc::interior_pointer: return "interior pointer";
    case errc::size_mismatch: return "size mismatch";
  }
  return "unknown error";
}

/// Either a T or an error E. E defaults to errc; anything with more context may be used.
template <class T, class E = errc>
class [[nodiscard]] result {
 public:
  result(T value) : data_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  result(E error) : data_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit by design

  bool has_value() const noexcept { return data_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & {
    PHASEALLOC_CHECK(has_value(), "result::value() on an error");
    return std::get<0>(data_);
  }
  const T& value() const& {
    PHASEALLOC_CHECK(has_value(), "result::value() on an error");
    return std::get<0>(data_);
  }
  T&& value() && {
    PHASEALLOC_CHECK(has_value(), "result::value() on an error");
    return std::get<0>(std::move(data_));
  }
  const E& error() const {
    PHASEALLOC_CHECK(!has_value(), "result::error() on a value");
    return std::get<1>(data_);
  }
  T value_or(T fallback) const { return has_value() ? std::get<0>(data_) : fallback; }

 private:
  std::variant<T, E> data_;
};

}  // namespace phasealloc
