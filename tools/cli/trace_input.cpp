#include "trace_input.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <zlib.h>

#include "phasealloc/import/kineto_importer.hpp"
#include "phasealloc/import/rmm_log_importer.hpp"
#include "phasealloc/import/snapshot_importer.hpp"
#include "phasealloc/synth/synth.hpp"
#include "phasealloc/trace/file_bytes.hpp"
#include "phasealloc/trace/trace_file.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "phasealloc/trace/trace_validate.hpp"

namespace phasealloc::cli {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

template <class R>
result<trace, std::string> lift(R&& r) {
  if (!r) return r.error().message();
  return std::move(r).value();
}

/// "" for a regular file (following links); otherwise what the path is, for the error.
std::string not_a_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return "no such file";
    return std::strerror(errno);
  }
  if (S_ISREG(st.st_mode)) return {};
  if (S_ISDIR(st.st_mode)) return "it is a directory, not a trace file";
  if (S_ISFIFO(st.st_mode)) return "it is a FIFO (named pipe), not a regular file; save the trace to a file first";
  if (S_ISCHR(st.st_mode)) return "it is a character device, not a regular file";
  if (S_ISBLK(st.st_mode)) return "it is a block device, not a regular file";
  if (S_ISSOCK(st.st_mode)) return "it is a socket, not a regular file";
  return "it is not a regular file";
}

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

}  // namespace

std::string gunzip(std::string_view compressed, std::string_view name, std::string& out,
                   std::size_t max_output_bytes) {
  out.clear();
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return fmt::format("'{}': cannot start zlib", name);  // gzip or zlib header
  char buffer[1 << 16];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(std::min<std::size_t>(compressed.size(), UINT32_MAX));
  std::size_t fed = z.avail_in;
  int rc = Z_OK;
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) break;
    out.append(buffer, sizeof buffer - z.avail_out);
    if (out.size() > max_output_bytes) {
      inflateEnd(&z);
      return fmt::format("'{}': gzip data expands to more than {} bytes; decompress it yourself if that is expected",
                         name, max_output_bytes);
    }
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0 && fed == compressed.size()) break;
      // Concatenated gzip members (gzip a b > c): go on with the next one.
      if (inflateReset(&z) != Z_OK) break;
      continue;
    }
    if (z.avail_in == 0 && fed < compressed.size()) {
      z.avail_in = static_cast<uInt>(std::min<std::size_t>(compressed.size() - fed, UINT32_MAX));
      fed += z.avail_in;
      continue;
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0) {
      inflateEnd(&z);
      return fmt::format("'{}': the gzip data is truncated (after {} compressed bytes)", name, compressed.size());
    }
  }
  const bool ok = rc == Z_STREAM_END;
  const std::string why = z.msg != nullptr ? z.msg : "corrupt data";
  const uLong offset = z.total_in;
  inflateEnd(&z);
  if (!ok) return fmt::format("'{}': byte {}: bad gzip data ({})", name, offset, why);
  return {};
}

result<trace, std::string> load_any_trace(std::string_view source, std::string* empty_error,
                                          const trace_input_options& options) {
  if (source.starts_with("synth:")) {
    auto job = parse_job(source.substr(6));
    if (!job) return job.error();
    return synthesize(job.value());
  }
  const std::string name(source);
  if (name.empty()) return std::string("no trace named (an empty path)");
  if (std::string what = not_a_regular_file(name); !what.empty()) {
    return fmt::format("cannot read '{}': {}", name, what);
  }
  const auto file = read_file_bytes(name);
  if (!file) return fmt::format("cannot read '{}': {}", name, file.error().found);
  std::string_view bytes = file.value();
  if (bytes.empty()) return fmt::format("'{}' is empty (0 bytes): there is no trace in it", name);

  // PyTorch's profiler writes .json.gz; any input may come gzipped. The kind is sniffed from the
  // decompressed bytes and the name without ".gz".
  std::string ext = std::filesystem::path(name).extension().string();
  std::string compressed_note;
  std::string plain;  // the decompressed bytes of a gzip file
  if (is_gzip(bytes)) {
    if (std::string error = gunzip(bytes, name, plain); !error.empty()) return error;
    bytes = plain;
    if (ends_with(name, ".gz")) ext = std::filesystem::path(name.substr(0, name.size() - 3)).extension().string();
    compressed_note = " (after gzip decompression)";
    if (bytes.empty()) return fmt::format("'{}' decompresses to 0 bytes: there is no trace in it", name);
  }

  const auto first = [&]() -> int {
    for (const char c : bytes) {
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return static_cast<unsigned char>(c);
    }
    return -1;
  }();
  std::string kind;
  result<trace, std::string> loaded = std::string();
  if (ext == ".pickle" || ext == ".pkl" || static_cast<unsigned char>(bytes[0]) == 0x80) {
    kind = "a PyTorch snapshot with no allocations or segments";
    snapshot_import_options snapshot_options;
    snapshot_options.device = options.device;
    loaded = lift(import_snapshot(bytes, name, snapshot_options));
  } else if (ext == ".json" || first == '{' || first == '[') {
    kind = "a JSON document with no memory events (a PyTorch profiler trace holds {\"traceEvents\": [...]} with [memory] "
           "events when recorded with profile_memory=True)";
    kineto_import_options kineto_options;
    if (options.device) kineto_options.device_id = *options.device;
    loaded = lift(import_kineto(bytes, name, kineto_options));
  } else if (ext == ".csv" || bytes.starts_with("Thread,")) {
    kind = "an RMM log with no allocations or frees";
    loaded = lift(import_rmm_log(bytes, name));
  } else if (first == -1) {
    return fmt::format("'{}' holds only white space{}: there is no trace in it", name, compressed_note);
  } else {
    kind = "a phasealloc trace with no events";
    loaded = lift(load_trace_bytes(bytes, name));
  }
  if (!loaded) return loaded.error();
  if (loaded.value().events.empty() && empty_error != nullptr) {
    *empty_error = fmt::format("'{}'{} is {}: nothing to replay", name, compressed_note, kind);
  }
  return loaded;
}

result<trace, std::string> load_valid_trace(std::string_view source, bool check, const trace_input_options& options,
                                            trace_summary* summary) {
  std::string empty;
  auto loaded = load_any_trace(source, &empty, options);
  if (!loaded) return loaded;
  if (loaded.value().events.empty()) {
    return empty.empty() ? fmt::format("'{}' holds no events: nothing to replay", source) : empty;
  }
  if (!check) {
    if (summary != nullptr) *summary = summarize(loaded.value());
    return loaded;
  }
  const auto invalid = [&](const trace_validation_error& error) {
    return fmt::format("{}: not a valid trace: {} (phasealloc inspect shows the whole trace; --no-validate runs it "
                       "anyway)",
                       source, error.message());
  };
  if (summary != nullptr) {
    auto v = validate_and_summarize(loaded.value());
    if (!v) return invalid(v.error());
    *summary = v.value();
  } else if (auto v = validate(loaded.value()); !v) {
    return invalid(v.error());
  }
  return loaded;
}

std::string display_name(std::string_view source) {
  if (source.starts_with("synth:")) return std::string(source);
  return std::filesystem::path(std::string(source)).filename().string();
}

}  // namespace phasealloc::cli
