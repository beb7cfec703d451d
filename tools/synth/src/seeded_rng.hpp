// A small deterministic random source: the same seed gives the same draws on every platform.
//
// Design note
// Rationale: std:: distributions are implementation-defined, so a trace drawn with them could
//   differ between standard libraries; synthesized traces must be reproducible from their seed.
// Approach: splitmix64 (Steele, Lea, Flood 2014) for the bits; uniform doubles from the top 53
//   bits; integers by multiply-shift (Lemire) of the top 32 bits, no floating point
//   in integer draws.
// Limitations: not for cryptography; the tiny multiply-shift bias (< 2^-32 for our ranges) is
//   irrelevant here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace phasealloc::detail::synth {

class seeded_rng {
 public:
  explicit seeded_rng(std::uint64_t seed) noexcept : state_(seed) {}

  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  /// Uniform in [0, 1).
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Uniform integer in [lo, hi] (lo <= hi, hi - lo < 2^32).
  std::size_t between(std::size_t lo, std::size_t hi) noexcept {
    const std::uint64_t span = static_cast<std::uint64_t>(hi - lo) + 1;  // <= 2^32: the product fits
    return lo + static_cast<std::size_t>(((next() >> 32) * span) >> 32);
  }

 private:
  std::uint64_t state_;
};

}  // namespace phasealloc::detail::synth
