// LEB128 varints and zigzag, shared by the binary trace writer and reader (private header).
#pragma once

#include <cstdint>
#include <string>

namespace phasealloc::detail {

inline void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

/// Zigzag of a difference taken modulo 2^64: small positive and negative deltas stay small.
inline std::uint64_t zigzag(std::uint64_t delta) noexcept {
  const auto s = static_cast<std::int64_t>(delta);
  return (static_cast<std::uint64_t>(s) << 1) ^ static_cast<std::uint64_t>(s >> 63);
}

inline std::uint64_t unzigzag(std::uint64_t z) noexcept { return (z >> 1) ^ (~(z & 1) + 1); }

}  // namespace phasealloc::detail
