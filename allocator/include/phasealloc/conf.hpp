// The configuration grammar shared by PHASEALLOC_CONF, the CLI's policy specs and the `pytorch`
// policy's PYTORCH_CUDA_ALLOC_CONF strings: "key:value,key:value", where a value may be a
// bracketed list "[256:1,512:2,>:8]" (kept verbatim, brackets included).
//
// Parsing is separate from meaning: parse_conf splits; conf_reader takes typed values by key
// and reports unknown keys with the list of valid ones, so a typo never passes silently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "phasealloc/status.hpp"
#include "phasealloc/types.hpp"

namespace phasealloc {

struct conf_entry {
  std::string key;
  std::string value;
};

/// Splits "k:v,k:v". Errors name the offending text. Keys are trimmed; empty input is no entries.
result<std::vector<conf_entry>, std::string> parse_conf(std::string_view text);

/// Reads typed values from parsed entries. Every getter records the key as known; finish()
/// reports entries whose key no getter asked for, and the first bad value seen.
class conf_reader {
 public:
  conf_reader(std::string context, std::vector<conf_entry> entries);

  std::optional<std::string> get_string(std::string_view key);
  std::optional<bool> get_bool(std::string_view key);             ///< true/false/True/False/1/0
  std::optional<std::uint64_t> get_uint(std::string_view key);
  std::optional<double> get_double(std::string_view key);
  /// A byte size: a plain number of bytes or with a unit suffix: 512, 64KiB, 20MiB, 2GiB, 80GB.
  std::optional<std::size_t> get_bytes(std::string_view key);
  /// Records an error about `key` (e.g. a value out of range).
  void fail(std::string_view key, std::string_view message);

  /// An error naming every unknown key (and the valid ones) or the first bad value; or nothing.
  std::optional<std::string> finish() const;

 private:
  const conf_entry* find(std::string_view key);

  std::string context_;
  std::vector<conf_entry> entries_;
  std::vector<std::string> known_;
  std::vector<bool> used_;
  std::optional<std::string> error_;
};

/// Parses a byte size with an optional unit (B, KB, KiB, MB, MiB, GB, GiB, TB, TiB; KB etc. are
/// powers of 1000). Returns nullopt on anything else.
std::optional<std::size_t> parse_bytes(std::string_view text);

}  // namespace phasealloc
