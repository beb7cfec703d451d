// Bytes -> load_trace_bytes (binary or text). Whatever parses must validate without crashing and
// survive both codecs unchanged.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "phasealloc/trace/trace_binary.hpp"
#include "phasealloc/trace/trace_file.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "phasealloc/trace/trace_text.hpp"
#include "phasealloc/trace/trace_validate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto parsed = phasealloc::load_trace_bytes(bytes, "fuzz");
  if (!parsed) {
    (void)parsed.error().message();
    return 0;
  }
  const phasealloc::trace& t = parsed.value();
  if (auto v = phasealloc::validate(t); !v) {
    (void)v.error().message();
  }
  (void)phasealloc::summarize(t);
  auto binary = phasealloc::decode_trace(phasealloc::encode_trace(t), "re-encoded");
  if (!binary || !(binary.value() == t)) {
    __builtin_trap();  // the binary codec lost something
  }
  bool known_flags = true;
  for (const auto& e : t.events) {
    known_flags = known_flags && (e.flags & ~phasealloc::trace_flag::all) == 0;
  }
  if (known_flags) {  // text cannot spell unknown flag bits
    auto text = phasealloc::parse_trace_text(phasealloc::format_trace_text(t), "re-formatted");
    if (!text || !(text.value() == t)) {
      __builtin_trap();  // the text codec lost something
    }
  }
  return 0;
}
