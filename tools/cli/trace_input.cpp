#include "trace_input.hpp"

#include <filesystem>
#include <fstream>

#include "phasealloc/import/kineto_importer.hpp"
#include "phasealloc/import/rmm_log_importer.hpp"
#include "phasealloc/import/snapshot_importer.hpp"
#include "phasealloc/synth/synth.hpp"
#include "phasealloc/trace/trace_file.hpp"

namespace phasealloc::cli {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// The first bytes of a file, to sniff its kind when the extension says nothing.
std::string head(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(16, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  return bytes;
}

template <class R>
result<trace, std::string> lift(R&& r) {
  if (!r) return r.error().message();
  return std::move(r).value();
}

}  // namespace

result<trace, std::string> load_any_trace(std::string_view source) {
  if (source.starts_with("synth:")) {
    auto job = parse_job(source.substr(6));
    if (!job) return job.error();
    return synthesize(job.value());
  }
  const std::filesystem::path path{std::string(source)};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return "cannot read '" + std::string(source) + "': no such file";
  const std::string ext = path.extension().string();
  const std::string first = head(path);
  if (ext == ".pickle" || ext == ".pkl" || (!first.empty() && static_cast<unsigned char>(first[0]) == 0x80)) {
    return lift(import_snapshot_file(path));
  }
  if (ext == ".json" || (!first.empty() && (first[0] == '{' || first[0] == '['))) return lift(import_kineto_file(path));
  if (ext == ".csv" || first.starts_with("Thread,")) return lift(import_rmm_log_file(path));
  return lift(load_trace(path));
}

std::string display_name(std::string_view source) {
  if (source.starts_with("synth:")) return std::string(source);
  return std::filesystem::path(std::string(source)).filename().string();
}

}  // namespace phasealloc::cli
