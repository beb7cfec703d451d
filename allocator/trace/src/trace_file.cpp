#include "phasealloc/trace/trace_file.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <system_error>

#include "phasealloc/trace/file_bytes.hpp"
#include "phasealloc/trace/trace_binary.hpp"
#include "phasealloc/trace/trace_records.hpp"
#include "phasealloc/trace/trace_text.hpp"

namespace phasealloc {

result<trace, trace_error> load_trace_bytes(std::string_view bytes, std::string_view source_name) {
  if (bytes.substr(0, trace_binary_magic.size()) == trace_binary_magic) {
    return decode_trace(bytes, source_name);
  }
  // A text trace may start with blank lines or a UTF-8 byte order mark.
  std::string_view text = bytes;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") {
    text.remove_prefix(3);
  }
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text.substr(first, trace_text_header.size()) == trace_text_header) {
    auto parsed = parse_trace_text(text, source_name);
    if (!parsed && bytes.size() != text.size()) {
      trace_error err = parsed.error();
      err.offset += bytes.size() - text.size();
      return err;
    }
    return parsed;
  }
  return trace_error{std::string(source_name), 0, 0,
                     fmt::format("a phasealloc trace (binary magic \\x89PAT or a '{} v1' line)", trace_text_header),
                     bytes.empty() ? "an empty file" : "other bytes"};
}

result<trace, trace_error> load_trace(const std::filesystem::path& path) {
  auto bytes = read_file_bytes(path);
  if (!bytes) return bytes.error();
  return load_trace_bytes(bytes.value(), path.string());
}

trace_file_format format_for_path(const std::filesystem::path& path) {
  return path.extension() == ".txt" ? trace_file_format::text : trace_file_format::binary;
}

result<std::monostate, trace_error> save_trace(const std::filesystem::path& path, const trace& t,
                                               trace_file_format format) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return trace_error{tmp.string(), 0, 0, "a writable file", "it cannot be created"};
    }
    auto written = format == trace_file_format::binary ? write_trace(t, out, tmp.string())
                   : format == trace_file_format::text ? write_trace_text(t, out, tmp.string())
                                                       : write_trace_records(t, out, tmp.string());
    if (!written) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      return written.error();
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    return trace_error{path.string(), 0, 0, "to rename the temporary file into place", why};
  }
  return std::monostate{};
}

}  // namespace phasealloc
