#include "phasealloc/policies/pytorch_rounding.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdint>
#include <optional>
#include <fmt/format.h>
#include <vector>

namespace phasealloc {
namespace {

std::size_t floor_log2(std::size_t v) noexcept { return static_cast<std::size_t>(std::bit_width(v)) - 1; }

/// A whole-token unsigned number, or nothing.
std::optional<std::uint64_t> parse_number(std::string_view token) {
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc{} || ptr != token.data() + token.size() || token.empty()) return std::nullopt;
  return v;
}

/// Splits the inside of "[...]" like torch's lexer: ',' and ':' are tokens of their own.
std::vector<std::string_view> lex(std::string_view text) {
  std::vector<std::string_view> tokens;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ',' || text[i] == ':') {
      if (i > start) tokens.push_back(text.substr(start, i - start));
      if (i < text.size()) tokens.push_back(text.substr(i, 1));
      start = i + 1;
    }
  }
  return tokens;
}

/// A division count: 0 or a power of two no larger than torch's parser accepts.
result<std::size_t, std::string> parse_division(std::string_view token, bool allow_zero) {
  const auto v = parse_number(token);
  if (!v) return fmt::format("\"{}\" is not a number of divisions", token);
  if ((*v == 0 && !allow_zero) || (*v != 0 && !std::has_single_bit(*v))) {
    return fmt::format("\"{}\": divisions must be a power of two{}", token, allow_zero ? " or 0" : "");
  }
  if (*v > pytorch_max_divisions) return fmt::format("\"{}\": at most {} divisions", token, pytorch_max_divisions);
  return static_cast<std::size_t>(*v);
}

result<pytorch_divisions, std::string> parse_list(std::string_view inside, pytorch_gt_rule rule) {
  pytorch_divisions out;
  auto& table = out.by_interval;
  const std::vector<std::string_view> tokens = lex(inside);
  bool first_key = true;
  std::size_t last_index = 0;
  for (std::size_t i = 0; i < tokens.size();) {
    const std::string_view key = tokens[i];
    if (key == "," || key == ":") return fmt::format("expected a size in MiB or '>' but found \"{}\"", key);
    if (i + 1 >= tokens.size() || tokens[i + 1] != ":") {
      return fmt::format("expected ':' after \"{}\"", key);
    }
    if (i + 2 >= tokens.size()) return fmt::format("missing divisions after \"{}:\"", key);
    const auto value = parse_division(tokens[i + 2], /*allow_zero=*/true);
    if (!value) return value.error();
    if (key == ">") {
      const std::size_t from = rule == pytorch_gt_rule::from_last_key ? last_index : last_index + 1;
      std::fill(table.begin() + static_cast<std::ptrdiff_t>(std::min(from, table.size())), table.end(), value.value());
    } else {
      const auto mib_bytes = parse_number(key);
      if (!mib_bytes) return fmt::format("\"{}\" is not a size in MiB or '>'", key);
      if (!std::has_single_bit(*mib_bytes)) return fmt::format("\"{}\": interval sizes must be powers of two", key);
      const std::size_t index = std::min(floor_log2(static_cast<std::size_t>(*mib_bytes)), table.size() - 1);
      if (first_key) {
        std::fill(table.begin(), table.begin() + static_cast<std::ptrdiff_t>(index), value.value());
        first_key = false;
      }
      table[index] = value.value();
      last_index = index;
    }
    i += 3;
    if (i < tokens.size()) {
      if (tokens[i] != ",") return fmt::format("expected ',' but found \"{}\"", tokens[i]);
      ++i;  // a trailing comma before ']' is accepted, as torch does
    }
  }
  return out;
}

}  // namespace

std::size_t pytorch_division_interval(std::size_t bytes) noexcept {
  if (bytes == 0) return 0;
  const std::size_t log2 = floor_log2(bytes);
  if (log2 <= pytorch_first_interval_log2) return 0;
  return std::min(log2 - pytorch_first_interval_log2, pytorch_division_intervals - 1);
}

