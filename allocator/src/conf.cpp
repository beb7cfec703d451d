#include "phasealloc/conf.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace phasealloc {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

}  // namespace

result<std::vector<conf_entry>, std::string> parse_conf(std::string_view text) {
  std::vector<conf_entry> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    // One entry runs to the next top-level comma (commas inside [...] belong to the value).
    std::size_t end = pos;
    int depth = 0;
    for (; end < text.size(); ++end) {
      if (text[end] == '[') ++depth;
      if (text[end] == ']' && --depth < 0) return fmt::format("unbalanced ']' at offset {} in \"{}\"", end, text);
      if (text[end] == ',' && depth == 0) break;
    }
    if (depth != 0) return fmt::format("unterminated '[' in \"{}\"", text);
    const std::string_view item = trim(text.substr(pos, end - pos));
    pos = end + 1;
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) {
      return fmt::format("entry \"{}\" has no ':' (expected key:value)", item);
    }
    const std::string_view key = trim(item.substr(0, colon));
    const std::string_view value = trim(item.substr(colon + 1));
    if (key.empty()) return fmt::format("entry \"{}\" has an empty key", item);
    if (value.empty()) return fmt::format("key '{}' has an empty value", key);
    if (std::any_of(out.begin(), out.end(), [&](const conf_entry& e) { return e.key == key; })) {
      return fmt::format("key '{}' is given twice", key);
    }
    out.push_back({std::string(key), std::string(value)});
  }
  return out;
}

std::optional<std::size_t> parse_bytes(std::string_view text) {
  text = trim(text);
  std::uint64_t number = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc{} || ptr == text.data()) return std::nullopt;
  std::string unit(ptr, text.data() + text.size());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  struct suffix { std::string_view name; std::uint64_t scale; };
  static constexpr suffix suffixes[] = {
      {"", 1}, {"b", 1}, {"kib", kib}, {"mib", mib}, {"gib", gib}, {"tib", gib * 1024},
      {"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000ull * 1000 * 1000}, {"tb", 1000ull * 1000 * 1000 * 1000},
      {"k", kib}, {"m", mib}, {"g", gib}};
  for (const suffix& s : suffixes) {
    if (unit == s.name) {
      if (number > SIZE_MAX / s.scale) return std::nullopt;
      return static_cast<std::size_t>(number * s.scale);
    }
  }
  return std::nullopt;
}

conf_reader::conf_reader(std::string context, std::vector<conf_entry> entries)
    : context_(std::move(context)), entries_(std::move(entries)), used_(entries_.size(), false) {}

const conf_entry* conf_reader::find(std::string_view key) {
  known_.emplace_back(key);
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].key == key) {
      used_[i] = true;
      return &entries_[i];
    }
  }
  return nullptr;
}

void conf_reader::fail(std::string_view key, std::string_view message) {
  if (!error_) error_ = fmt::format("{}: bad value for '{}': {}", context_, key, message);
}

std::optional<std::string> conf_reader::get_string(std::string_view key) {
  const conf_entry* e = find(key);
  if (e == nullptr) return std::nullopt;
  return e->value;
}

std::optional<bool> conf_reader::get_bool(std::string_view key) {
  const conf_entry* e = find(key);
  if (e == nullptr) return std::nullopt;
  if (e->value == "true" || e->value == "True" || e->value == "1") return true;
  if (e->value == "false" || e->value == "False" || e->value == "0") return false;
  fail(key, fmt::format("\"{}\" is not a boolean (expected true or false)", e->value));
  return std::nullopt;
}

std::optional<std::uint64_t> conf_reader::get_uint(std::string_view key) {
  const conf_entry* e = find(key);
  if (e == nullptr) return std::nullopt;
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(e->value.data(), e->value.data() + e->value.size(), v);
  if (ec != std::errc{} || ptr != e->value.data() + e->value.size()) {
    fail(key, fmt::format("\"{}\" is not a non-negative integer", e->value));
    return std::nullopt;
  }
  return v;
}

std::optional<double> conf_reader::get_double(std::string_view key) {
  const conf_entry* e = find(key);
  if (e == nullptr) return std::nullopt;
  std::size_t consumed = 0;
  double v = 0;
  try {
    v = std::stod(e->value, &consumed);
  } catch (...) {
    consumed = 0;
  }
  if (consumed != e->value.size() || consumed == 0) {
    fail(key, fmt::format("\"{}\" is not a number", e->value));
    return std::nullopt;
  }
  if (!std::isfinite(v)) {  // nan, inf and overflowing literals: no key means any of them
    fail(key, fmt::format("\"{}\" is not a finite number", e->value));
    return std::nullopt;
  }
  return v;
}

std::optional<std::size_t> conf_reader::get_bytes(std::string_view key) {
  const conf_entry* e = find(key);
  if (e == nullptr) return std::nullopt;
  auto v = parse_bytes(e->value);
  if (!v) fail(key, fmt::format("\"{}\" is not a byte size (e.g. 512, 64KiB, 2GiB)", e->value));
  return v;
}

std::optional<std::string> conf_reader::finish() const {
  if (error_) return error_;
  std::string unknown;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (!used_[i]) unknown += (unknown.empty() ? "'" : ", '") + entries_[i].key + "'";
  }
  if (unknown.empty()) return std::nullopt;
  std::vector<std::string> valid = known_;
  std::sort(valid.begin(), valid.end());
  valid.erase(std::unique(valid.begin(), valid.end()), valid.end());
  return fmt::format("{}: unknown key {}; valid keys: {}", context_, unknown, fmt::join(valid, ", "));
}

}  // namespace phasealloc
