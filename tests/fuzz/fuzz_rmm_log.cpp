// Bytes -> import_rmm_log; whatever imports must validate.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "phasealloc/import/rmm_log_importer.hpp"
#include "phasealloc/trace/trace_validate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto imported = phasealloc::import_rmm_log(text, "fuzz.csv");
  if (!imported) {
    (void)imported.error().message();
    return 0;
  }
  if (!phasealloc::validate(imported.value())) {
    __builtin_trap();
  }
  return 0;
}
