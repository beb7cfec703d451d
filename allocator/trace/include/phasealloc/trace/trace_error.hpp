// The one error every trace, snapshot and log parser returns.
//
// Design note
// Rationale: a bad file gets an error that names the file, the offset and what was expected.
//   One shape for every reader (binary, text, pickle, JSON, CSV) lets the CLI
//   print them the same way and lets the fuzz targets treat every failure alike.
// Approach: a plain value carried in result<T, trace_error>; message() formats it.
//   Byte-oriented readers fill `offset`; line-oriented ones (text traces, CSV) also fill `line`.
// Limitations: JSON structure errors (a field of the wrong type) cannot name a byte offset, because
//   the JSON library keeps none after parsing; they name the event instead.
#pragma once

#include <cstdint>
#include <string>

namespace phasealloc {

struct trace_error {
  std::string file;          ///< The source name the caller gave (a path, or a label for memory input).
  std::uint64_t offset = 0;  ///< Byte offset from the start of the input.
  std::uint64_t line = 0;    ///< 1-based line for line-oriented input (text traces, CSV); 0 otherwise.
  std::string expected;      ///< What the reader expected at that place.
  std::string found;         ///< What it found instead; may be empty.

  /// "<file>:<line>: expected X, found Y" for line input, "<file>: byte <offset>: expected X, found Y"
  /// otherwise.
  std::string message() const;
};

}  // namespace phasealloc
