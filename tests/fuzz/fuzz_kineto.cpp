// Bytes -> import_kineto; whatever imports must validate.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "phasealloc/import/kineto_importer.hpp"
#include "phasealloc/trace/trace_validate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto imported = phasealloc::import_kineto(text, "fuzz.json");
  if (!imported) {
    (void)imported.error().message();
    return 0;
  }
  if (!phasealloc::validate(imported.value())) {
    __builtin_trap();
  }
  return 0;
}
