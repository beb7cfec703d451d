// Bytes -> read_pickle; whatever parses goes through import_snapshot (with frame rules on, so the
// phase code runs too) and, when that succeeds, through the exporter.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "phasealloc/import/pickle_reader.hpp"
#include "phasealloc/export/snapshot_exporter.hpp"
#include "phasealloc/import/snapshot_importer.hpp"
#include "phasealloc/trace/trace_validate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto doc = phasealloc::read_pickle(bytes, "fuzz.pickle");
  if (!doc) {
    (void)doc.error().message();
    return 0;
  }
  phasealloc::snapshot_import_options options;
  options.phase_rules = {{"forward", "forward"}, {"backward", "backward"}};
  auto imported = phasealloc::import_snapshot(doc.value(), "fuzz.pickle", options);
  if (!imported) {
    (void)imported.error().message();
    return 0;
  }
  if (!phasealloc::validate(imported.value())) {
    __builtin_trap();  // the importer must always produce a valid trace
  }
  auto exported = phasealloc::export_snapshot(imported.value());
  if (!exported) {
    (void)exported.error().message();  // e.g. sizes whose synthetic addresses overflow 64 bits
  }
  return 0;
}