std::size_t pytorch_divisions::for_size(std::size_t bytes) const noexcept {
  return by_interval[pytorch_division_interval(bytes)];
}

bool pytorch_divisions::enabled() const noexcept {
  return std::any_of(by_interval.begin(), by_interval.end(), [](std::size_t d) { return d > 1; });
}

std::size_t pytorch_roundup_power2_next_division(std::size_t bytes, std::size_t divisions) noexcept {
  if (std::has_single_bit(bytes)) return bytes;
  const std::size_t floor_pow2 = std::bit_floor(bytes);
  const std::size_t step = floor_pow2 >> floor_log2(divisions);
  if (step == 0) return floor_pow2 << 1;
  const std::size_t floor = bytes & ~(step - 1);
  return floor == bytes ? bytes : floor + step;
}

std::size_t pytorch_round_size(std::size_t bytes, const pytorch_divisions& divisions) noexcept {
  if (bytes < pytorch_min_block_bytes) return pytorch_min_block_bytes;
  const std::size_t d = divisions.for_size(bytes);
  // torch computes 512 * d; d <= 2^30 from its parser, so the product never wraps there. Here a
  // larger d (only reachable through the API) simply never satisfies the comparison.
  const bool divide = d > 1 && d <= SIZE_MAX / pytorch_min_block_bytes && bytes > pytorch_min_block_bytes * d;
  if (divide) return pytorch_roundup_power2_next_division(bytes, d);
  return round_up(bytes, pytorch_min_block_bytes);
}

result<pytorch_divisions, std::string> parse_pytorch_divisions(std::string_view text, pytorch_gt_rule rule) {
  std::string compact;
  for (const char c : text) {
    if (c != ' ' && c != '\t' && c != '\n') compact += c;
  }
  const std::string_view v = compact;
  if (v.empty()) return std::string("empty value (expected N or [size_mb:N,...,>:N])");
  if (v.front() != '[') {
    // The single-number form: every interval gets it; torch requires a power of two (not 0).
    const auto d = parse_division(v, /*allow_zero=*/false);
    if (!d) return d.error();
    pytorch_divisions out;
    out.by_interval.fill(d.value());
    return out;
  }
  if (v.size() < 2 || v.back() != ']') return fmt::format("\"{}\" does not end with ']'", v);
  const std::string_view inside = v.substr(1, v.size() - 2);
  if (inside.find_first_of("[]") != std::string_view::npos) {
    return fmt::format("unexpected bracket in \"{}\"", v);
  }
  return parse_list(inside, rule);
}

std::string format_pytorch_divisions(const pytorch_divisions& divisions) {
  const auto& t = divisions.by_interval;
  if (std::all_of(t.begin(), t.end(), [](std::size_t d) { return d == 0; })) return {};
  if (t[0] != 0 && std::all_of(t.begin(), t.end(), [&](std::size_t d) { return d == t[0]; })) {
    return fmt::format("{}", t[0]);
  }
  // The first key fills the run below it; middle intervals are named one by one; the last run
  // is its first interval plus '>' with the same value, which both '>' rules read alike.
  const std::size_t n = t.size();
  std::size_t first_end = 0;
  while (first_end + 1 < n && t[first_end + 1] == t[0]) ++first_end;
  std::size_t last_begin = n - 1;
  while (last_begin > first_end + 1 && t[last_begin - 1] == t[n - 1]) --last_begin;
  std::vector<std::string> items;
  const auto key = [](std::size_t index) { return std::size_t{1} << index; };
  items.push_back(fmt::format("{}:{}", key(first_end), t[0]));
  for (std::size_t i = first_end + 1; i < n; ++i) {
    items.push_back(fmt::format("{}:{}", key(i), t[i]));
    if (i == last_begin) {
      if (i + 1 < n) items.push_back(fmt::format(">:{}", t[i]));
      break;
    }
  }
  return fmt::format("[{}]", fmt::join(items, ","));
}

}  // namespace phasealloc
