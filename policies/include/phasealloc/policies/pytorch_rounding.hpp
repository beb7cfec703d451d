// PyTorch's request rounding, exactly as the native CUDACachingAllocator does it: `round_size`
// (c10/cuda/CUDACachingAllocator.cpp) with the `roundup_power2_divisions` table
// (c10/core/AllocatorConfig.cpp, AllocatorConfig::roundup_power2_divisions and
// parseRoundUpPower2Divisions).
//
// The rule
// --------
//   bytes < 512                          -> 512
//   d = divisions of bytes' interval;
//   d > 1 and bytes > 512 * d            -> next division: powers of two stay; otherwise the range
//                                           [2^k, 2^(k+1)) holding bytes is cut into d equal steps
//                                           of 2^k / d and bytes goes up to the next step
//                                           (1200 with d = 4: steps 1024, 1280, 1536, 1792 -> 1280)
//   otherwise                            -> up to a multiple of 512
//
// The division table
// ------------------
// 16 intervals, one per power of two from 1 MiB to 64 GiB; a size's interval is
// clamp(floor(log2(bytes)) - 20, 0, 15). Every entry defaults to 0 (no power-of-two rounding,
// only 512-byte rounding; 1 behaves the same).
//
//   interval | sizes it governs            | step with d divisions | worst waste (step - 1 byte)
//   ---------+-----------------------------+-----------------------+-----------------------------
//        0   | [0, 2 MiB)                  | 2^floor(log2 b) / d   | < 1/d of a power of two
//        1   | [2 MiB, 4 MiB)              | 2 MiB / d             | < 2 MiB / d
//        2   | [4 MiB, 8 MiB)              | 4 MiB / d             | < 4 MiB / d
//        k   | [2^k MiB, 2^(k+1) MiB)      | 2^k MiB / d           | < 2^k MiB / d
//       15   | [32 GiB, inf)               | 2^floor(log2 b) / d   | < 1/d of a power of two
//
// Properties (for divisions that are 0 or powers of two, all the parser accepts), checked over
// many sizes by pytorch_rounding_test.cpp: the result is >= bytes, a multiple of 512, a fixed
// point (rounding it again changes nothing), monotone in bytes, and, for bytes > 0, wastes less
// than max(512, floor_pow2(bytes) / d) bytes: where the division rule applies, bytes > 512 * d makes
// the step floor_pow2(bytes) / d a power of two of at least 512.
//
// The configuration grammar (roundup_power2_divisions:...)
// --------------------------------------------------------
//   "4"                         every interval gets 4 (a power of two; 0 is rejected, as in torch)
//   "[256:1,512:2,1024:4,>:8]"  keys are sizes in MiB (powers of two), values 0 or powers of two.
// What the CODE does (not what the docs say), key K meaning interval log2(K):
//   - key K sets interval log2(K), i.e. the sizes in [K MiB, 2K MiB), clamped to interval 15;
//   - the first numeric key also fills every interval below it;
//   - `>` fills from the last numeric key's interval to the end (overwriting that key's value;
//     pytorch_gt_rule::from_last_key), or, in newer torch (AcceleratorAllocatorConfig with its
//     ConfigTokenizer), from the interval after it (pytorch_gt_rule::after_last_key).
// So "[256:1,512:2,1024:4,>:8]" gives [0, 512 MiB) -> 1, [512 MiB, 1 GiB) -> 2 and, under the
// older rule, [1 GiB, inf) -> 8 (the 4 is overwritten), one interval off the docs' "2 divisions
// between 256MB and 512MB".
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "phasealloc/status.hpp"
#include "phasealloc/types.hpp"

namespace phasealloc {

inline constexpr std::size_t pytorch_min_block_bytes = 512;  ///< kMinBlockSize.
inline constexpr std::size_t pytorch_division_intervals = 16;  ///< kRoundUpPowerOfTwoIntervals.
inline constexpr std::size_t pytorch_first_interval_log2 = 20;  ///< Intervals start at 1 MiB.
/// Largest division count torch's parser accepts (it reads the value with std::stoi).
inline constexpr std::size_t pytorch_max_divisions = std::size_t{1} << 30;

/// How `>` in a bracketed list fills the table (see the header comment).
enum class pytorch_gt_rule {
  from_last_key,   ///< AllocatorConfig / CUDAAllocatorConfig: from the last key's interval on.
  after_last_key,  ///< AcceleratorAllocatorConfig (ConfigTokenizer): from the interval after it.
};

/// The roundup_power2_divisions table: divisions per interval (0 or 1 = off).
struct pytorch_divisions {
  std::array<std::size_t, pytorch_division_intervals> by_interval{};

  /// Divisions for a request of `bytes` (AllocatorConfig::roundup_power2_divisions(size)).
  std::size_t for_size(std::size_t bytes) const noexcept;
  /// Whether any interval rounds beyond 512 bytes.
  bool enabled() const noexcept;

  friend bool operator==(const pytorch_divisions&, const pytorch_divisions&) = default;
};

/// The interval of `bytes`: clamp(floor(log2(bytes)) - 20, 0, 15).
std::size_t pytorch_division_interval(std::size_t bytes) noexcept;

/// roundup_power2_next_division: powers of two stay; otherwise up to the next of `divisions`
/// equal steps between the powers of two around `bytes` (the next power of two when the step
/// would be 0). REQUIRES: bytes > 0, divisions >= 2.
std::size_t pytorch_roundup_power2_next_division(std::size_t bytes, std::size_t divisions) noexcept;

/// round_size: what the native allocator turns a request of `bytes` into.
std::size_t pytorch_round_size(std::size_t bytes, const pytorch_divisions& divisions) noexcept;

/// Parses a roundup_power2_divisions value ("4" or "[256:1,512:2,>:8]"); whitespace is ignored,
/// as torch's lexer drops it. The error names the offending token.
result<pytorch_divisions, std::string> parse_pytorch_divisions(std::string_view text,
                                                               pytorch_gt_rule rule = pytorch_gt_rule::from_last_key);

/// The shortest value that parses back to `divisions` under either `>` rule: "" when every
/// interval is 0, "N" when all are the same power of two, else a bracketed list.
std::string format_pytorch_divisions(const pytorch_divisions& divisions);

}  // namespace phasealloc
